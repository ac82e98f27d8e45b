"""config/paper.yaml (and its raw-data overlay) on small fake inputs written here: the DAG
holds every table and figure, with the job counts the tables spec implies."""

from __future__ import annotations

import collections

import pytest
import yaml
from workflow_helpers import REPO, copy_workflow, edit_yaml, planned_jobs, run_snakemake

from mlmia.terms.schema import defaults as schema_defaults

SPEC = yaml.safe_load((REPO / "config" / "tables.yaml").read_text())
PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())


def in_group(spec: dict, group: str) -> bool:
    return spec.get("group", "default") == group


def used_experiments(group: str = "default") -> set[str]:
    names = {c["experiment"] for t in SPEC["tables"].values() if in_group(t, group) for c in t.get("columns", [])}
    for figure in SPEC["figures"].values():
        if in_group(figure, group):
            names |= set(figure.get("experiments", [figure.get("experiment")]))
    for finding in SPEC["findings"]:
        if in_group(finding, group):
            names |= {finding[s]["experiment"] for s in ("compare", "against") if "experiment" in finding[s]}
    return names


def fake_processed_files(root, files):
    """The authors' processed layout: header row, column 0 patient id, column 3 text."""
    root.mkdir(parents=True, exist_ok=True)
    for entry in files:
        rows = [f"p{i},note{i},{i},patient {i} was seen in clinic today and is doing well on aspirin" for i in range(3)]
        (root / entry["path"]).write_text("patient_id,note_id,sentence,text\n" + "\n".join(rows) + "\n")


def fake_checkpoints(workdir, paths):
    for path in paths:
        (workdir / path).mkdir(parents=True, exist_ok=True)
        (workdir / path / "bert_config.json").write_text("{}")  # old pytorch_pretrained_bert layout


@pytest.fixture(scope="module")
def paper_copy(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("paper"))
    for dataset in PAPER["datasets"].values():
        fake_processed_files(workdir / dataset["root"], dataset["files"])
    fake_checkpoints(workdir, [spec["path"] for spec in PAPER["models"].values() if spec["path"].startswith("data/")])
    (workdir / PAPER["references"]["pool"]).write_text("sample_id,group_id,text\n")
    return workdir


def test_paper_dag_lists_every_table_figure_and_the_expected_jobs(paper_copy):
    jobs = planned_jobs(paper_copy, "--configfile", "config/paper.yaml")
    counts = collections.Counter(rule for rule, _ in jobs)
    outputs = {out for _, out in jobs}
    tables = [name for name, spec in SPEC["tables"].items() if in_group(spec, "default")]
    figures = [name for name, spec in SPEC["figures"].items() if in_group(spec, "default")]
    for table in tables:
        assert any(f"results/paper/tables/{table}.md" in out for out in outputs), table
    for figure in figures:
        assert any(f"results/paper/figures/{figure}.pdf" in out for out in outputs), figure
    experiments = used_experiments()
    # each (dataset, model, energy) an experiment needs is scored once, in the dataset's shards
    scored = {
        (e["dataset"], e[role], e.get("energy", "masked"))
        for name, e in SPEC["experiments"].items()
        if name in experiments
        for role in ("target", "reference")
        if e.get(role)
    }
    shards = {name: d["shards"] for name, d in PAPER["datasets"].items()}
    assert counts["prepare_dataset"] == len({d for d, _, _ in scored}) == 2
    assert counts["score_shard"] == sum(shards[d] for d, _, _ in scored)
    assert counts["join_scores"] == len(scored)
    assert counts["attack_table"] == len(experiments)
    assert counts["render_table"] == len(tables)
    assert counts["render_figure"] == len(figures)
    # nothing is trained or generated: the paper's checkpoints and files are used as they are
    assert not {"train_model", "train_tokenizer", "build_corpora", "select_samples"} & set(counts)


def test_paper_zoo_fine_tunes_its_reference_pool_from_the_public_checkpoint(paper_copy):
    jobs = planned_jobs(paper_copy, "zoo", "--configfile", "config/paper.yaml")
    outputs = " ".join(out for _, out in jobs)
    for name, spec in SPEC["tables"].items():
        if in_group(spec, "zoo"):
            assert f"results/paper/tables/{name}.md" in outputs, name
    trained = [out for rule, out in jobs if rule == "train_model"]
    assert len(trained) == PAPER["references"]["count"]  # the pool's references, and nothing else
    assert "dp_audit" not in PAPER and "table_dp" not in outputs  # no DP targets in the paper's setup


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
    # d-exposure on the same XML: its PHI tags label the notes, the tagger's tokenizer is
    # trained on them; one tagger per seed and repetition count, and the overfitting run
    jobs = planned_jobs(paper_copy, "dexposure", "--configfile", "config/paper.yaml", "config/paper_raw.yaml")
    counts = collections.Counter(rule for rule, _ in jobs)
    defaults = schema_defaults("dexposure")
    seeds, repetitions, overfit_seeds = defaults["seeds"], defaults["repetitions"], defaults["overfit"]["seeds"]
    assert counts["dexposure_notes"] == counts["dexposure_tokenizer"] == counts["dexposure_report"] == 1
    assert counts["dexposure_train"] == seeds * len(repetitions) + overfit_seeds
    assert not {"build_corpora", "train_tokenizer", "train_model"} & set(counts)


