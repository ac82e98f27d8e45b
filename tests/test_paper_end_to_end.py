"""config/paper.yaml run for real, as a user with credentialed data would run it, on fake files in
the real formats written here (issue 42): the authors' processed CSVs, ClinicalBERT-layout
checkpoints (bert_config.json, pytorch_model.bin with LayerNorm gamma/beta, vocab.txt), the two
references as hub ids from a local hub cache (HF_HOME, offline), and the raw overlay's
NOTEEVENTS.csv (quoted multi-line notes), Lehman et al.'s patient list and names
(SUBJECT_ID,FIRST_NAME,LAST_NAME) and i2b2 2014 XML. MIMIC's SUBJECT_IDs and i2b2's patient
numbers are the same numbers (101-110), as they are in the real data; the models are tiny
(2 layers, 32 wide) and the settings small (one shard, K = 2, 20 bootstrap replicates)."""

from __future__ import annotations

import collections

import pandas as pd
import pytest
import yaml
from conftest import TINY_WORDS, build_tiny_bert, build_tiny_tokenizer, tiny_vocab
from test_models import write_old_layout
from workflow_helpers import REPO, copy_workflow, edit_yaml, run_snakemake

pytestmark = pytest.mark.workflow

PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
SPEC = yaml.safe_load((REPO / "config" / "tables.yaml").read_text())
DEFAULT_TABLES = [name for name, t in SPEC["tables"].items() if t.get("group", "default") == "default"]
DEFAULT_FIGURES = [name for name, f in SPEC["figures"].items() if f.get("group", "default") == "default"]
SNAPSHOT = "0" * 40
SMALL = {"scoring__patterns": 2, "scoring__threads": 1, "metrics__bootstrap": 20, "metrics__draws": 2}

# the processed files' patients: (role, source) -> patient ids; the same numbers in both sources
PATIENTS = {
    ("member", "mimic"): [101, 102, 103, 104],
    ("member_heldin", "mimic"): [105, 106],
    ("nonmember", "mimic"): [107, 108, 109, 110],
    ("nonmember", "i2b2"): [101, 102, 103, 104],
    ("population", "i2b2"): [105, 106, 107, 108],
}
SENTENCES = 3  # per patient and file
NAMES = {101: ("ann", "lee"), 102: ("bo", "kim"), 103: ("cy", "diaz"), 104: ("di", "rossi"), 105: ("ed", "wu"),
         106: ("flo", "ngo")}  # fmt: skip
LENGTHS = {"short": 12, "long": 25}  # words of TINY_WORDS: one word piece each (and "." one more)


def sentence(rng, words: int) -> str:
    return " ".join(rng.choice(TINY_WORDS, words))


def file_rows(rng, patients, length, named=False):
    rows = []
    for patient in patients:
        for i in range(SENTENCES):
            text = sentence(rng, LENGTHS[length])
            if named:
                text = " ".join(NAMES[patient]) + " " + text
            rows.append((patient, f"{patient}-{i}", i, text))
    return pd.DataFrame(rows, columns=["patient_id", "note_id", "sentence", "text"])


def processed_files(root, rng):
    """The authors' processed layout: header, column 0 the patient id, column 3 the text."""
    root.mkdir(parents=True, exist_ok=True)
    for dataset in ("clinical", "clinical_named"):
        for entry in PAPER["datasets"][dataset]["files"]:
            named = "named" in entry["path"]
            patients = PATIENTS[(entry["role"], entry["source"])]
            file_rows(rng, patients, entry["length"], named).to_csv(root / entry["path"], index=False)


def tiny_model(directory, seed, layout):
    """A tiny BERT on the tiny vocabulary: `old` (ClinicalBERT's pytorch_pretrained_bert layout) or
    `modern` (save_pretrained, with its tokenizer)."""
    tokenizer = build_tiny_tokenizer(directory.parent / f"{directory.name}_tokenizer")
    model = build_tiny_bert(seed, len(tokenizer))
    if layout == "old":
        write_old_layout(directory, model)
    else:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)


def hub_cache(hf_home, repo_id, seed, vocabulary_tokens=None):
    """A hub id in the local hub cache (HF_HOME/hub), as `huggingface_hub` lays it out; with
    `vocabulary_tokens`, its tokenizer files hold only that many tokens (a stale cache entry)."""
    from transformers import BertTokenizerFast

    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / SNAPSHOT
    tiny_model(snapshot, seed, "modern")
    if vocabulary_tokens is not None:
        for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
            (snapshot / name).unlink(missing_ok=True)
        vocab = {token: i for i, token in enumerate(tiny_vocab()[:vocabulary_tokens])}
        BertTokenizerFast(vocab=vocab, do_lower_case=True).save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)


