"""The catalogue of bad inputs (docs/bad_inputs.md): each one refused with a non-zero exit and one
line that names the file, row or key, no traceback, no partial output, the input unchanged,
and no sample text in the message.

Every sample text here carries the marker word MARKER, so a message that quotes a cell is
caught. The cases are data (`CLI_CASES`, `WORKFLOW_CASES`, `IMPORT_CASES`); the docs table
lists the same case ids (test_the_docs_list_every_case).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_workflow, paper_scores_root, run_snakemake

from mlmia.cli import main

MARKER = "zqxmarker"
TEXTS = [f"patient admitted with chest pain {MARKER} history {i}" for i in range(8)]


def digest_tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".snakemake" not in p.parts and "results" not in p.parts
    }


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("mlmia: error:")]
    assert len(lines) == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert MARKER not in output, "a message quotes sample text"
    return lines[0]


# --------------------------------------------------------------------------------------------
# the command line (in process: `mlmia.cli.main` is what the `mlmia` script runs)


def samples_csv(folder: Path, rows=None, name="samples.csv", header="sample_id,text") -> Path:
    path = folder / name
    rows = rows if rows is not None else [f"s{i},{t}" for i, t in enumerate(TEXTS)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def cli_case(case_id, tmp_path, model_dir):
    """(argv, fragments the error line must hold) of one command-line case."""
    s = samples_csv(tmp_path)
    options = {
        "--model": str(model_dir),
        "--samples": str(s),
        "--out": str(tmp_path / "scores.parquet"),
        "--patterns": "2",
    }

    def score(**changes):
        merged = options | {f"--{k.replace('_', '-')}": v for k, v in changes.items()}
        return ["score", *[x for pair in merged.items() for x in pair]]

    if case_id == "cli-out-is-the-input":
        return score(out=str(s)), [str(s), "is an input"]
    if case_id == "cli-out-is-a-directory":
        return score(out=str(tmp_path)), ["is a directory"]
    if case_id == "cli-out-parent-is-a-file":
        return score(out=str(s / "x.parquet")), ["is not a directory"]
    if case_id == "cli-samples-missing":
        return score(samples=str(tmp_path / "none.csv")), ["none.csv: file not found"]
    if case_id == "cli-samples-no-text-column":
        samples_csv(tmp_path, header="sample_id,note")
        return score(), ["samples.csv: missing column(s) text"]
    if case_id == "cli-samples-header-only":
        samples_csv(tmp_path, rows=[])
        return score(), ["samples.csv: no samples"]
    if case_id == "cli-samples-empty-text":
        samples_csv(tmp_path, rows=["a,some text " + MARKER, "b,", "c,more " + MARKER])
        return score(), ["samples.csv: row 2: empty text for sample_id 'b'"]
    if case_id == "cli-samples-duplicate-id":
        samples_csv(tmp_path, rows=[f"007,{TEXTS[0]}", f"7,{TEXTS[1]}", f"007,{TEXTS[2]}"])
        return score(), ["samples.csv: row 3: duplicate sample_id '007'"]
    if case_id == "cli-samples-text-as-id":  # the header names the note column as the id column
        samples_csv(tmp_path, rows=[f"{TEXTS[0]},s0", f"{TEXTS[1]},s1", f"{TEXTS[0]},s2"])
        return score(), ["samples.csv: row 3: duplicate sample_id (a sample_id value that is not id-like: not shown)"]
    if case_id == "cli-samples-not-utf8":
        s.write_bytes(b"sample_id,text\na,caf\xe9 " + MARKER.encode() + b"\n")
        return score(), ["samples.csv: not UTF-8 text"]
    if case_id == "cli-samples-unknown-format":
        s.rename(tmp_path / "samples.xlsx")
        return score(samples=str(tmp_path / "samples.xlsx")), ["unknown table format"]
    if case_id == "cli-samples-bad-jsonl":
        path = tmp_path / "samples.jsonl"
        path.write_text('{"sample_id": "a", "text": "' + MARKER + '"}\n{"sample_id": "b", "text": \n')
        return score(samples=str(path)), ["samples.jsonl: line 2: not valid JSON"]
    if case_id == "cli-samples-over-long":
        samples_csv(tmp_path, rows=[f"a,{TEXTS[0]}", "b," + " ".join(["patient"] * 80) + f" {MARKER}"])
        return score(), ["sample 'b' is longer than the model's maximum length (40 tokens", "--truncate"]
    if case_id == "cli-model-missing":
        return score(model=str(tmp_path / "nowhere")), ["nowhere: no such directory"]
    if case_id == "cli-model-no-config":
        (tmp_path / "empty_model").mkdir()
        return score(model=str(tmp_path / "empty_model")), ["no config.json"]
    if case_id == "cli-model-truncated-weights":
        broken = tmp_path / "broken_model"
        shutil.copytree(model_dir, broken)
        weights = broken / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        return score(model=str(broken)), ["broken_model"]
    if case_id == "cli-tokenizer-vocabulary-mismatch":
        from conftest import build_tiny_tokenizer
        from transformers import BertTokenizerFast

        base = build_tiny_tokenizer(tmp_path / "t0")
        vocab = dict(base.get_vocab()) | {f"extra{i}": len(base) + i for i in range(300)}
        BertTokenizerFast(vocab=vocab, do_lower_case=True).save_pretrained(tmp_path / "big_tokenizer")
        return score(tokenizer=str(tmp_path / "big_tokenizer")), ["big_tokenizer"]
    if case_id == "cli-tokenizer-far-smaller":  # 5 tokens for the model's 141 rows: every word one [UNK]
        from transformers import BertTokenizerFast

        vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])}
        BertTokenizerFast(vocab=vocab, do_lower_case=True).save_pretrained(tmp_path / "small_tokenizer")
        return score(tokenizer=str(tmp_path / "small_tokenizer")), ["small_tokenizer has 5 tokens", "padding"]
    if case_id == "cli-patterns-zero":
        return score(patterns="0"), ["the number of masking patterns must be >= 1, got 0"]
    if case_id == "cli-patterns-not-a-number":
        return score(patterns="ten"), ["--patterns: invalid int value"]
    if case_id == "cli-masks-renamed":
        return score(masks="2"), ["mlmia score: argument --masks: renamed to --patterns"]
    if case_id == "cli-convert-into-a-non-empty-directory":
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        return ["convert", str(model_dir), str(tmp_path / "full")], ["full: already exists"]
    raise AssertionError(case_id)


CLI_CASES = [
    "cli-out-is-the-input", "cli-out-is-a-directory", "cli-out-parent-is-a-file", "cli-samples-missing",
    "cli-samples-no-text-column", "cli-samples-header-only", "cli-samples-empty-text", "cli-samples-duplicate-id",
    "cli-samples-text-as-id",
    "cli-samples-not-utf8", "cli-samples-unknown-format", "cli-samples-bad-jsonl", "cli-samples-over-long",
    "cli-model-missing",
    "cli-model-no-config", "cli-model-truncated-weights", "cli-tokenizer-vocabulary-mismatch", "cli-tokenizer-far-smaller",
    "cli-patterns-zero",
    "cli-patterns-not-a-number", "cli-masks-renamed", "cli-convert-into-a-non-empty-directory",
]  # fmt: skip


@pytest.mark.parametrize("case_id", CLI_CASES)
def test_the_command_line_refuses(case_id, tmp_path, tiny_bert_dir, capsys):
    argv, fragments = cli_case(case_id, tmp_path, tiny_bert_dir)
    before = digest_tree(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    captured = capsys.readouterr()
    assert code != 0
    line = one_error_line(captured.out + captured.err)
    for fragment in fragments:
        assert fragment in line, line
    assert digest_tree(tmp_path) == before  # inputs untouched, nothing written
    assert not (tmp_path / "scores.parquet").exists()


def test_ids_are_text_not_numbers(tmp_path, tiny_bert_dir):
    """`007`, `7`, `1e3` and `1000` are four different sample ids, scored under those names."""
    s = samples_csv(tmp_path, rows=[f"007,{TEXTS[0]}", f"7,{TEXTS[1]}", f"1e3,{TEXTS[2]}", f"1000,{TEXTS[3]}"])
    out = tmp_path / "scores.parquet"
    assert (
        main(["score", "--model", str(tiny_bert_dir), "--samples", str(s), "--out", str(out), "--patterns", "2"]) == 0
    )
    assert pd.read_parquet(out)["sample_id"].tolist() == ["007", "7", "1e3", "1000"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # the user's umask, not a temporary file's 0600


# --------------------------------------------------------------------------------------------
# the bring-your-own config path, through Snakemake


def byo_files(root: Path) -> None:
    """A small user dataset (every text carrying the marker) and its config."""
    data = root / "userdata"
    data.mkdir()
    rows = [("u0", TEXTS[0], "train"), ("u0", TEXTS[1], "train"), ("u1", TEXTS[2], "train"),
            ("u2", TEXTS[3], "heldout"), ("u3", TEXTS[4], "heldout"), ("u4", TEXTS[5], "public"),
            ("u5", TEXTS[6], "public")]  # fmt: skip
    pd.DataFrame(rows, columns=["user", "body", "split"]).to_csv(data / "notes.csv", index=False)


def byo_config(model_a, model_b) -> dict:
    return {
        "run": "bad",
        "datasets": {"notes": {"root": "userdata", "columns": {"text": "body", "group": "user", "role": "split"},
                               "role_names": {"train": "member", "heldout": "nonmember", "public": "population"},
                               "files": [{"path": "notes.csv", "source": "clinic"}], "shards": 2}},
        "models": {"target": {"path": str(model_a)}, "reference": {"path": str(model_b)}},
        "audit": {"dataset": "notes", "targets": ["target"], "references": ["reference"], "nonmembers": ["clinic"],
                  "population": "clinic"},
        "scoring": {"patterns": 2},
        "metrics": {"protocols": ["corrected"], "bootstrap": 5, "draws": 2},
    }  # fmt: skip


def workflow_case(case_id, root, a, b):
    """Edit the user's files or config for one case; returns (config text, fragments)."""
    config = byo_config(a, b)
    notes = root / "userdata" / "notes.csv"
    text = None
    if case_id == "config-run-missing":
        config.pop("run")
        fragments = ["config key (top level): 'run' is a required property"]
    elif case_id == "config-duplicate-model-key":
        text = yaml.safe_dump(config) + f"models:\n  target: {{path: {a}}}\n"
        fragments = ["byo.yaml: line", "key 'models' given twice"]
    elif case_id == "config-renamed-key":
        config["scoring"] = {"k": 2}
        fragments = ["mlmia: error: config key scoring.k: renamed to scoring.patterns"]
    elif case_id == "config-typo-in-a-model":
        config["models"]["target"]["tokeniser"] = "x"
        fragments = ["config key models.target: Additional properties are not allowed ('tokeniser'"]
    elif case_id == "config-typo-in-training":
        config["training"] = {"thread": 2}
        fragments = ["config key training: Additional properties are not allowed ('thread'"]
    elif case_id == "config-typo-in-dataset-columns":
        config["datasets"]["notes"]["columns"]["txt"] = "body"
        fragments = ["config key datasets.notes.columns: Additional properties are not allowed ('txt'"]
    elif case_id == "config-target-is-reference":
        config["audit"]["references"] = ["target"]
        fragments = ["config key audit.references: 'target' is also a target"]
    elif case_id == "config-target-twice":
        config["audit"]["targets"] = ["target", "target"]
        fragments = ["config key audit.targets", "non-unique"]
    elif case_id == "config-unknown-model-in-audit":
        config["audit"]["targets"] = ["tagret"]
        fragments = ["config key audit.targets: 'tagret' is not a configured model"]
    elif case_id == "config-unknown-init":
        config["models"]["extra"] = {"corpus": "target", "init": "nobody"}
        fragments = ["config key models.extra.init: 'nobody' is not another configured model"]
    elif case_id == "config-missing-dataset-file":
        config["datasets"]["notes"]["files"][0]["path"] = "gone.csv"
        fragments = ["config key datasets.notes.files[0].path: file not found: userdata/gone.csv"]
    elif case_id == "config-missing-model-directory":
        config["models"]["reference"]["path"] = "data/models/gone"
        fragments = ["config key models.reference.path: no such directory: data/models/gone"]
    elif case_id == "config-extraction-phi-missing":
        config["extraction"] = {"dataset": "notes", "target": "target", "reference": "reference", "phi": "gone.csv"}
        fragments = ["config key extraction.phi: file not found: gone.csv"]
    elif case_id == "config-bad-alpha":
        config["audit"]["alpha"] = 1.5
        fragments = ["config key audit.alpha: 1.5 is greater than or equal to the maximum of 1"]
    elif case_id == "spec-not-yaml":
        config.pop("audit")
        config["tables_spec"] = "spec.yaml"
        (root / "spec.yaml").write_text("experiments:\n  e: {dataset: notes, target: [unclosed\n")
        fragments = ["config key tables_spec: spec.yaml: line 3: not valid YAML"]
    elif case_id == "data-unknown-role-label":
        notes.write_text(notes.read_text().replace("heldout\n", "validation\n", 1))
        fragments = ["notes.csv: row 4: column 'split': unknown role label"]
    elif case_id == "data-patient-in-two-roles":
        notes.write_text(notes.read_text() + f"u0,{TEXTS[7]},heldout\n")
        fragments = ["notes.csv", "patient 'u0'", "member", "nonmember"]
    elif case_id == "data-empty-text":
        notes.write_text(notes.read_text() + "u9,,train\n")
        fragments = ["notes.csv: row 8: empty text"]
    elif case_id == "data-empty-group":
        notes.write_text(notes.read_text() + f",{TEXTS[7]},train\n")
        fragments = ["notes.csv: row 8: empty group id (datasets.notes.columns.group)"]
    elif case_id == "data-missing-column":
        config["datasets"]["notes"]["columns"]["text"] = "note"
        fragments = ["notes.csv: no column 'note' (datasets.notes.columns.text); the file has: user, body, split"]
    elif case_id == "data-no-header-row":
        notes.write_text("\n".join(notes.read_text().splitlines()[1:]) + "\n")
        fragments = ["notes.csv: no column 'body'", "names not shown"]
    elif case_id == "data-header-only":
        notes.write_text("user,body,split\n")
        fragments = ["notes.csv: no rows (datasets.notes.files[0])"]
    elif case_id == "data-not-utf8":
        notes.write_bytes(notes.read_bytes() + b"u9,caf\xe9 " + MARKER.encode() + b",train\n")
        fragments = ["notes.csv: cannot read as csv"]
    elif case_id == "data-duplicate-id":
        config["datasets"]["notes"]["columns"]["id"] = "user"
        fragments = ["notes.csv: row 2: sample id 'u0' already used by", "row 1"]
    elif case_id == "data-no-samples-of-a-length":
        config["audit"]["lengths"] = ["long"]
        fragments = ["datasets.notes: experiment", "needs member samples", "of length 'long'; the dataset has none"]
    elif case_id == "data-no-population":
        notes.write_text(notes.read_text().replace(",public", ",heldout"))
        config["audit"]["population"] = "elsewhere"
        fragments = ["needs population samples from source 'elsewhere'"]
    else:
        raise AssertionError(case_id)
    return (text if text is not None else yaml.safe_dump(config)), fragments