def test_dexposure_on_xml_alone_refuses_the_world_tokenizer(paper_copy, tmp_path):
    config = tmp_path / "xml_world_tokenizer.yaml"
    config.write_text((REPO / "config" / "paper.yaml").read_text())
    edit_yaml(config, dexposure={"i2b2_xml": ["data/paper/raw/i2b2-2014"]})
    result = run_snakemake(paper_copy, "-n", "dexposure", "--configfile", str(config), check=False)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("mlmia: error:")]
    assert errors == [
        "mlmia: error: config key dexposure.tokenizer: 'world' needs the embedded world (a corpus: section); "
        "with dexposure.i2b2_xml alone, set it to 'notes'"
    ]


def test_a_missing_checkpoint_is_named(paper_copy, tmp_path):
    config = tmp_path / "missing.yaml"
    config.write_text((REPO / "config" / "paper.yaml").read_text())
    edit_yaml(config, models__base={"path": "data/paper/checkpoints/nowhere"})
    result = run_snakemake(paper_copy, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("mlmia: error:")]
    assert errors == ["mlmia: error: config key models.base.path: no such directory: data/paper/checkpoints/nowhere"]


def test_raw_importers_write_the_processed_files(tmp_path):
    """The raw-data rules on small fake MIMIC-III and i2b2 files, run for real: the processed
    CSVs (column 0 patient id, column 3 text), the paper's patient sampling, Base-b's names."""
    import pandas as pd

    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf")
    fake_checkpoints(workdir, [spec["path"] for spec in PAPER["models"].values() if spec["path"].startswith("data/")])
    pool = workdir / PAPER["references"]["pool"]  # the config names it; it must exist
    pool.parent.mkdir(parents=True, exist_ok=True)
    pool.write_text("sample_id,group_id,text\n")
    raw = workdir / "raw"
    (raw / "i2b2").mkdir(parents=True)
    note = "Admission Date: [**2101-3-4**]\n\nHistory: The patient was admitted with chest pain. He was given aspirin."
    rows = [(i, 10 + i, "Discharge summary", "", note) for i in range(1, 7)] + [(7, 99, "Discharge summary", 1, note)]
    pd.DataFrame(rows, columns=["ROW_ID", "SUBJECT_ID", "CATEGORY", "ISERROR", "TEXT"]).to_csv(
        raw / "NOTEEVENTS.csv", index=False
    )
    (raw / "trained.csv").write_text("SUBJECT_ID,TEXT\n11,x\n12,x\n13,x\n")
    (raw / "names.csv").write_text("SUBJECT_ID,name\n11,Ann Lee\n12,Bo Kim\n13,Cy Diaz\n")
    for patient in (100, 101, 102, 103):
        (raw / "i2b2" / f"{patient}-01.xml").write_text(
            f'<?xml version="1.0" encoding="UTF-8" ?><deIdi2b2><TEXT><![CDATA[Record {patient}. The patient '
            f"was seen in clinic today. Blood pressure was stable.]]></TEXT><TAGS></TAGS></deIdi2b2>"
        )
    config = tmp_path / "raw.yaml"
    config.write_text((REPO / "config" / "paper.yaml").read_text())
    raw_config = yaml.safe_load((REPO / "config" / "paper_raw.yaml").read_text())
    raw_config["raw"] = {
        "seed": 0,
        "mimic": {
            "noteevents": "raw/NOTEEVENTS.csv",
            "member_lists": ["raw/trained.csv"],
            "names": "raw/names.csv",
            "categories": ["Discharge summary"],
            "patients": {"member": 2, "member_heldin": 1, "nonmember": 2},
        },
        "i2b2": {"xml": "raw/i2b2", "patients": {"nonmember": 2, "population": 2}},
    }
    raw_config["dexposure"]["i2b2_xml"] = ["raw/i2b2"]  # d-exposure's XML is the same (a file the config names exists)
    overlay = tmp_path / "raw_overlay.yaml"
    overlay.write_text(yaml.safe_dump(raw_config))
    targets = [
        "results/paper/raw/mimic_member.csv",
        "results/paper/raw/mimic_nonmember.csv",
        "results/paper/raw/mimic_named_member.csv",
        "results/paper/raw/i2b2_population.csv",
    ]
    run_snakemake(workdir, "--configfile", str(config), str(overlay), "--", *targets)
    members = pd.read_csv(workdir / "results/paper/raw/mimic_member.csv")
    nonmembers = pd.read_csv(workdir / "results/paper/raw/mimic_nonmember.csv")
    named = pd.read_csv(workdir / "results/paper/raw/mimic_named_member.csv")
    assert list(members.columns) == ["patient_id", "note_id", "sentence", "text"]
    # members from the trained patients, non-members from the others, ISERROR rows dropped
    assert set(members.patient_id) < {11, 12, 13} and members.patient_id.nunique() == 2
    assert set(nonmembers.patient_id) <= {14, 15, 16} and nonmembers.patient_id.nunique() == 2
    assert "The patient was admitted with chest pain." in set(members.text)
    assert "He was given aspirin." in set(members.text)
    names = {11: "Ann Lee", 12: "Bo Kim", 13: "Cy Diaz"}
    assert [f"{names[p]} {t}" for p, t in zip(members.patient_id, members.text)] == named.text.tolist()
    population = pd.read_csv(workdir / "results/paper/raw/i2b2_population.csv")
    assert population.patient_id.nunique() == 2 and set(population.patient_id) <= {100, 101, 102, 103}
