"""Bring your own: audit a model this test trains on its own planted members.

The members are sentences with a unique random combination of rare facts; the target
sees each of them for many epochs, a control target and the reference see only disjoint
sentences of the same kind. So the audit must find the planted members in the target
(likelihood-ratio AUC well above chance) and nothing in the control (AUC near 0.5): the
workflow reads the user's files (CSV with a role column and the user's own labels, JSONL
and Parquet with per-file roles), scores, and renders the generated audit table.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import pandas as pd
import pytest
import yaml
from faker.providers.lorem.en_US import Provider as LoremProvider
from training_helpers import train_mlm
from workflow_helpers import copy_workflow, run_snakemake

from mlmia.models.tokenizer import train_tokenizer

# faker's English word list: real words, no structure between them in a record
WORDS = sorted(set(LoremProvider.word_list))[:300]
TINY = {
    "hidden_size": 48,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 96,
    "batch_size": 16,
    "lr": 3e-3,
    "epochs": 45,
    "warmup_ratio": 0.05,
    "seed": 0,
    "dropout": 0.0,
    "crop_prob": 0.0,
}


# every text carries this word: it must reach no log, benchmark, table, figure or report
MARKER = "zqxmarker"


def record(rng: random.Random) -> str:
    """A canary: 12-18 random words. Nothing in it can be predicted from the others except
    by having seen the record itself, so only memorisation lowers a member's loss."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(12, 18))]
    return " ".join(words).capitalize() + f" {MARKER}."


def planted_texts() -> list[str]:
    """The records of the test, distinct: members, held-in members, held-out non-members, the population,
    the reference's and the control's training text, 100 each, then some no model trains on."""
    rng = random.Random(7)
    return list(dict.fromkeys(record(rng) for _ in range(800)))