WORKFLOW_CASES = [
    "config-run-missing", "config-duplicate-model-key", "config-renamed-key", "config-typo-in-a-model", "config-typo-in-training",
    "config-typo-in-dataset-columns", "config-target-is-reference", "config-target-twice",
    "config-unknown-model-in-audit", "config-unknown-init", "config-missing-dataset-file",
    "config-missing-model-directory", "config-extraction-phi-missing", "config-bad-alpha", "spec-not-yaml", "data-unknown-role-label",
    "data-patient-in-two-roles", "data-empty-text", "data-empty-group", "data-missing-column", "data-no-header-row",
    "data-header-only", "data-not-utf8", "data-duplicate-id", "data-no-samples-of-a-length", "data-no-population",
]  # fmt: skip


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("bad_inputs_workflow"))


@pytest.mark.parametrize("case_id", WORKFLOW_CASES)
def test_the_workflow_refuses(case_id, workflow_copy, tmp_path, tiny_bert_dir, tiny_bert_dir_b):
    root = tmp_path / "run"
    shutil.copytree(workflow_copy, root)
    byo_files(root)
    text, fragments = workflow_case(case_id, root, tiny_bert_dir, tiny_bert_dir_b)
    (root / "byo.yaml").write_text(text)
    before = digest_tree(root / "userdata")
    result = run_snakemake(root, "--configfile", "byo.yaml", check=False)
    assert result.returncode != 0
    line = one_error_line(result.stdout + result.stderr)
    for fragment in fragments:
        assert fragment in line, line
    assert digest_tree(root / "userdata") == before
    # nothing scored, no partial file; the failing step's log says the same one line
    assert not list(root.glob("results/bad/scores/**/*.parquet"))
    assert not list(root.glob("results/**/*.tmp"))
    for log in root.glob("results/bad/logs/**/*.log"):
        assert MARKER not in log.read_text() and "Traceback" not in log.read_text()


