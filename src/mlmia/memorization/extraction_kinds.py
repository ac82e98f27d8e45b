"""The extraction study's PHI kinds beside the membership signal their tokens carry (`snakemake
extraction` with `extraction.token_kinds`): per PHI kind, how much more often the target gives a
value back to its members than to non-members (the extraction study's paired differences,
`mlmia.memorization.extraction.rate_differences`, sample level, top-1 and top-k), and how much
more member-like the kind's tokens score under each named experiment's per-slot attacks (the
summary by kind, `mlmia.memorization.token_kinds.kind_summary`: members − non-members, and that
difference less the ordinary words', paired).

The two answer different questions: extraction asks whether the model says a value back; the
per-slot score asks whether the value's tokens tell a member from a non-member. A kind can carry a
membership signal that infilling never turns into a reconstruction, and the table sets them side
by side so that the difference is read, not inferred. Kinds and numbers only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlmia.core.io import atomic_path, write_text
from mlmia.memorization.extraction_report import interval_text
from mlmia.memorization.token_kinds import kind_order
from mlmia.report.finding import interval_verdict
from mlmia.report.markdown import markdown_table
from mlmia.terms.scores import OTHER_KIND, SLOT_UNITS

#: the long table's columns: one row per kind and piece of evidence
COLUMNS = ["kind", "evidence", "experiment", "attack", "value", "ci_low", "ci_high", "verdict", "members",
           "nonmembers", "units"]  # fmt: skip
#: the extraction study's evidence: its metric in differences.csv, by name here
EXTRACTED = {"extracted_top1": "top1", "extracted_topk": "topk"}
#: the per-slot evidence: the summary's columns (value, low, high), by name here
SLOT_EVIDENCE = {"slot_score": ("difference", "ci_low", "ci_high"),
                 "slot_score_minus_other": ("minus_other", "minus_other_low", "minus_other_high")}  # fmt: skip


def extraction_kinds(differences: pd.DataFrame, summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The long table (`COLUMNS`): per PHI kind the extraction study's members − non-members
    difference of the target (sample level; `value` a share, `members`/`nonmembers` the two rates),
    and per experiment of `summaries` (its `kind_summary`) and attack the per-slot difference and
    that difference less the ordinary words' (`value` in the attack's units; `members`/`nonmembers`
    the mean slot scores, NaN for the paired one). `verdict`: `interval_verdict` against 0."""
    rows = []
    chosen = differences[(differences["comparison"] == "members_vs_nonmembers") & (differences["level"] == "sample")]
    for evidence, metric in EXTRACTED.items():
        for row in chosen[(chosen["metric"] == metric) & (chosen["kind"] != "all")].itertuples():
            rows.append({"kind": row.kind, "evidence": evidence, "experiment": "", "attack": "",
                         "value": row.difference, "ci_low": row.ci_low, "ci_high": row.ci_high,
                         "members": row.first, "nonmembers": row.second, "units": "share"})  # fmt: skip
    for experiment, summary in summaries.items():
        for row in summary.to_dict(orient="records"):
            for evidence, (value, low, high) in SLOT_EVIDENCE.items():
                paired = evidence != "slot_score"
                rows.append({"kind": row["kind"], "evidence": evidence, "experiment": experiment,
                             "attack": row["attack"], "value": row[value], "ci_low": row[low], "ci_high": row[high],
                             "members": np.nan if paired else row["member_mean"],
                             "nonmembers": np.nan if paired else row["nonmember_mean"],
                             "units": SLOT_UNITS.get(row["attack"], "score")})  # fmt: skip
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["verdict"] = [interval_verdict(low, high, 0.0) for low, high in zip(frame["ci_low"], frame["ci_high"])]
    order = {kind: i for i, kind in enumerate(kind_order(frame["kind"]))}
    return frame.sort_values("kind", key=lambda kinds: kinds.map(order), kind="stable").reset_index(drop=True)


def _extracted_cell(row) -> str:
    """A difference of rates in points, or "none extracted" where neither side gave a value back."""
    if row is None:
        return "–"
    if row["members"] == 0 and row["nonmembers"] == 0:
        return "none extracted"
    return interval_text(row["value"], row["ci_low"], row["ci_high"], True)


