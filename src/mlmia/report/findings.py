"""Findings of a study, checked on a run's metrics (corrected protocol) with paired intervals.

A finding is data: a cell (`compare`) that a paper says is above another (`against`), by
more than a margin, over the experiments in its scope (`mlmia.study.Study.finding_checks`).
A check of kind *baseline* (an attack against the blind baseline) is not a claim to
reproduce: it is reported in its own section and flagged where the attack does not beat it.
Both cells are computed on the same patient-bootstrap replicates (`mlmia.metrics.bootstrap`),
so the replicate differences are a paired bootstrap of the difference: a check is
*separated* when the 95% interval of the difference lies above the margin, *reversed* when it
lies below, and *not separated* when it straddles it. Nothing here changes a metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.markdown import markdown_table
from mlmia.report.tables import format_value
from mlmia.study.study import Cell

FINDING_COLUMNS = [
    "finding", "claim", "kind", "experiment", "metric", "compare", "value", "ci_low", "ci_high", "against", "against_value",
    "against_ci_low", "against_ci_high", "difference", "difference_ci_low", "difference_ci_high", "replicates",
    "margin", "holds", "separated", "verdict",
]  # fmt: skip


def _cell_rows(metrics: dict[str, pd.DataFrame], side: dict, protocol: str) -> pd.DataFrame:
    """The estimate and replicate rows of one cell (replicate NA: the estimate)."""
    name = side["experiment"]
    table = metrics.get(name)
    if table is None:
        raise UserError(f"finding: experiment {name!r} has no metrics")
    cell = Cell.pinned(side)
    chosen = table[
        (table["metric"] == cell.metric) & (table["attack"] == cell.attack) & (table["protocol"] == protocol)
    ]
    if cell.threshold is not None:
        chosen = chosen[
            (chosen["threshold"] == cell.threshold) & np.isclose(chosen["alpha"].astype(float), side.get("alpha", 0.1))
        ]
    if cell.fpr is not None:
        chosen = chosen[np.isclose(chosen["fpr"].astype(float), cell.fpr)]
    if chosen["replicate"].isna().sum() != 1:
        raise UserError(
            f"finding: {int(chosen['replicate'].isna().sum())} metrics match {cell.key} of experiment {name!r}"
        )
    return chosen


def describe(side: dict) -> str:
    cell = Cell.pinned(side)
    text = f"{cell.attack} {cell.metric}" + (f"@{cell.threshold}" if cell.threshold else "")
    return text + (f"@{cell.fpr:g}" if cell.fpr is not None else "") + f" [{side['experiment']}]"


def check_findings(checks: list[dict], metrics: dict[str, pd.DataFrame], protocol: str = "corrected") -> pd.DataFrame:
    """One row per check: both values with their intervals, the difference with its paired
    interval, and whether the finding holds (point estimate) and separates (interval)."""
    rows = []
    for check in checks:
        a = _cell_rows(metrics, check["compare"], protocol)
        b = _cell_rows(metrics, check["against"], protocol)
        point_a, point_b = a[a["replicate"].isna()].iloc[0], b[b["replicate"].isna()].iloc[0]
        reps_a = a.dropna(subset=["replicate"]).set_index("replicate")["value"]
        reps_b = b.dropna(subset=["replicate"]).set_index("replicate")["value"]
        paired = (reps_a - reps_b).dropna()  # aligned on the replicate number
        difference = float(point_a["value"]) - float(point_b["value"])
        low, high = percentile_interval(paired.to_numpy())
        margin = check["margin"]
        holds = difference > margin or (check["allow_equal"] and bool(np.isclose(difference, margin)))
        if np.isnan(low):
            verdict = "no interval"
        elif low > margin:
            verdict = "separated"
        elif high < margin:
            verdict = "reversed"
        else:
            verdict = "not separated"
        rows.append({
            "finding": check["finding"], "claim": check["claim"], "kind": check.get("kind", "finding"),
            "experiment": check["scope"] or check["compare"]["experiment"],
            "metric": Cell.pinned(check["compare"]).metric, "compare": describe(check["compare"]), "value": float(point_a["value"]),
            "ci_low": float(point_a["ci_low"]), "ci_high": float(point_a["ci_high"]),
            "against": describe(check["against"]), "against_value": float(point_b["value"]),
            "against_ci_low": float(point_b["ci_low"]), "against_ci_high": float(point_b["ci_high"]),
            "difference": difference, "difference_ci_low": low, "difference_ci_high": high,
            "replicates": int(len(paired)), "margin": margin, "holds": bool(holds),
            "separated": verdict == "separated", "verdict": verdict,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def _number(value: float, metric: str) -> str:
    return format_value(metric, value)


def summary_line(checks: pd.DataFrame) -> str:
    """How many findings hold and separate; baseline checks are counted apart (they are no claim)."""
    claims = checks[checks["kind"] != "baseline"]
    baseline = checks[checks["kind"] == "baseline"]
    parts = []
    if len(claims) or not len(baseline):
        held, separated = int(claims.holds.sum()), int(claims.separated.sum())
        parts.append(
            f"{held} of {len(claims)} checks hold by the point estimate; {separated} of {len(claims)} separate "
            "(the paired 95% interval of the difference lies above the margin)."
        )
    if len(baseline):
        parts.append(
            f"Against the blind baseline: {int(baseline.holds.sum())} of {len(baseline)} attack checks above it, "
            f"{int(baseline.separated.sum())} separated; {int((~baseline.holds).sum())} flagged."
        )
    return " ".join(parts)


def _section(part: pd.DataFrame) -> list[str]:
    held, separated = int(part.holds.sum()), int(part.separated.sum())
    if part["kind"].iloc[0] == "baseline":
        verdict = "above it" if held == len(part) else f"FLAG: not above it in {len(part) - held} of {len(part)}"
    else:
        verdict = (
            "holds" if held == len(part) else ("does NOT hold" if held == 0 else f"holds in {held} of {len(part)}")
        )
    lines = [
        f"### {part.claim.iloc[0]}: {verdict}; {separated} of {len(part)} separated",
        "",
        f"Margin: {_number(part.margin.iloc[0], part.metric.iloc[0])}.",
        "",
    ]
    body = []
    for _, r in part.iterrows():
        m = r.metric
        interval = (
            ""
            if np.isnan(r.difference_ci_low)
            else f" [{_number(r.difference_ci_low, m)}, {_number(r.difference_ci_high, m)}]"
        )
        body.append(
            [r["compare"], f"{_number(r.value, m)} [{_number(r.ci_low, m)}, {_number(r.ci_high, m)}]", r.against,
             f"{_number(r.against_value, m)} [{_number(r.against_ci_low, m)}, {_number(r.against_ci_high, m)}]",
             f"{_number(r.difference, m)}{interval}", "yes" if r.holds else "NO", r.verdict]
        )  # fmt: skip
    header = ["first", "value", "second", "value", "difference [paired 95% interval]", "holds", "verdict"]
    return [*lines, markdown_table(header, body), ""]


def render_findings(checks: pd.DataFrame, world: str) -> str:
    lines = [
        "# Findings checked on this run",
        "",
        f"World: {world}. Corrected protocol. In brackets: 95% intervals of the patient bootstrap (patients",
        "resampled within each role and source; each replicate repeats the member draws). Both sides of a check are",
        "computed on the same replicates, so the difference's interval is paired. A check *holds* when the first",
        "value exceeds the second by more than the margin; it is *separated* when the difference's interval lies",
        "above the margin, *reversed* when it lies below, *not separated* otherwise.",
        "",
        summary_line(checks),
        "",
    ]
    baseline = checks["kind"] == "baseline"
    if (~baseline).any():
        lines += ["## Findings", ""]
        for _, part in checks[~baseline].groupby("finding", sort=False):
            lines += _section(part)
    if baseline.any():
        lines += [
            "## Attacks against the blind baseline",
            "",
            "Not claims: blind (a bag-of-words classifier that never sees the model) measures how much the member",
            "and non-member texts differ by their words alone. An attack that does not beat it is flagged: its AUC",
            "may be explained by that shift rather than by what the model learnt.",
            "",
        ]
        for _, part in checks[baseline].groupby("finding", sort=False):
            lines += _section(part)
    return "\n".join(lines)
