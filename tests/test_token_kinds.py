"""Per-slot attack scores by token kind (mlmia.memorization.token_kinds) and their place in the
workflow (mlmia.study.plans.tokens, rule token_kinds): slots placed on the masking patterns of
mlmia.scoring.masks, tokens labelled by the PHI spans their characters fall in, the summary by
kind checked by hand, no token or value in any output, and `snakemake zoo -n` plans the job."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pandas as pd
import pytest
from conftest import build_tiny_tokenizer
from workflow_helpers import copy_workflow, planned_jobs, write_config

from mlmia.attacks.base import Attack
from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key
from mlmia.memorization.token_kinds import (
    OTHER,
    SLOT_COLUMNS,
    SUMMARY_COLUMNS,
    experiment_token_kinds,
    has_token_statistics,
    kind_summary,
    phi_spans,
    slot_kinds,
    slot_positions,
    slot_table,
    token_offsets,
)

# "patient", "s ##m ##i ##t ##h", "given", "aspirin", "2 ##0", "mg", "daily" in the tiny vocabulary
TEXT = "patient smith given aspirin 20 mg daily"
#: the content tokens' character spans, by hand
OFFSETS = [(0, 7), (8, 9), (9, 10), (10, 11), (11, 12), (12, 13), (14, 19), (20, 27), (28, 29), (29, 30), (31, 33),
           (34, 39)]  # fmt: skip
#: the world's form of a patient's PHI (mlmia.world.patient_phi): a surname, a drug, its dose between drug and "mg"
PHI = pd.DataFrame({"group_id": ["p1", "p1", "p1"], "kind": ["surname", "drug", "dose"],
                    "value": ["Smith", "aspirin", "20"], "left": ["", "", "aspirin "], "right": ["", "", " mg"]})  # fmt: skip
KINDS = [OTHER, *["surname"] * 5, OTHER, "drug", "dose", "dose", OTHER, OTHER]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


class Fixed(Attack):
    """An attack whose per-slot scores are given (the slot index j + 100 i for row i)."""

    name = "fixed_slots"

    def statistic(self, table):
        return np.zeros(len(table))

    def token_statistics(self, table):
        return [np.asarray(v, dtype=float) + 100.0 * i for i, v in enumerate(table["target_token_logp"])]


# --------------------------------------------------------------------------- slots


def test_slots_are_the_patterns_laid_end_to_end_every_combination_when_k_exceeds_them():
    # T = 7: l = ceil(1.05) = 2, C(7, 2) = 21 <= K = 30: every pair once, in lexicographic order
    pattern, position = slot_positions("s1", 7, 42, seed=3, patterns=30, mask_count="ceil", label="sample s1")
    pairs = list(itertools.combinations(range(7), 2))
    assert pattern.tolist() == [j for j in range(21) for _ in range(2)]
    assert position.tolist() == [p for pair in pairs for p in pair]


def test_random_patterns_are_the_seeded_draws_of_the_sample_or_its_mask_id(tokenizer):
    # T = 20: l = 3, K = 2 of C(20, 3) = 1140; pattern j drawn by default_rng([seed, sha256 key, j])
    expected = []
    for j in range(2):
        rng = np.random.default_rng([5, stable_key("m7"), j])
        expected += sorted(rng.choice(20, size=3, replace=False).tolist())
    pattern, position = slot_positions("m7", 20, 6, seed=5, patterns=2, mask_count="ceil", label="sample s")
    assert position.tolist() == expected and pattern.tolist() == [0, 0, 0, 1, 1, 1]
    assert len(set(expected[:3])) == 3
    # a sample whose table names a mask_id is placed on that id's patterns
    table = pd.DataFrame({"sample_id": ["a"], "group_id": ["p1"], "role": ["member"], "source": ["mimic"],
                          "n_tokens": [20], "target_token_logp": [list(range(6))]})  # fmt: skip
    samples = pd.DataFrame({"sample_id": ["a"], "text": [" ".join(["patient"] * 20)], "mask_id": ["m7"]})
    slots = slot_table(table, {"fixed_slots": Fixed()}, samples, tokenizer, energy="masked", seed=5, patterns=2,
                       mask_count="ceil", spans=None)  # fmt: skip
    assert slots["position"].tolist() == expected and slots["score"].tolist() == list(range(6))


def test_a_slot_count_the_patterns_cannot_give_is_refused_naming_the_sample():
    # T = 7 under K = 30 gives 42 slots, not 40
    with pytest.raises(UserError, match=r"^sample s9: 40 slots, but 7 tokens give 21 patterns of 2"):
        slot_positions("s9", 7, 40, seed=3, patterns=30, mask_count="ceil", label="sample s9")


def test_another_energy_kind_is_refused_in_one_line(tokenizer):
    table = pd.DataFrame({"sample_id": ["a"], "group_id": ["p"], "role": ["member"], "source": ["m"]})
    with pytest.raises(UserError, match=r"energy kind 'normalized' has no slot layout here \(only masked\)$"):
        slot_table(table, {}, pd.DataFrame({"sample_id": ["a"], "text": ["x"]}), tokenizer, energy="normalized",
                   seed=0, patterns=1, mask_count="ceil", spans=None)  # fmt: skip


# --------------------------------------------------------------------------- kinds


def test_a_token_takes_the_kind_of_the_span_its_characters_fall_in():
    offsets = [(0, 3), (4, 9), (9, 11), (12, 14), (14, 14)]
    spans = [(4, 11, "surname"), (9, 14, "date"), (12, 13, "dose")]
    # (4, 9) in the surname only; (9, 11) in both surname (7 chars) and date (5): the shorter; (12, 14) overlaps
    # the dose (1 char) and the date: the dose; an empty token is no span's
    assert slot_kinds(offsets, spans) == [OTHER, "surname", "date", "dose", OTHER]
    assert slot_kinds(offsets, []) == [OTHER] * 5


def test_kinds_come_from_the_tokenizers_offsets_and_the_extraction_studys_spans(tokenizer):
    assert token_offsets(tokenizer, [TEXT], ["sample a"]) == [OFFSETS]
    samples = pd.DataFrame({"sample_id": ["a"], "group_id": ["p1"], "text": [TEXT]})
    spans = phi_spans(samples, PHI, "the world's PHI")
    assert sorted(zip(spans["kind"], spans["start"], spans["end"])) == [("dose", 28, 30), ("drug", 20, 27),
                                                                        ("surname", 8, 13)]  # fmt: skip
    assert slot_kinds(OFFSETS, list(zip(spans["start"], spans["end"], spans["kind"]))) == KINDS
    # a user's offsets for another sample are left out, not refused
    offsets = pd.DataFrame({"sample_id": ["a", "zz"], "kind": ["surname", "date"], "start": [8, 0], "end": [13, 2]})
    assert phi_spans(samples, offsets, "phi.csv")[["sample_id", "kind", "start", "end"]].values.tolist() == [
        ["a", "surname", 8, 13]
    ]


def test_the_slot_table_places_each_score_on_its_token_and_kind(tokenizer):
    # T = 12: l = ceil(1.8) = 2; K = 70 >= C(12, 2) = 66: every pair once, 132 slots
    pairs = list(itertools.combinations(range(12), 2))
    table = pd.DataFrame({"sample_id": ["a", "b"], "group_id": ["p1", "p2"], "role": ["member", "population"],
                          "source": ["mimic", "mimic"], "n_tokens": [12, None],
                          "target_token_logp": [list(range(132)), list(range(132))]})  # fmt: skip
    samples = pd.DataFrame({"sample_id": ["b", "a"], "group_id": ["p2", "p1"], "text": [TEXT, TEXT]})
    spans = phi_spans(samples, PHI, "the world's PHI")
    slots = slot_table(table, {"fixed_slots": Fixed()}, samples, tokenizer, energy="masked", seed=0, patterns=70,
                       mask_count="ceil", spans=spans)  # fmt: skip
    assert list(slots.columns) == SLOT_COLUMNS and len(slots) == 264
    a = slots[slots["sample_id"] == "a"]
    assert a["position"].tolist() == [p for pair in pairs for p in pair]
    assert a["pattern"].tolist() == [j for j in range(66) for _ in range(2)]
    assert a["kind"].tolist() == [KINDS[p] for pair in pairs for p in pair]
    assert a["score"].tolist() == list(range(132)) and set(a["role"]) == {"member"}
    # sample b (no n_tokens in the table: the tokenizer's count) is p2's: p1's PHI is not its, every slot other
    b = slots[slots["sample_id"] == "b"]
    assert set(b["kind"]) == {OTHER} and b["score"].tolist() == [100.0 + j for j in range(132)]
    assert set(b["group_id"]) == {"p2"} and set(b["role"]) == {"population"}


def test_an_attack_without_per_slot_scores_is_recognised():
    class NoSlots(Attack):
        name = "no_slots"

    assert has_token_statistics(Fixed()) and not has_token_statistics(NoSlots())


# --------------------------------------------------------------------------- summary


def slots_frame(rows):
    """rows: (sample, patient, role, source, kind, score), slots numbered per sample in order."""
    frame = pd.DataFrame(rows, columns=["sample_id", "group_id", "role", "source", "kind", "score"])
    frame["slot"] = frame.groupby("sample_id").cumcount()
    frame["attack"], frame["pattern"], frame["position"] = "fixed_slots", 0, frame["slot"]
    return frame[SLOT_COLUMNS]


def test_the_summary_by_kind_by_hand():
    slots = slots_frame([
        ("m1", "A", "member", "mimic", "surname", 3.0), ("m1", "A", "member", "mimic", OTHER, 1.0),
        ("m1", "A", "member", "mimic", OTHER, 0.0),
        ("m2", "B", "member", "mimic", "surname", 1.0), ("m2", "B", "member", "mimic", "surname", 2.0),
        ("m2", "B", "member", "mimic", OTHER, 5.0),
        ("n1", "C", "nonmember", "mimic", "surname", 0.5), ("n1", "C", "nonmember", "mimic", OTHER, 0.0),
        ("n2", "D", "nonmember", "i2b2", OTHER, 2.0), ("n2", "D", "nonmember", "i2b2", OTHER, -1.0),
        ("z1", "E", "population", "mimic", "surname", 99.0),  # not audited: in no number
    ])  # fmt: skip
    summary = kind_summary(slots, seed=1, replicates=50, phi_from="the world's PHI")
    assert list(summary.columns) == SUMMARY_COLUMNS and summary["kind"].tolist() == ["surname", OTHER]
    out = summary.set_index("kind")
    # surname: member slots 3, 1, 2 (mean 2), non-member slots 0.5; samples m1, m2, n1
    s = out.loc["surname"]
    assert (s.slots, s.samples, s.members, s.nonmembers) == (4, 3, 2, 2)
    assert s.member_mean == pytest.approx(2.0) and s.nonmember_mean == pytest.approx(0.5)
    assert s.difference == pytest.approx(1.5)
    # other: member slots 1, 0, 5 (mean 2), non-member 0, 2, -1 (mean 1/3)
    o = out.loc[OTHER]
    assert (o.slots, o.samples) == (6, 4) and o.member_mean == pytest.approx(2.0)
    assert o.nonmember_mean == pytest.approx(1 / 3) and o.difference == pytest.approx(5 / 3)
    # top slots: m1 surname (3.0), m2 other (5.0); n1 surname (0.5), n2 other (2.0)
    assert (s.member_top_share, s.nonmember_top_share) == (0.5, 0.5)
    assert (o.member_top_share, o.nonmember_top_share) == (0.5, 0.5)
    assert set(out["phi_from"]) == {"the world's PHI"}
    assert s.ci_low <= s.difference <= s.ci_high and o.ci_low <= o.difference <= o.ci_high
    # against the ordinary words: 1.5 - 5/3; none for other itself
    assert s.minus_other == pytest.approx(-1 / 6) and s.minus_other_low <= s.minus_other <= s.minus_other_high
    assert np.isnan([o.minus_other, o.minus_other_low, o.minus_other_high]).all()


def test_with_one_patient_per_stratum_every_replicate_is_the_estimate():
    # each (role, source) holds one patient: every replicate draws it once, the interval is the point
    slots = slots_frame([
        ("m1", "A", "member", "mimic", "date", 2.0), ("m1", "A", "member", "mimic", OTHER, 1.0),
        ("n1", "C", "nonmember", "mimic", "date", 0.5), ("n1", "C", "nonmember", "mimic", OTHER, 4.0),
    ])  # fmt: skip
    out = kind_summary(slots, seed=0, replicates=20).set_index("kind")
    assert (out.loc["date", "ci_low"], out.loc["date", "ci_high"]) == pytest.approx((1.5, 1.5))
    assert (out.loc[OTHER, "ci_low"], out.loc[OTHER, "ci_high"]) == pytest.approx((-3.0, -3.0))
    assert (out.loc["date", "member_top_share"], out.loc["date", "nonmember_top_share"]) == (1.0, 0.0)
    row = out.loc["date"]  # 1.5 - (-3.0)
    assert (row.minus_other, row.minus_other_low, row.minus_other_high) == pytest.approx((4.5, 4.5, 4.5))


def test_the_comparison_with_the_ordinary_words_is_paired():
    # each patient's two slots move together (a patient effect of 0 to 90): a member's surname scores 1
    # above its other slot, a non-member's the same as it. Each kind's own interval is wide (the patient
    # effect); the difference of the two kinds is 1 in every replicate only where both come from the same
    # replicate: independent replicates would give an interval as wide as the kinds' own.
    rows = []
    for i, effect in enumerate(range(0, 100, 10)):
        for role, lift in (("member", 1.0), ("nonmember", 0.0)):
            sample, patient = f"{role[0]}{i}", f"{role}-{i}"
            rows += [
                (sample, patient, role, "mimic", "surname", effect + lift),
                (sample, patient, role, "mimic", OTHER, effect),
            ]
    out = kind_summary(slots_frame(rows), seed=3, replicates=200).set_index("kind")
    surname = out.loc["surname"]
    assert surname.ci_high - surname.ci_low > 20  # the patient effect: unpaired intervals say little
    assert (surname.minus_other, surname.minus_other_low, surname.minus_other_high) == pytest.approx((1.0, 1.0, 1.0))


# --------------------------------------------------------------------------- privacy


def test_no_token_text_or_phi_value_in_any_output_or_log(tokenizer, caplog):
    table = pd.DataFrame({"sample_id": ["a", "b"], "group_id": ["p1", "p2"], "role": ["member", "nonmember"],
                          "source": ["mimic", "mimic"], "n_tokens": [12, 12],
                          "target_token_logp": [list(np.linspace(-1, 0, 4)), list(np.linspace(-2, 0, 4))]})  # fmt: skip
    samples = pd.DataFrame({"sample_id": ["a", "b"], "group_id": ["p1", "p2"], "role": ["member", "nonmember"],
                            "source": ["mimic", "mimic"], "text": [TEXT, TEXT]})  # fmt: skip
    settings = {"energy": "masked", "scoring": {"seed": 0, "patterns": 2, "mask_count": "ceil"},
                "bootstrap": {"seed": 0, "replicates": 10}, "where": "the world's PHI"}  # fmt: skip
    with caplog.at_level(logging.DEBUG):
        spans = phi_spans(samples, PHI, "the world's PHI")
        slots, summary = experiment_token_kinds(table, samples, tokenizer, {"fixed_slots": Fixed()}, spans, settings)
    assert len(slots) == 8  # 2 samples x 2 patterns x 2 positions (T = 12: l = 2)
    assert list(slots.columns) == SLOT_COLUMNS and list(summary.columns) == SUMMARY_COLUMNS
    written = slots.to_csv(index=False) + summary.to_csv(index=False) + caplog.text
    for secret in ("smith", "aspirin", "patient", "given", "daily", "##"):
        assert secret not in written.lower(), secret
    # without PHI every slot is other, and the summary says why
    _, plain = experiment_token_kinds(table, samples, tokenizer, {"fixed_slots": Fixed()}, None, settings)
    assert plain["kind"].tolist() == [OTHER] and plain["phi_from"].iloc[0].startswith("none: no PHI table")


def test_a_sample_missing_from_the_sample_table_is_named_by_id_only(tokenizer):
    table = pd.DataFrame({"sample_id": ["a", "q"], "group_id": ["p", "p"], "role": ["member"] * 2,
                          "source": ["m"] * 2, "n_tokens": [12, 12], "target_token_logp": [[0.0] * 4] * 2})  # fmt: skip
    samples = pd.DataFrame({"sample_id": ["a"], "text": [TEXT]})
    with pytest.raises(UserError, match=r"^token kinds: sample 'q' of the attack table is not in the sample table$"):
        slot_table(table, {"fixed_slots": Fixed()}, samples, tokenizer, energy="masked", seed=0, patterns=2,
                   mask_count="ceil", spans=None)  # fmt: skip


# --------------------------------------------------------------------------- workflow


def test_snakemake_zoo_plans_the_token_kinds_of_each_zoo_experiment(tmp_path, monkeypatch):
    import yaml

    from mlmia.study.plans.tokens import token_experiments
    from mlmia.study.study import Study

    copy_workflow(tmp_path)
    config = write_config(tmp_path, "ci.yaml")
    # the zoo's row set with an InfoRMIA row (the attack with per-slot scores), whether or not the spec has one
    spec_path = tmp_path / "config" / "tables.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    if not any(isinstance(row, dict) and row.get("attack") == "informia" for row in spec["row_sets"]["zoo_full"]):
        spec["row_sets"]["zoo_full"].append({"metric": "auc", "attack": "informia", "label": "InfoRMIA: AUC"})
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    monkeypatch.chdir(tmp_path)
    expected = token_experiments(Study.from_config(yaml.safe_load(config.read_text()), tmp_path), "zoo")
    assert expected and all(name.startswith("zoo_") for name in expected)
    jobs = planned_jobs(tmp_path, "zoo", "--configfile", str(config))
    planned = sorted(sorted(output.split(", ")) for rule, output in jobs if rule == "token_kinds")
    assert planned == sorted(
        sorted([f"results/ci/attack/{name}.tokens.parquet", f"results/ci/attack/{name}.token_kinds.csv"])
        for name in expected
    )
    # the PHI spans are located once per sample table, from the world's PHI built again in that job: no job of
    # the extraction study runs for them
    assert not [rule for rule, _ in jobs if rule.startswith("extraction_")]
    assert [output for rule, output in jobs if rule == "phi_spans"] == ["results/ci/extraction/spans/clinical.parquet"]