def paper_inputs(workdir, hf_home, small_tokenizer=False):
    """Every file config/paper.yaml names, fake, in the real formats."""
    import numpy as np

    rng = np.random.default_rng(0)
    processed_files(workdir / PAPER["datasets"]["clinical"]["root"], rng)
    for seed, name in enumerate(("base", "base_pp", "large", "large_pp", "base_b")):
        tiny_model(workdir / PAPER["models"][name]["path"], seed, "old")
    tiny_model(workdir / PAPER["models"]["reference_init"]["path"], 7, "modern")
    for seed, name in ((8, "ref_domain"), (9, "ref_general")):
        hub_cache(
            hf_home, PAPER["models"][name]["path"], seed, 5 if small_tokenizer and name == "ref_general" else None
        )
    pool = pd.DataFrame({"sample_id": ["r0"], "group_id": ["r"], "text": [sentence(rng, 12)]})
    pool.to_csv(workdir / PAPER["references"]["pool"], index=False)


def small_config(workdir, *names):
    """config/paper.yaml (and overlays) with small settings, merged into one file."""
    config = {}
    for name in names:
        config |= yaml.safe_load((REPO / "config" / name).read_text())
    path = workdir / "paper_small.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    edit_yaml(path, **SMALL)
    for dataset in config["datasets"]:
        edit_yaml(path, **{f"datasets__{dataset}__shards": 1})
    return path