@pytest.fixture(scope="module")
def audit_run(tmp_path_factory):
    texts = planted_texts()
    members, heldin, heldout, public, reference, control = (texts[i * 100 : (i + 1) * 100] for i in range(6))
    root = copy_workflow(tmp_path_factory.mktemp("byo"))
    data = root / "userdata"
    data.mkdir()
    # the user's own files: training split labels in a column, the rest one file per role
    pd.DataFrame(
        {
            "user": [f"u{i // 4}" for i in range(200)],
            "body": members + heldin,
            "split": ["train"] * 100 + ["known"] * 100,
            "origin": "clinic",
        }
    ).to_csv(data / "train.csv", index=False)
    (data / "heldout.jsonl").write_text(
        "".join(json.dumps({"user": f"h{i // 4}", "body": t}) + "\n" for i, t in enumerate(heldout))
    )
    pd.DataFrame({"user": [f"p{i // 4}" for i in range(100)], "body": public}).to_parquet(data / "public.parquet")
    train_tokenizer(texts, root / "tok", vocab_size=400, min_frequency=1, min_patients=None)
    for name, corpus in (("target", members + heldin), ("control", control), ("reference", reference)):
        train_mlm(corpus, root / "tok", root / "models" / name, config=TINY, threads=1)
    config = {
        "run": "planted",
        "world": "planted members (test)",
        "datasets": {
            "notes": {
                "root": "userdata",
                "columns": {"text": "body", "group": "user", "role": "split", "source": "origin"},
                "role_names": {"train": "member", "known": "member_heldin"},
                "files": [
                    {"path": "train.csv"},
                    {"path": "heldout.jsonl", "role": "nonmember", "source": "clinic"},
                    {"path": "public.parquet", "role": "population", "source": "public"},
                ],
                "shards": 2,
            }
        },
        "models": {name: {"path": f"models/{name}"} for name in ("target", "control", "reference")},
        "audit": {
            "dataset": "notes",
            "targets": ["target", "control"],
            "references": ["reference"],
            "nonmembers": ["clinic"],
            "population": "public",
            "levels": ["sample", "patient"],
        },
        "scoring": {"patterns": 5, "seed": 0, "shard_size": 1000, "threads": 1},
        "metrics": {"protocols": ["corrected"], "draws": 5, "seed": 2, "bootstrap": 50, "fprs": [0.01, 0.1]},
    }
    (root / "byo.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run_snakemake(root, "--configfile", "byo.yaml")
    return root


def test_audit_finds_planted_members_and_nothing_in_the_control(audit_run):
    table = pd.read_csv(audit_run / "results" / "planted" / "tables" / "audit.csv")
    auc = table[(table["metric"] == "auc") & (table["level"] == "sample")].set_index(["target", "attack"])["value"]
    # the target memorised its 100 members over 45 epochs: both attacks find them
    assert auc["target", "likelihood_ratio"] > 0.8 and auc["target", "loss"] > 0.75
    # the control never saw them: chance, up to sampling noise on 100 + 100 samples
    assert abs(auc["control", "likelihood_ratio"] - 0.5) < 0.12
    assert abs(auc["control", "loss"] - 0.5) < 0.12
    # the table says how many samples and patients each role holds, and nothing of a paper
    counts = table[table["metric"] == "n_samples"].set_index(["header", "role"])["value"]
    assert counts["target, sample", "member"] == 100 and counts["target, sample", "population"] == 100
    patients = table[table["metric"] == "n_patients"].set_index(["header", "role"])["value"]
    assert patients["target, sample", "member"] == 25  # 4 samples per user
    markdown = (audit_run / "results" / "planted" / "tables" / "audit.md").read_text()
    assert "| samples (member) | 100 |" in markdown and "paper" not in markdown.lower()
    # one column per (target, level), headed by what varies
    assert sorted(table["header"].unique()) == [
        "control, patient",
        "control, sample",
        "target, patient",
        "target, sample",
    ]


def test_audit_reads_every_user_file_with_its_roles(audit_run):
    samples = pd.read_parquet(audit_run / "results" / "planted" / "samples" / "notes.parquet")
    counts = samples.groupby(["role", "source"]).size().to_dict()
    assert counts == {
        ("member", "clinic"): 100,
        ("member_heldin", "clinic"): 100,
        ("nonmember", "clinic"): 100,
        ("population", "public"): 100,
    }
    assert samples["sample_id"].is_unique
    for name in ("audit_roc", "audit_roc_log", "audit_hist"):
        assert (audit_run / "results" / "planted" / "figures" / f"{name}.png").stat().st_size > 10_000


def test_an_unknown_role_label_stops_the_audit_with_one_line(tmp_path, tiny_bert_dir, tiny_bert_dir_b):
    root = copy_workflow(tmp_path)
    rows = ["patient admitted with chest pain and shortness of breath history hypertension"] * 2
    pd.DataFrame(
        {"user": ["a", "b"], "body": [r + f" {i}" for i, r in enumerate(rows)], "split": ["train", "validation"]}
    ).to_csv(root / "samples.csv", index=False)
    config = {
        "run": "bad",
        "datasets": {
            "notes": {
                "columns": {"text": "body", "group": "user", "role": "split"},
                "role_names": {"train": "member"},
                "files": [{"path": "samples.csv", "source": "x"}],
            }
        },
        "models": {"target": {"path": str(tiny_bert_dir)}, "reference": {"path": str(tiny_bert_dir_b)}},
        "audit": {
            "dataset": "notes",
            "targets": ["target"],
            "references": ["reference"],
            "nonmembers": ["x"],
            "population": "x",
        },
        "scoring": {"patterns": 2, "shard_size": 10},
        "metrics": {"protocols": ["corrected"]},
    }
    (root / "bad.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(root, "--configfile", "bad.yaml", check=False)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("mlmia: error:")]
    assert len(errors) == 1
    assert "samples.csv" in errors[0] and "row 2" in errors[0] and "column 'split'" in errors[0]
    assert "validation" not in errors[0]  # a cell's content is never printed
    assert not (root / "results" / "bad" / "samples" / "notes.parquet").exists()


def test_no_text_reaches_a_log_table_figure_or_the_report(audit_run):
    run_snakemake(audit_run, "--configfile", "byo.yaml", "--report", "results/planted/report.html")
    assert (audit_run / "results/planted/report.html").stat().st_size > 10_000
    checked, leaked = 0, []
    for path in [*(audit_run / "results" / "planted").rglob("*"), *(audit_run / ".snakemake" / "log").glob("*")]:
        if path.is_file() and "samples" not in path.parts:  # the sample table holds the text, by design
            checked += 1
            if MARKER.encode() in path.read_bytes():
                leaked.append(str(path.relative_to(audit_run)))
    assert checked > 50 and not leaked, leaked
    assert MARKER.encode() in (audit_run / "results/planted/samples/notes.parquet").read_bytes()  # the check can fail


def extraction_overlay(audit_run) -> str:
    """An extraction on the user's data: a span in each member and non-member sample (its third word, by
    character offsets on the sample table's ids) in userdata/phi.csv, and the overlay that names it."""

    samples = pd.read_parquet(audit_run / "results/planted/samples/notes.parquet")
    chosen = samples[samples.role.isin(["member", "nonmember"])]
    spans = [next(itertools.islice(re.finditer(r"[A-Za-z]+", text), 2, None)).span() for text in chosen.text]
    pd.DataFrame({"sample_id": chosen.sample_id, "kind": "word", "start": [a for a, _ in spans],
                  "end": [b for _, b in spans]}).to_csv(audit_run / "userdata/phi.csv", index=False)  # fmt: skip
    overlay = {"extraction": {"dataset": "notes", "target": "target", "reference": "reference", "sources": ["clinic"],
                              "phi": "userdata/phi.csv", "top_k": 5, "bootstrap": 50}}  # fmt: skip
    (audit_run / "extraction.yaml").write_text(yaml.safe_dump(overlay))
    return "extraction.yaml"


def test_extraction_on_your_own_data_reads_every_span_the_user_names(audit_run):
    # the user names a span in each member and non-member sample; every span is read back by both models, one
    # unit each. (This tiny target memorises too little to give words back: its per-token top-1 on members is
    # 9% against 7% on non-members, so the rates are not checked here; tests/test_extraction.py trains a model
    # that must give a planted value back.)
    run_snakemake(audit_run, "extraction", "--configfile", "byo.yaml", extraction_overlay(audit_run))
    samples = pd.read_parquet(audit_run / "results/planted/samples/notes.parquet")
    chosen = samples[samples.role.isin(["member", "nonmember"])]
    rates = pd.read_csv(audit_run / "results/planted/extraction/rates.csv")
    cells = rates[(rates.kind == "all") & (rates.level == "sample") & (rates.metric == "top1")]
    counts = chosen.role.value_counts()
    for (model, role), units in cells.set_index(["model", "role"]).units.items():
        assert units == counts[role], (model, role)
    assert set(cells.model) == {"target", "reference"} and cells.value.between(0, 1).all()
    assert not (audit_run / "results/planted/extraction/phi.parquet").exists()
    assert MARKER not in (audit_run / "results/planted/tables/table_extraction.md").read_text()


def test_an_audit_card_per_target_of_your_own_audit(audit_run):
    # the audit's two targets each get a card; the extraction's target its rates; both the vocabulary check of
    # the user's spans (the third word of each member's and non-member's sample: a word of the records, which the
    # 400-entry vocabulary, learnt on them with minimum frequency 1, holds whole)
    run_snakemake(audit_run, "audit_cards", "--configfile", "byo.yaml", extraction_overlay(audit_run))
    cards = audit_run / "results/planted/cards"
    assert sorted(p.name for p in cards.iterdir()) == ["control.json", "control.md", "control_roc.png", "target.json",
                                                       "target.md", "target_roc.png"]  # fmt: skip
    target, control = (cards / "target.md").read_text(), (cards / "control.md").read_text()
    assert "## PHI extraction\n\nEach PHI value" in target
    assert "## PHI extraction\n\nNot run: the extraction study reads back extraction.target (target)." in control
    numbers = json.loads((cards / "target.json").read_text())
    assert numbers["membership"]["levels"]["sample"]["attacks"]["likelihood_ratio"]["auc"]["value"] > 0.7
    shares = pd.DataFrame(numbers["vocabulary"]).query("row == 'share'").set_index("role")
    # by hand: each patient's distinct spans, lowercased, looked up in the target's tokenizer.json
    vocab = set(json.loads((audit_run / "models/target/tokenizer.json").read_text())["model"]["vocab"])
    samples = pd.read_parquet(audit_run / "results/planted/samples/notes.parquet").set_index("sample_id")
    spans = pd.read_csv(audit_run / "userdata/phi.csv")
    spans["group_id"] = samples.loc[spans.sample_id, "group_id"].to_numpy()
    spans["role"] = samples.loc[spans.sample_id, "role"].to_numpy()
    spans["value"] = [samples.loc[i, "text"][a:b] for i, a, b in zip(spans.sample_id, spans.start, spans.end)]
    spans = spans.drop_duplicates(["group_id", "value"]).assign(whole=lambda t: t.value.str.lower().isin(vocab))
    for role, part in spans.groupby("role"):
        assert (shares.loc[role, "whole"], shares.loc[role, "values"]) == (part.whole.sum(), len(part)), role
    assert 0 < shares.loc["member", "value"] < 1
    assert (
        "extraction.phi" in target
        and "Canary exposure\n\nNot run: the canary study runs on the embedded world only" in target
    )
    assert not any(MARKER.encode() in p.read_bytes() for p in cards.iterdir())


def guide_config() -> dict:
    """The config of docs/audit_your_model.md, as printed (its first YAML block)."""
    from workflow_helpers import REPO

    page = (REPO / "docs" / "audit_your_model.md").read_text()
    block = page.split("## The config", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)


def test_the_guide_runs_from_notes_to_a_card(audit_run):
    """docs/audit_your_model.md's worked example as printed, on whole notes built from the planted
    records (a note holds a patient's four records, so its sentences are the texts the target was
    trained on) and a PHI table of one long word per patient: the card weighs the paper's attack,
    the zoo's that fit and the blind baseline, opens with its reading, and holds no text or value."""
    import shutil

    samples = pd.read_parquet(audit_run / "results/planted/samples/notes.parquet")
    notes = audit_run / "notes"
    notes.mkdir()
    phi, texts = [], []
    for role, file in (("member", "members"), ("nonmember", "nonmembers"), ("population", "population")):
        part = samples[samples.role.isin(["member", "member_heldin"] if role == "member" else [role])]
        rows = []
        for patient, records in part.groupby("group_id", sort=True).text:
            rows.append({"patient": patient, "note_id": f"{file}-{patient}", "text": " ".join(records)})
            texts += list(records)
            long_words = sorted({w for w in " ".join(records).split() if len(w) >= 9 and w.isalpha()})
            if role != "population" and long_words:
                phi.append({"group_id": patient, "kind": "word", "value": long_words[0]})
        pd.DataFrame(rows).to_csv(notes / f"{file}.csv", index=False)
    pd.DataFrame(phi).to_csv(notes / "phi.csv", index=False)
    for name, trained in (("my_model", "target"), ("my_reference", "reference")):
        shutil.copytree(audit_run / "models" / trained, audit_run / "models" / name)
    config = guide_config()
    (audit_run / "my_audit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run_snakemake(audit_run, "audit", "audit_cards", "--configfile", "my_audit.yaml")

    cut = pd.read_parquet(audit_run / "results/my_audit/samples/notes.parquet")
    # every record came back as one sentence sample of its patient, id <note id>#<place>
    assert sorted(cut.text) == sorted(texts) and cut.sample_id.str.fullmatch(r"[a-z]+-[uhp]\d+#[0-3]").all()
    card = (audit_run / "results/my_audit/cards/my_model.md").read_text()
    numbers = (audit_run / "results/my_audit/cards/my_model.json").read_text()
    sample_level = json.loads(numbers)["membership"]["levels"]["sample"]
    # the strongest is chosen among five attacks that read a model, the blind baseline shown beside it
    assert set(sample_level["selection_auc"]) == {"loss", "likelihood_ratio", "zlib", "min_k", "min_k_plus_plus"}
    assert "blind" in sample_level["attacks"] and sample_level["strongest"] in sample_level["selection_auc"]
    assert card.index("How to read this card") < card.index("## Membership inference")
    assert len(phi) > 40 and len(texts) == 400
    for value in [MARKER, *(row["value"] for row in phi), *texts]:
        assert value not in card and value not in numbers


# --------------------------------------------------------------------------------------------
# the same audit with a reference pool: LiRA and RMIA beside the paper's attack and the zoo's


#: the attacks that read a model in an audit with an online pool of 3: the card's candidates (not offline
#: multivariate LiRA, whose σ per sample needs two OUT references for every sample: a pool of 4 online)
POOL_CANDIDATES = ["loss", "likelihood_ratio", "zlib", "min_k", "min_k_plus_plus", "lira_offline",
                   "lira_online", "rmia", "informia", "lira_multivariate_online"]  # fmt: skip


@pytest.fixture(scope="module")
def pool_run(audit_run):
    """The audit of `target` (sample level) with a reference pool (run planted_pool): 3 references, each
    the fixture's reference model fine-tuned for 8 epochs on half of 25 disjoint patients' records (which no
    model saw) and half of the audited members' and non-members' patients; the audit table and the cards."""
    pool = planted_texts()[600:700]
    pd.DataFrame(
        {"sample_id": [f"q{i}" for i in range(len(pool))], "group_id": [f"q{i // 4}" for i in range(len(pool))],
         "text": pool}
    ).to_csv(audit_run / "userdata" / "pool.csv", index=False)  # fmt: skip
    config = yaml.safe_load((audit_run / "byo.yaml").read_text())
    config["run"] = "planted_pool"
    config["datasets"]["notes"]["shards"] = 1
    config["audit"] |= {"targets": ["target"], "levels": ["sample"]}
    config["references"] = {
        "count": 3,
        "pool": "userdata/pool.csv",
        "dataset": "notes",
        "init": "reference",
        "settings": {"epochs": 8, "lr": 3e-3, "batch_size": 16, "warmup_ratio": 0.05, "seed": 0},
        "online": True,
    }
    (audit_run / "pool.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run_snakemake(audit_run, "results/planted_pool/tables/audit.md", "audit_cards", "--configfile", "pool.yaml")
    return audit_run / "results" / "planted_pool"


def test_an_audit_with_a_reference_pool_runs_lira_and_rmia(pool_run):
    table = pd.read_csv(pool_run / "tables" / "audit.csv")
    table = table[table["protocol"] == "corrected"]
    for metric, most in (("auc", 1), ("tpr_at_fpr", 100)):  # a TPR in percent
        values = table[table["metric"] == metric].groupby("attack")["value"].first()
        assert set(values.index) == {*POOL_CANDIDATES, "blind"} and values.between(0, most).all(), metric
    auc = table[table["metric"] == "auc"].set_index("attack")["value"]
    # the target memorised its members: the pool's attacks find them as the paper's does
    assert auc["lira_offline"] > 0.7 and auc["rmia"] > 0.7 and auc["likelihood_ratio"] > 0.8
    # RMIA's a, tuned on the references alone, printed under the table
    tuned = r"RMIA \(offline\): a = ([0-9.]+) \(tuned on the reference models\)\."
    note = re.search(tuned, (pool_run / "tables" / "audit.md").read_text())
    assert note and 0 <= float(note.group(1)) <= 1
    # each reference trained on some of the pool's records and on audited members' and non-members' samples,
    # never on the population's or the held-in members'
    samples = pd.read_parquet(pool_run / "samples" / "notes.parquet").set_index("sample_id")
    pool = set(pd.read_csv(pool_run.parents[1] / "userdata" / "pool.csv")["sample_id"])
    for i in range(3):
        ids = pd.read_parquet(pool_run / "references" / f"pool_ref_{i}.text.parquet")["sample_id"]
        audited = ids[~ids.isin(pool)]
        roles = samples.loc[audited, "role"]
        assert set(roles) == {"member", "nonmember"} and ids.isin(pool).any(), i
    # no text in a log, table, card or score (the sample table and the references' training texts hold it by
    # design, and the references' copies of the test's tokenizer, learnt on the records, its words)
    held = ("samples", "references", "models")
    leaked = [str(p) for p in pool_run.rglob("*")
              if p.is_file() and not set(held) & set(p.parts) and MARKER.encode() in p.read_bytes()]  # fmt: skip
    assert not leaked, leaked


def test_the_card_of_an_audit_with_a_pool_weighs_every_attack(pool_run):
    numbers = json.loads((pool_run / "cards" / "target.json").read_text())
    sample = numbers["membership"]["levels"]["sample"]
    candidates = set(sample["selection_auc"])
    assert candidates == set(POOL_CANDIDATES)
    assert sample["strongest"] in candidates and "blind" in sample["attacks"]
    card = (pool_run / "cards" / "target.md").read_text()
    assert f"chooses the strongest of {len(POOL_CANDIDATES)} attacks" in card and "`blind`" in card
