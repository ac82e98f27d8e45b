"""The attacks of a bring-your-own audit (config `audit:`, `mlmia.study.audit`), planned from the
config alone (nothing trained or scored; the end-to-end run with a reference pool is in
tests/test_byo.py): by default every built-in attack the config gives its inputs without scoring
another energy kind, with a `references:` pool LiRA and RMIA too (and multivariate LiRA and InfoRMIA
where the pool tokenizes as the targets); `audit.attacks` overrides the list; the pool never trains on the population or the held-in members. The refusals are cases of
tests/test_config_checks.py (docs/bad_inputs.md)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import REPO

from mlmia.attacks.base import builtin_attack_names, get_attack
from mlmia.core.errors import UserError
from mlmia.data.splits import reference_splits
from mlmia.study.audit import reads_reference_slots
from mlmia.study.checks.tokenization import tokenizer_difference
from mlmia.study.plans.cards import card_settings
from mlmia.study.study import Study

#: what an audit without a pool carries: the paper's two, the zoo's attacks on the target's own scores, blind
WITHOUT_POOL = ["loss", "likelihood_ratio", "zlib", "min_k", "min_k_plus_plus", "blind"]
#: patients of each role in the audit's sample table (one source, "clinic"), and of the pool's table
PATIENTS = {"member": 6, "member_heldin": 3, "nonmember": 5, "population": 4}
POOL_PATIENTS = 5
#: the attacks that read the pool's per-token evidence slot by slot: a pool that tokenizes as the target or none
SLOT_ATTACKS = ["informia", "lira_multivariate_offline", "lira_multivariate_online"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The audit's sample table (two samples per patient), a disjoint pool and a local model directory."""
    folder = tmp_path_factory.mktemp("audit_attacks")
    rows = [
        {"sample_id": f"{role}{p}_{s}", "group_id": f"{role}{p}", "role": role, "text": f"words of {role} {p} {s}"}
        for role, n in PATIENTS.items()
        for p in range(n)
        for s in range(2)
    ]
    pd.DataFrame(rows).to_csv(folder / "notes.csv", index=False)
    pool = [{"sample_id": f"q{p}_{s}", "group_id": f"q{p}", "text": f"pool words {p} {s}"} for p in range(POOL_PATIENTS)
            for s in range(2)]  # fmt: skip
    pd.DataFrame(pool).to_csv(folder / "pool.csv", index=False)
    # checkpoints of 20 vocabulary rows: the public one the pool continues; the target's, of the same tokenizer (a
    # copy of its vocab.txt, or the same vocabulary written as a tokenizer.json); of another vocabulary; of the same
    # vocabulary that does not lowercase
    tokens = {"public": "t", "private": "t", "other": "u", "cased": "t"}
    for name, prefix in tokens.items():
        (folder / name).mkdir()
        (folder / name / "config.json").write_text('{"vocab_size": 20}')
        (folder / name / "vocab.txt").write_text("".join(f"{prefix}{i}\n" for i in range(20)))
    (folder / "cased" / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    (folder / "fast").mkdir()
    (folder / "fast" / "config.json").write_text('{"vocab_size": 20}')
    fast = {"added_tokens": [], "normalizer": {"type": "BertNormalizer", "lowercase": True},
            "model": {"type": "WordPiece", "vocab": {f"t{i}": i for i in reversed(range(20))}}}  # fmt: skip
    (folder / "fast" / "tokenizer.json").write_text(json.dumps(fast, indent=2))
    return folder


def audit_config(files, references: dict | None = None, **audit) -> dict:
    config = {
        "run": "audit_attacks",
        "datasets": {"notes": {"files": [{"path": str(files / "notes.csv"), "source": "clinic"}],
                               "columns": {"text": "text", "group": "group_id", "role": "role", "id": "sample_id"}}},
        "models": {"target": {"path": str(files / "private")}, "reference": {"path": "distilbert-base-uncased"},
                   "public": {"path": str(files / "public")}},
        "audit": {"dataset": "notes", "targets": ["target"], "references": ["reference"], "nonmembers": ["clinic"],
                  "population": "clinic", "energies": ["masked", "normalized"], **audit},
    }  # fmt: skip
    if references is not None:
        config["references"] = {"count": 4, "pool": str(files / "pool.csv"), "dataset": "notes", "init": "public",
                                "settings": {"epochs": 1}, **references}  # fmt: skip
    return config


def study(config: dict) -> Study:
    return Study.from_config(copy.deepcopy(config), REPO)


def test_without_a_pool_an_audit_carries_the_attacks_of_its_own_scores(files):
    s = study(audit_config(files))
    assert len(s.experiments) == 2 and not s.reference_models()
    for name, experiment in s.experiments.items():
        assert s.experiment_attacks(name) == sorted(WITHOUT_POOL)
        assert experiment.references is None and not experiment.neighbours
        # nothing scored beyond the target's and the reference's energies of the experiment's own kind: Min-K%(++)
        # read the per-token evidence of that scoring (the normalized experiment's: every position masked alone)
        kind = experiment.energy
        assert s.score_inputs(name) == {
            f"target__{kind}": ("notes", "target", kind),
            f"reference__{kind}": ("notes", "reference", kind),
        }
    # the card chooses the strongest among every attack that reads a model; blind beside it
    card = card_settings(s, "target")
    assert sorted(card["attacks"]) == sorted(set(WITHOUT_POOL) - {"blind"}) and card["baselines"] == ["blind"]


def test_the_paper_rows_stay_and_every_other_attack_gets_its_own(files):
    rows = [row["label"] for row in study(audit_config(files)).rows("audit")]
    paper = ["AUC (A)", "AUC (B)", "Prec. (A, pop.)", "Rec. (A, pop.)", "Prec. (B)", "Rec. (B)", "TPR@1%FPR (B)",
             "TPR@10%FPR (B)"]  # fmt: skip
    counts = [f"{what} ({role})" for role in ("member", "non-member", "population") for what in ("samples", "patients")]
    assert rows[: len(paper)] == paper and rows[-len(counts) :] == counts
    assert rows[len(paper) : -len(counts)] == [
        "AUC: Min-K%", "AUC: Min-K%++", "AUC: zlib ratio", "AUC: blind (bag of words)",
        "TPR@1%FPR (A)", "TPR@1%FPR: Min-K%", "TPR@1%FPR: Min-K%++", "TPR@1%FPR: zlib ratio",
        "TPR@1%FPR: blind (bag of words)",
    ]  # fmt: skip
    # the paper's two alone: the paper's overview rows and the loss's TPR at 1% FPR
    only = study(audit_config(files, attacks=["loss", "likelihood_ratio"]))
    assert [row["label"] for row in only.rows("audit")] == [*paper, "TPR@1%FPR (A)", *counts]
    assert all(only.experiment_attacks(name) == ["likelihood_ratio", "loss"] for name in only.experiments)


def test_with_a_pool_an_audit_also_carries_lira_and_rmia(files):
    s = study(audit_config(files, references={}))
    pool = ["pool_ref_0", "pool_ref_1", "pool_ref_2", "pool_ref_3"]
    assert s.reference_models() == pool
    for name, experiment in s.experiments.items():
        assert experiment.references == "pool"
        assert s.experiment_attacks(name) == sorted([*WITHOUT_POOL, "lira_offline", "lira_online", "rmia", "informia",
                                                     "lira_multivariate_offline", "lira_multivariate_online"])  # fmt: skip
        kind = experiment.energy
        assert {k: v for k, v in s.score_inputs(name).items() if k.startswith("references.")} == {
            f"references.{i}__{kind}": ("notes", model, kind) for i, model in enumerate(pool)
        }
    assert s.training_spec("pool_ref_0")["init"] == "public"
    assert s.training_spec("pool_ref_0")["text"] == "results/audit_attacks/references/pool_ref_0.text.parquet"
    assert s.training_tokenizer("pool_ref_0") == str(files / "public")
    labels = {row["label"] for row in s.rows("audit")}
    assert {"AUC: LiRA (offline)", "AUC: LiRA (online)", "AUC: RMIA (offline)", "TPR@1%FPR: RMIA (offline)"} <= labels
    # offline: no IN reference, so neither online LiRA nor RMIA's a: auto (a fixed a runs)
    offline = study(audit_config(files, references={"online": False}))
    assert offline.experiment_attacks(next(iter(offline.experiments))) == sorted(
        [*WITHOUT_POOL, "lira_offline", "lira_multivariate_offline"]
    )
    fixed = audit_config(files, references={"online": False}) | {"attacks": {"rmia": {"a": 0.3}}}
    assert "rmia" in study(fixed).experiment_attacks(next(iter(offline.experiments)))
    # audit.attacks overrides the list, in its own order
    chosen = study(audit_config(files, references={}, attacks=["likelihood_ratio", "rmia"]))
    assert chosen.experiment_attacks(next(iter(chosen.experiments))) == ["likelihood_ratio", "rmia"]


def test_the_neighbourhood_attack_when_named_reads_neighbour_texts(files):
    config = audit_config(files, attacks=["likelihood_ratio", "neighbourhood"])
    with pytest.raises(UserError) as info:  # the default proposer, ref_general, is no model of this config
        study(config)
    assert str(info.value) == (
        "config key audit.attacks[1]: 'neighbourhood' needs neighbour texts from neighbours.model ('ref_general' is "
        "not a configured model)"
    )
    s = study(config | {"neighbours": {"model": "public"}})
    name = next(iter(s.experiments))
    assert s.experiments[name].neighbours and s.score_inputs(name)["neighbours__masked"] == (
        "notes~neighbours", "target", "masked"
    )  # fmt: skip


def test_the_pool_never_trains_on_the_population_or_the_held_in_members(files):
    """The splits the workflow's job draws (`mlmia.data.splits.reference_splits`, with the study's
    settings): each reference trains on half of the pool's patients and half of the audited members'
    and non-members', never on a population or held-in patient."""
    s = study(audit_config(files, references={}))
    settings = s.reference_split_settings()
    assert settings["dataset"] == "notes" and settings["online"]
    samples = pd.read_csv(files / "notes.csv")
    pool = pd.read_csv(files / "pool.csv")
    names = s.reference_pool()
    splits, texts = reference_splits(pool, samples, names, settings["seed"], settings["online"])
    roles = samples.drop_duplicates("group_id").set_index("group_id")["role"]
    trained = {name: set(text["group_id"]) for name, text in texts.items()}
    for patient in [*roles.index, *pool["group_id"].unique()]:
        count = sum(patient in groups for groups in trained.values())
        expected = 0 if roles.get(patient) in ("population", "member_heldin") else len(names) // 2
        assert count == expected, patient
    inside = splits.merge(samples[["sample_id", "role"]], on="sample_id")
    assert not inside[inside.role.isin(["population", "member_heldin"])]["in"].any()
    assert np.isclose(inside[inside.role.isin(["member", "nonmember"])]["in"].mean(), 0.5)


def test_the_slot_attacks_need_a_pool_that_tokenizes_as_the_targets(files, tmp_path, monkeypatch):
    """Multivariate LiRA and InfoRMIA read the references' per-token evidence slot by slot (their
    input `references: token_logp`): by default an audit carries them where the pool's tokenizer (its
    init's, `Study.training_tokenizer`) is the target's or the config cannot tell (a hub id not in the
    local cache: they refuse per sample when they run), leaves them out where the files show it is
    not; named, they are refused in one line before anything is written."""
    monkeypatch.chdir(tmp_path)
    assert sorted(n for n in builtin_attack_names() if reads_reference_slots(get_attack(n))) == SLOT_ATTACKS
    with_pool = sorted([*WITHOUT_POOL, "lira_offline", "lira_online", "rmia"])
    # the same tokenizer: a copy of the init's vocab.txt, the same vocabulary and lowercasing in a tokenizer.json;
    # a tokenizer the config cannot read (a hub id not in the local cache)
    for target in ({"path": str(files / "private")}, {"path": str(files / "fast")},
                   {"path": "bert-base-uncased", "tokenizer": "nobody-mlmia/not-cached"}):  # fmt: skip
        config = audit_config(files, references={})
        config["models"]["target"] = target
        s = study(config)
        assert s.experiment_attacks(next(iter(s.experiments))) == sorted([*with_pool, *SLOT_ATTACKS]), target
    # another tokenizer (another vocabulary, or the same one without lowercasing): left out, the others kept
    for other, reason in (
        ("other", "their vocabularies differ"),
        ("cased", "one lowercases the text, the other does not"),
    ):
        config = audit_config(files, references={})
        config["models"]["target"] = {"path": str(files / other)}
        s = study(config)
        assert all(s.experiment_attacks(name) == with_pool for name in s.experiments), other
        # named: refused in one line, for any of the targets (the second's here), naming the item and the models
        config["models"] |= {"target": {"path": str(files / "private")}, "second": {"path": str(files / other)}}
        config["audit"] |= {
            "targets": ["target", "second"],
            "attacks": ["likelihood_ratio", "lira_offline", "informia"],
        }
        with pytest.raises(UserError) as info:
            study(config)
        assert str(info.value) == (
            "config key audit.attacks[2]: 'informia' needs a pool that tokenizes each sample as the target (it reads "
            "the references' evidence slot by slot): the tokenizer of the pool's init 'public' (references.init) is "
            f"not the one of target 'second' ({reason})"
        )
        config["audit"]["attacks"] = ["likelihood_ratio", "lira_offline", "rmia"]  # the others need no such pool
        chosen = study(config)
        assert all(
            chosen.experiment_attacks(name) == ["likelihood_ratio", "lira_offline", "rmia"]
            for name in chosen.experiments
        )
    assert not any(tmp_path.iterdir())  # refused while the config is read: nothing written


def test_what_the_tokenizer_files_say(files, tmp_path):
    """`tokenizer_difference` reads the vocabulary (token -> id, added tokens among them) and the
    lowercasing from the files, in either format; it knows nothing (and refuses nothing) of files that
    are not there or not readable."""
    public = str(files / "public")
    assert tokenizer_difference(public, str(files / "fast")) is None  # the same, in another format
    assert tokenizer_difference(public, str(files / "public" / "vocab.txt")) is None  # a bare vocab.txt
    (tmp_path / "added").mkdir()  # the same vocab.txt with one added token
    (tmp_path / "added" / "vocab.txt").write_text((files / "public" / "vocab.txt").read_text())
    (tmp_path / "added" / "added_tokens.json").write_text('{"[NEW]": 20}')
    assert tokenizer_difference(public, str(tmp_path / "added")) == "their vocabularies differ"
    # a sentencepiece-like vocabulary (a list of [piece, score]) behind a normalizer sequence that lowercases
    unigram = {"model": {"type": "Unigram", "vocab": [[f"t{i}", -1.0] for i in range(20)]},
               "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}}  # fmt: skip
    (tmp_path / "unigram").mkdir()
    (tmp_path / "unigram" / "tokenizer.json").write_text(json.dumps(unigram))
    assert tokenizer_difference(public, str(tmp_path / "unigram")) is None
    unigram["normalizer"]["normalizers"].pop()
    (tmp_path / "unigram" / "tokenizer.json").write_text(json.dumps(unigram))
    assert tokenizer_difference(public, str(tmp_path / "unigram")) == "one lowercases the text, the other does not"
    # not known: an unreadable tokenizer.json, an empty folder, a hub id not in the local cache
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text("{not json")
    (tmp_path / "empty").mkdir()
    for unknown in ("broken", "empty"):
        assert tokenizer_difference(str(files / "other"), str(tmp_path / unknown)) is None
    assert tokenizer_difference(str(files / "other"), "nobody-mlmia/not-cached") is None