# --------------------------------------------------------------------------------------------
# imported score tables and the raw importers (the paper's setup)


def import_case(case_id, root: Path):
    scores = root / "scores"
    shutil.copytree(paper_scores_root(), scores)
    long = scores / "long"
    config = yaml.safe_load((REPO / "config" / "paper_scores.yaml").read_text())
    config["imported"]["root"] = str(scores)
    config.setdefault("metrics", {})["bootstrap"] = 0
    if case_id == "import-unequal-files":
        lines = (long / "pubmed__nonmembers_mimic.txt").read_text().splitlines(keepends=True)
        (long / "pubmed__nonmembers_mimic.txt").write_text("".join(lines[:-5]))
        return config, ["pubmed__nonmembers_mimic.txt: 1713 scores but", "has 1718"]
    if case_id == "import-not-a-number":
        path = long / "base__members.txt"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3] + [f"{MARKER}\n"] + lines[4:]))
        return config, ["base__members.txt: line 4: not a number"]
    if case_id == "import-nan-score":
        path = long / "base__members.txt"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:9] + ["nan\n"] + lines[10:]))
        return config, ["base__members.txt: line 10: score is nan (NaN or inf)"]
    if case_id == "import-infinite-score":
        path = long / "pubmed__population_i2b2.txt"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(["inf\n"] + lines[1:]))
        return config, ["pubmed__population_i2b2.txt: line 1: score is inf (NaN or inf)"]
    if case_id == "import-empty-score-file":
        (long / "base__members_heldin.txt").write_text("")
        return config, ["base__members_heldin.txt: empty score file"]
    if case_id == "import-missing-score-file":
        (long / "pubmed__members.txt").unlink()
        return config, ["config key imported.datasets.long: score file of model 'pubmed', set 'members' not found"]
    if case_id in ("import-table-non-numeric-energy", "import-table-wrong-types", "import-table-missing-column"):
        for model in ("base", "pubmed"):
            for name in config["imported"]["datasets"]["long"]["sets"]:
                values = (long / f"{model}__{name}.txt").read_text().split()
                table = pd.DataFrame({"sample_id": [f"{name}:{i}" for i in range(len(values))], "energy": values})
                if case_id == "import-table-non-numeric-energy" and model == "pubmed" and name == "members":
                    table.loc[5, "energy"] = MARKER
                if case_id == "import-table-wrong-types" and model == "base" and name == "nonmembers_mimic":
                    table["energy"] = [b"\x00\x01" for _ in values]  # bytes where numbers belong
                if case_id == "import-table-missing-column" and model == "base" and name == "members":
                    table = table.rename(columns={"energy": "score"})
                table.to_parquet(long / f"{model}__{name}.parquet")
        config["imported"]["datasets"]["long"]["files"] = "{root}/long/{model}__{set}.parquet"
        config["tables"] = ["table2"]
        return config, {
            "import-table-non-numeric-energy": ["pubmed__members.parquet: row 6: energy is not a finite number"],
            "import-table-wrong-types": ["base__nonmembers_mimic.parquet: row 1: energy is not a finite number"],
            "import-table-missing-column": ["base__members.parquet: a score table needs columns sample_id and energy"],
        }[case_id]
    raise AssertionError(case_id)


