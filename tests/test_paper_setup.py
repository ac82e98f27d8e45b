"""config/paper.yaml (and its raw-data overlay) on small fake inputs written here: the DAG
holds every table and figure, with the job counts the tables spec implies."""

from __future__ import annotations

import collections

import pytest
import yaml

from workflow_helpers import REPO, copy_workflow, edit_yaml, planned_jobs, run_snakemake

SPEC = yaml.safe_load((REPO / "config" / "tables.yaml").read_text())
PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())


def used_experiments() -> set[str]:
    names = {c["experiment"] for t in SPEC["tables"].values() for c in t.get("columns", [])}
    for figure in SPEC["figures"].values():
        names |= set(figure.get("experiments", [figure.get("experiment")]))
    for finding in SPEC["findings"]:
        names |= {finding[side]["experiment"] for side in ("compare", "against") if "experiment" in finding[side]}
    return names


def fake_processed_files(root, files):
    """The authors' processed layout: header row, column 0 patient id, column 3 text."""
    root.mkdir(parents=True, exist_ok=True)
    for entry in files:
        rows = [f"p{i},note{i},{i},patient {i} was seen in clinic today and is doing well on aspirin" for i in range(3)]
        (root / entry["path"]).write_text("patient_id,note_id,sentence,text\n" + "\n".join(rows) + "\n")


def fake_checkpoints(root, names):
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "bert_config.json").write_text("{}")  # old pytorch_pretrained_bert layout


@pytest.fixture(scope="module")
def paper_copy(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("paper"))
    for dataset in PAPER["datasets"].values():
        fake_processed_files(workdir / dataset["root"], dataset["files"])
    local = [m for m, spec in PAPER["models"].items() if spec["path"].startswith("data/")]
    fake_checkpoints(workdir / "data/paper/checkpoints", local)
    return workdir


def test_paper_dag_lists_every_table_figure_and_the_expected_jobs(paper_copy):
    jobs = planned_jobs(paper_copy, "--configfile", "config/paper.yaml")
    counts = collections.Counter(rule for rule, _ in jobs)
    outputs = {out for _, out in jobs}
    for table in SPEC["tables"]:
        assert any(f"results/tables/{table}.md" in out for out in outputs), table
    for figure in SPEC["figures"]:
        assert any(f"results/figures/{figure}.pdf" in out for out in outputs), figure
    experiments = used_experiments()
    # each (dataset, model, energy) an experiment needs is scored once, in the dataset's shards
    scored = {(e["dataset"], e[role], e["energy"]) for name, e in SPEC["experiments"].items() if name in experiments
              for role in ("target", "reference")}
    shards = {name: d["shards"] for name, d in PAPER["datasets"].items()}
    assert counts["prepare_dataset"] == len({d for d, _, _ in scored}) == 2
    assert counts["score_shard"] == sum(shards[d] for d, _, _ in scored)
    assert counts["join_scores"] == len(scored)
    assert counts["attack_table"] == len(experiments)
    assert counts["render_table"] == len(SPEC["tables"])
    assert counts["render_figure"] == len(SPEC["figures"])
    # nothing is trained or generated: the paper's checkpoints and files are used as they are
    assert not {"train_model", "train_tokenizer", "build_corpora", "select_samples"} & set(counts)


def test_raw_overlay_imports_notes_first(paper_copy):
    raw = yaml.safe_load((REPO / "config" / "paper_raw.yaml").read_text())["raw"]
    mimic = paper_copy / raw["mimic"]["noteevents"]
    mimic.parent.mkdir(parents=True, exist_ok=True)
    mimic.write_text("ROW_ID,SUBJECT_ID,CATEGORY,ISERROR,TEXT\n")
    for path in raw["mimic"]["member_lists"] + [raw["mimic"]["names"]]:
        (paper_copy / path).write_text("SUBJECT_ID,name\n1,Ann\n")
    (paper_copy / raw["i2b2"]["xml"]).mkdir(parents=True)
    jobs = planned_jobs(paper_copy, "--configfile", "config/paper.yaml", "config/paper_raw.yaml")
    counts = collections.Counter(rule for rule, _ in jobs)
    assert counts["import_mimic_notes"] == 1 and counts["import_i2b2_notes"] == 1
    assert counts["prepare_dataset"] == 2


def test_a_missing_checkpoint_is_named(paper_copy, tmp_path):
    config = tmp_path / "missing.yaml"
    config.write_text((REPO / "config" / "paper.yaml").read_text())
    edit_yaml(config, models__base={"path": "data/paper/checkpoints/nowhere"})
    result = run_snakemake(paper_copy, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert "data/paper/checkpoints/nowhere" in result.stdout + result.stderr
