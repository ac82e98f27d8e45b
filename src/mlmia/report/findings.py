"""The paper's findings, and the zoo's and DP's checks, on a run's metrics (corrected protocol)
with paired intervals, as `mlmia.report.finding.Finding` records.

A finding is data: a cell (`compare`) that a paper says is above another (`against`), by
more than a margin, over the experiments in its scope (`mlmia.study.Study.finding_checks`).
A check of kind *baseline* (an attack against the blind baseline) is not a claim to
reproduce: it is reported in its own section and flagged where the attack does not beat it.
Both cells are computed on the same patient-bootstrap replicates (`mlmia.metrics.bootstrap`),
so the replicate differences are a paired bootstrap of the difference, and its 95% percentile
interval (`mlmia.metrics.intervals.percentile_interval`) gives the verdict
(`mlmia.report.finding.interval_verdict`): *separated* above the margin, *reversed* below it,
*not separated* when it holds it, *not resolvable* when no replicate has the difference. A
check *holds* when the difference exceeds the margin (or equals it, for a claim "at least").
Nothing here changes a metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.finding import Finding, interval_verdict, render_findings
from mlmia.report.tables import value_format
from mlmia.terms.spec import Cell

INTERVAL = "paired patient bootstrap, 95% percentile interval"
TITLE = "Findings checked on this run"


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
            (chosen["threshold"] == cell.threshold) & np.isclose(chosen["alpha"].astype(float), side["alpha"])
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


def check_findings(checks: list[dict], metrics: dict[str, pd.DataFrame], protocol: str = "corrected") -> list[Finding]:
    """One finding per check: both values with their intervals, the difference with its paired
    interval, whether it holds (point estimate) and its verdict (interval)."""
    out = []
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
        verdict = interval_verdict(low, high, margin)
        metric = Cell.pinned(check["compare"]).metric
        out.append(
            Finding(
                finding=check["finding"], claim=check["claim"], kind=check["kind"],
                scope=check["scope"] or check["compare"]["experiment"], measure=metric,
                first=describe(check["compare"]), first_value=float(point_a["value"]),
                first_ci_low=float(point_a["ci_low"]), first_ci_high=float(point_a["ci_high"]),
                second=describe(check["against"]), second_value=float(point_b["value"]),
                second_ci_low=float(point_b["ci_low"]), second_ci_high=float(point_b["ci_high"]),
                difference=difference, difference_ci_low=low, difference_ci_high=high, interval=INTERVAL,
                n=int(len(paired)), margin=margin, holds=bool(holds), verdict=verdict,
                note="no interval: no replicate has the difference" if verdict == "not resolvable" else "",
                number_format=value_format(metric),
            )
        )  # fmt: skip
    return out


def method(world: str, findings: list[Finding]) -> str:
    """The method paragraph of the paper's findings file."""
    text = (
        f"World: {world}. Corrected protocol. In brackets: 95% intervals of the patient bootstrap (patients "
        "resampled within each role and source; each replicate repeats the member draws); n: the replicates. Both "
        "sides of a check are computed on the same replicates, so the difference's interval is paired. A check "
        "*holds* when the first value exceeds the second by more than the margin (by at least the margin where "
        'the claim says "at least").'
    )
    if any(f.kind == "baseline" for f in findings):
        text += (
            " The checks against a baseline are no claims: blind (a bag-of-words classifier that never sees the "
            "model) measures how much the member and non-member texts differ by their words alone. An attack that "
            "does not beat it is flagged: its AUC may be explained by that shift rather than by what the model learnt."
        )
    return text


def render(findings: list[Finding], world: str) -> str:
    """The findings file of a run (`mlmia.report.finding.render_findings`)."""
    return render_findings(findings, TITLE, method(world, findings))