def env(hf_home):
    return {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_the_papers_setup_builds_every_table_and_figure_from_processed_files(tmp_path):
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf")
    hf_home = tmp_path / "hf"
    paper_inputs(workdir, hf_home)
    config = small_config(workdir, "paper.yaml")
    run_snakemake(workdir, "--configfile", str(config), env=env(hf_home), timeout=1500)
    results = workdir / "results" / "paper"
    for table in DEFAULT_TABLES:
        assert (results / "tables" / f"{table}.md").stat().st_size > 0, table
    for figure in DEFAULT_FIGURES:
        assert (results / "figures" / f"{figure}.pdf").stat().st_size > 0, figure
    assert (results / "findings.md").is_file() and (results / "paper_comparison.md").is_file()
    # one patient per (source, id): the ids written into the files, namespaced by their source
    samples = pd.read_parquet(results / "samples" / "clinical.parquet")
    assert len(samples) == sum(len(p) * SENTENCES * len(LENGTHS) for p in PATIENTS.values())
    for (role, source), patients in PATIENTS.items():
        rows = samples[(samples["role"] == role) & (samples["source"] == source)]
        assert sorted(set(rows["group_id"])) == sorted(f"{source}:{p}" for p in patients), (role, source)
        assert collections.Counter(rows["length"]) == {"short": len(patients) * 3, "long": len(patients) * 3}
    # the patient level aggregates over those patients: 4 MIMIC members against 4 i2b2 non-members
    attack = pd.read_parquet(results / "attack" / "base_long_i2b2_patient.parquet")
    by_role = attack.groupby("role")["group_id"].apply(lambda ids: sorted(set(ids))).to_dict()
    assert by_role["member"] == [f"mimic:{p}" for p in PATIENTS[("member", "mimic")]]
    assert by_role["nonmember"] == [f"i2b2:{p}" for p in PATIENTS[("nonmember", "i2b2")]]


def raw_inputs(workdir, raw):
    """NOTEEVENTS.csv with quoted multi-line notes, Lehman et al.'s patient list (SUBJECT_ID and the
    note's TEXT), the names in their layout, and i2b2 2014 XML, the same patient numbers in both."""
    import numpy as np

    rng = np.random.default_rng(1)
    (workdir / raw["i2b2"]["xml"]).mkdir(parents=True)

    def note():  # two short and two long sentences over wrapped lines, a section header, a blank line
        short_a, short_b, long_a, long_b = (sentence(rng, n) for n in (12, 12, 25, 25))
        return (
            f"History:\n{short_a.capitalize()}.\n\n{short_b.capitalize()}\nand more. {long_a.capitalize()}.\n"
            f"{long_b.capitalize()}."
        )

    rows = [(i, subject, "Discharge summary", "", note()) for i, subject in enumerate(range(101, 111), start=1)]
    rows.append((99, 111, "Discharge summary", 1, note()))  # ISERROR: dropped
    notes = pd.DataFrame(rows, columns=["ROW_ID", "SUBJECT_ID", "CATEGORY", "ISERROR", "TEXT"])
    notes.to_csv(workdir / raw["mimic"]["noteevents"], index=False)
    assert "\n" in notes["TEXT"][0] and '"History:' in (workdir / raw["mimic"]["noteevents"]).read_text()
    trained = notes[notes["SUBJECT_ID"].between(101, 106)][["SUBJECT_ID", "TEXT"]]
    trained.to_csv(workdir / raw["mimic"]["member_lists"][0], index=False)
    names = pd.DataFrame([(p, first, last) for p, (first, last) in NAMES.items()],
                         columns=["SUBJECT_ID", "FIRST_NAME", "LAST_NAME"])  # fmt: skip
    names.to_csv(workdir / raw["mimic"]["names"], index=False)
    for patient in range(101, 109):
        text = note()
        tags = '<TAGS><DATE id="P0" start="0" end="7" text="History" TYPE="DATE" comment="" /></TAGS>'
        (workdir / raw["i2b2"]["xml"] / f"{patient}-01.xml").write_text(
            f'<?xml version="1.0" encoding="UTF-8" ?>\n<deIdi2b2><TEXT><![CDATA[{text}]]></TEXT>{tags}</deIdi2b2>\n'
        )


def test_the_raw_overlay_keeps_patients_apart_and_inserts_full_names(tmp_path):
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf")
    hf_home = tmp_path / "hf"
    paper_inputs(workdir, hf_home)
    overlay = yaml.safe_load((REPO / "config" / "paper_raw.yaml").read_text())
    raw_inputs(workdir, overlay["raw"])
    config = small_config(workdir, "paper.yaml", "paper_raw.yaml")
    edit_yaml(config, raw__mimic__patients={"member": 4, "member_heldin": 2, "nonmember": 4},
              raw__i2b2__patients={"nonmember": 4, "population": 4})  # fmt: skip
    targets = ["results/paper/tables/table2.md", "results/paper/tables/table6.md"]
    run_snakemake(workdir, "--configfile", str(config), "--", *targets, env=env(hf_home), timeout=1500)
    results = workdir / "results" / "paper"
    assert all((workdir / target).stat().st_size > 0 for target in targets)
    # every trained patient drawn (6 of 6): members and held-in members, their names first and last
    members = pd.concat(pd.read_csv(results / "raw" / f"mimic_{r}.csv") for r in ("member", "member_heldin"))
    named = pd.concat(pd.read_csv(results / "raw" / f"mimic_named_{r}.csv") for r in ("member", "member_heldin"))
    assert sorted(set(members["patient_id"])) == [101, 102, 103, 104, 105, 106]
    expected = [f"{NAMES[p][0]} {NAMES[p][1]} {text}" for p, text in zip(members["patient_id"], members["text"])]
    assert named["text"].tolist() == expected
    # MIMIC's 101-110 and i2b2's 101-108 are different patients: each its own group, by source
    samples = pd.read_parquet(results / "samples" / "clinical.parquet")
    groups = samples.groupby("source")["group_id"].apply(lambda ids: sorted(set(ids))).to_dict()
    assert groups == {"mimic": sorted(f"mimic:{p}" for p in range(101, 111)),
                      "i2b2": sorted(f"i2b2:{p}" for p in range(101, 109))}  # fmt: skip
    # the quoted multi-line notes were split into five sentences each (the header "History:", the
    # sentence before the blank line, the wrapped one, the two long ones), the ISERROR note dropped
    per_note = pd.read_csv(results / "raw" / "mimic_nonmember.csv").groupby("note_id").size()
    assert len(per_note) == 4 and set(per_note) == {5}


def test_a_cached_tokenizer_that_is_not_its_checkpoints_is_refused_before_any_job(tmp_path):
    """The hub cache's bert-base-uncased with a 5-token tokenizer counted the lengths with a
    warning in a log; now the config check refuses it in one line."""
    (tmp_path / "wf").mkdir()
    workdir = copy_workflow(tmp_path / "wf")
    hf_home = tmp_path / "hf"
    paper_inputs(workdir, hf_home, small_tokenizer=True)
    config = small_config(workdir, "paper.yaml")
    result = run_snakemake(workdir, "--configfile", str(config), env=env(hf_home), check=False)
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if line.startswith("mlmia: error:")]
    assert result.returncode != 0 and "Traceback" not in output
    assert errors == [
        "mlmia: error: config key models.ref_general.path: the tokenizer bert-base-uncased has 5 tokens but the "
        f"checkpoint bert-base-uncased has {len(tiny_vocab())} vocabulary rows, more than padding explains: it is "
        "not the checkpoint's own tokenizer"
    ]
    assert not (workdir / "results").exists()