def _names(kinds: list[str]) -> str:
    return ", ".join(kinds) or "none"


def extraction_kinds_table(frame: pd.DataFrame, target: str, top_k: int) -> str:
    """The Markdown of `extraction_kinds`' table: a row per kind, the extraction differences (percentage
    points) and each experiment's and attack's per-slot differences; then, per experiment and attack,
    the kinds whose signal is separated above the ordinary words', and those of them from which no
    member's value was given back at top-1."""
    rows = {(r["kind"], r["evidence"], r["experiment"], r["attack"]): r for r in frame.to_dict(orient="records")}
    slots = frame[frame["evidence"] == "slot_score"]
    pairs = list(dict.fromkeys(zip(slots["experiment"], slots["attack"])))
    kinds = list(dict.fromkeys(frame["kind"]))
    header = ["kind", "extracted, top-1: members − non-members (points)", f"top-{top_k} (points)"]
    for experiment, attack in pairs:
        unit = SLOT_UNITS.get(attack, "score")
        header += [f"{attack} on {experiment}: members − non-members ({unit})", f"less {OTHER_KIND}'s (paired)"]
    body = []
    for kind in kinds:
        line = [kind, *(_extracted_cell(rows.get((kind, evidence, "", ""))) for evidence in EXTRACTED)]
        for experiment, attack in pairs:
            for evidence in SLOT_EVIDENCE:
                row = rows.get((kind, evidence, experiment, attack))
                if row is None or (evidence != "slot_score" and kind == OTHER_KIND):  # other less itself: none
                    line.append("–")
                else:
                    line.append(interval_text(row["value"], row["ci_low"], row["ci_high"], True, scale=1.0, digits=2))
        body.append(line)
    parts = [
        "# PHI kinds: extraction and the membership signal",
        "",
        f"Per PHI kind, two readings of the target ({target}). Extracted: how many more of its members' values "
        f"than of non-members' the target gives back (top-1, and among its top-{top_k} spans), in percentage points, "
        'sample level, from the extraction study\'s rates (table_extraction.md); "none extracted": no value of '
        "either side given back. Per-slot attacks: the members' mean slot score less the non-members' over the "
        "experiment's audited samples (a slot: one masked token of one masking pattern; higher: more "
        f"member-like), and that difference less the ordinary words' ({OTHER_KIND}: tokens in no PHI span), its "
        "interval from the same resamples. 95% patient-bootstrap intervals in brackets; the extraction and the "
        "experiment resample their own samples (the extraction: every length of its sample table; the "
        "experiment: its length bucket), so no interval joins a column of one to a column of the other. Kinds "
        "and numbers only.",
        "",
        markdown_table(header, body),
        "",
    ]
    found = []
    extracted = [k for k in kinds if (k, "extracted_top1", "", "") in rows
                 and rows[k, "extracted_top1", "", ""]["verdict"] == "separated"]  # fmt: skip
    found.append(f"Extracted more often from members than from non-members (top-1, separated): {_names(extracted)}.")
    for experiment, attack in pairs:
        above = [k for k in kinds if rows.get((k, "slot_score_minus_other", experiment, attack), {}).get("verdict")
                 == "separated"]  # fmt: skip
        never = [k for k in above if (k, "extracted_top1", "", "") in rows
                 and rows[k, "extracted_top1", "", ""]["members"] == 0]  # fmt: skip
        found.append(
            f"A stronger signal than the ordinary words under {attack} on {experiment} (paired, separated): "
            f"{_names(above)}; of them, no member's value given back at top-1: {_names(never)}."
        )
    return "\n".join([*parts, *(f"- {line}" for line in found)]) + "\n"


def write_extraction_kinds(
    differences: pd.DataFrame, summaries: Mapping[str, pd.DataFrame], target: str, top_k: int, outputs: Mapping
) -> None:
    """The long table (CSV, `outputs["csv"]`) and its Markdown (`outputs["table"]`)."""
    frame = extraction_kinds(differences, summaries)
    with atomic_path(outputs["csv"]) as tmp:
        frame.to_csv(tmp, index=False)
    write_text(extraction_kinds_table(frame, target, top_k), outputs["table"])
