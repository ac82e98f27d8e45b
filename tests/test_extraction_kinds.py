"""Each PHI kind's extraction beside the membership signal its tokens carry
(`mlmia.memorization.extraction_kinds`): the numbers picked from the extraction study's differences
and the summaries by kind, and the sentences drawn from their verdicts, on frames written by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.memorization.extraction_kinds import COLUMNS, extraction_kinds, extraction_kinds_table

NAN = float("nan")


def differences() -> pd.DataFrame:
    """The extraction study's differences: only members_vs_nonmembers at sample level is read."""
    rows = [
        # comparison, kind, level, metric, first, second, difference, low, high
        ("members_vs_nonmembers", "surname", "sample", "top1", 0.04, 0.01, 0.03, 0.01, 0.05),
        ("members_vs_nonmembers", "surname", "sample", "topk", 0.12, 0.07, 0.05, -0.0001, 0.11),  # rounds to 0.0
        ("members_vs_nonmembers", "physician", "sample", "top1", 0.0, 0.0, 0.0, 0.0, 0.0),
        ("members_vs_nonmembers", "physician", "sample", "topk", 0.03, 0.0, 0.03, 0.0, 0.09),
        ("members_vs_nonmembers", "all", "sample", "top1", 0.03, 0.01, 0.02, 0.01, 0.03),  # not a kind
        ("members_vs_nonmembers", "surname", "patient", "top1", 0.9, 0.0, 0.9, 0.8, 1.0),  # patient level: not read
        ("target_vs_reference", "surname", "sample", "top1", 0.04, 0.5, -0.46, -0.5, -0.4),  # another comparison
    ]
    return pd.DataFrame(rows, columns=["comparison", "kind", "level", "metric", "first", "second", "difference",
                                       "ci_low", "ci_high"]).assign(n=200)  # fmt: skip


def summary() -> pd.DataFrame:
    """One experiment's summary by kind (kind_summary's columns that are read)."""
    rows = [
        # kind, member mean, non-member mean, difference, low, high, less other's, low, high
        ("other", 0.3, 0.1, 0.2, 0.15, 0.25, NAN, NAN, NAN),
        ("date", 0.4, 0.3, 0.1, -0.2, 0.4, -0.1, -0.4, 0.2),
        ("physician", 3.0, -2.0, 5.0, 4.0, 6.8, 4.8, 3.8, 6.6),
        ("surname", 1.5, -0.3, 1.8, 1.3, 2.3, 1.6, 1.1, 2.1),
    ]
    frame = pd.DataFrame(rows, columns=["kind", "member_mean", "nonmember_mean", "difference", "ci_low", "ci_high",
                                        "minus_other", "minus_other_low", "minus_other_high"])  # fmt: skip
    return frame.assign(attack="informia")


def test_the_long_table_picks_the_sample_level_differences_and_both_slot_readings():
    frame = extraction_kinds(differences(), {"zoo_long_mimic": summary()})
    assert list(frame.columns) == COLUMNS
    # the world's kind order (surname, physician, date, ...), other last
    assert list(dict.fromkeys(frame["kind"])) == ["surname", "physician", "date", "other"]
    rows = frame.set_index(["kind", "evidence"])
    surname = rows.loc[("surname", "extracted_top1")]
    assert (surname.value, surname.ci_low, surname.ci_high, surname.members, surname.nonmembers) == (
        0.03, 0.01, 0.05, 0.04, 0.01)  # fmt: skip
    assert surname.verdict == "separated" and rows.loc[("surname", "extracted_topk"), "verdict"] == "not separated"
    assert ("all", "extracted_top1") not in rows.index  # the pooled kind is the extraction table's, not a kind
    slot = rows.loc[("physician", "slot_score")]
    assert (slot.experiment, slot.attack, slot.value, slot.members, slot.nonmembers, slot.units) == (
        "zoo_long_mimic", "informia", 5.0, 3.0, -2.0, "bits")  # fmt: skip
    paired = rows.loc[("date", "slot_score_minus_other")]
    assert (paired.value, paired.ci_low, paired.ci_high, paired.verdict) == (-0.1, -0.4, 0.2, "not separated")
    assert np.isnan(paired.members)
    assert rows.loc[("other", "slot_score_minus_other"), "verdict"] == "not resolvable"  # no paired number of other


def test_the_markdown_sets_the_readings_side_by_side_and_names_the_kinds_by_verdict():
    text = extraction_kinds_table(extraction_kinds(differences(), {"zoo_long_mimic": summary()}), "base", 10)
    lines = text.splitlines()
    assert lines[0] == "# PHI kinds: extraction and the membership signal"
    header = next(line for line in lines if line.startswith("| kind"))
    assert header == ("| kind | extracted, top-1: members − non-members (points) | top-10 (points) | informia on "
                      "zoo_long_mimic: members − non-members (bits) | less other's (paired) |")  # fmt: skip
    row = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and not line.startswith("| kind")}
    assert (
        row["surname"] == "| surname | +3.0 [1.0, 5.0] | +5.0 [0.0, 11.0] | +1.80 [1.30, 2.30] | +1.60 [1.10, 2.10] |"
    )
    # nothing given back on either side at top-1: a count, not a degenerate interval
    assert (
        row["physician"] == "| physician | none extracted | +3.0 [0.0, 9.0] | +5.00 [4.00, 6.80] | +4.80 [3.80, 6.60] |"
    )
    assert row["date"] == "| date | – | – | +0.10 [-0.20, 0.40] | -0.10 [-0.40, 0.20] |"
    assert row["other"] == "| other | – | – | +0.20 [0.15, 0.25] | – |"
    assert "- Extracted more often from members than from non-members (top-1, separated): surname." in lines
    assert ("- A stronger signal than the ordinary words under informia on zoo_long_mimic (paired, separated): "
            "surname, physician; of them, no member's value given back at top-1: physician.") in lines  # fmt: skip


def test_without_a_separated_kind_the_sentences_say_none():
    quiet = summary().assign(minus_other_low=-9.0, minus_other_high=9.0)
    text = extraction_kinds_table(extraction_kinds(differences().assign(ci_low=-1.0), {"e": quiet}), "base", 10)
    assert "- Extracted more often from members than from non-members (top-1, separated): none." in text
    assert "(paired, separated): none; of them, no member's value given back at top-1: none." in text