IMPORT_CASES = [
    "import-unequal-files", "import-not-a-number", "import-nan-score", "import-infinite-score",
    "import-empty-score-file", "import-missing-score-file", "import-table-non-numeric-energy",
    "import-table-wrong-types", "import-table-missing-column",
]  # fmt: skip


@pytest.mark.parametrize("case_id", IMPORT_CASES)
def test_imported_scores_are_refused(case_id, workflow_copy, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(workflow_copy, root)
    config, fragments = import_case(case_id, root)
    (root / "scores.yaml").write_text(yaml.safe_dump(config))
    before = digest_tree(root / "scores")
    result = run_snakemake(root, "--configfile", "scores.yaml", check=False)
    assert result.returncode != 0
    line = one_error_line(result.stdout + result.stderr)
    for fragment in fragments:
        assert fragment in line, line
    assert digest_tree(root / "scores") == before
    assert not list(root.glob("results/paper_scores/samples/*.parquet")) or case_id.startswith("import-table")
    assert not list(root.glob("results/**/*.tmp"))


def test_the_docs_list_every_case():
    from test_config_checks import CASES, FILE_CASES  # the whole config's checks (their own section)

    table = (REPO / "docs" / "bad_inputs.md").read_text()
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M)
    config_cases = [case[0] for case in CASES] + FILE_CASES
    assert sorted(documented) == sorted(CLI_CASES + WORKFLOW_CASES + IMPORT_CASES + config_cases)
    assert len(documented) >= 40
