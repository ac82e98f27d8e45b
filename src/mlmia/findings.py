"""The paper's qualitative findings, checked on a run's metrics (corrected protocol).

A finding is data: a cell (`compare`) that the paper says is above another (`against`),
optionally over every experiment of a level. Each check reports both values with their
bootstrap intervals and whether the finding holds; nothing here changes a metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.errors import UserError

CELL_KEYS = ("experiment", "metric", "method", "fpr")
FINDING_COLUMNS = [
    "finding", "claim", "experiment", "compare", "value", "ci_low", "ci_high",
    "against", "against_value", "against_ci_low", "against_ci_high", "margin", "holds", "separated",
]  # fmt: skip


def _cell(metrics: dict[str, pd.DataFrame], cell: dict, protocol: str) -> pd.Series:
    table = metrics.get(cell["experiment"])
    if table is None:
        raise UserError(f"finding: experiment {cell['experiment']!r} has no metrics")
    chosen = table[(table.metric == cell["metric"]) & (table.method == cell["method"]) & (table.protocol == protocol)]
    if cell.get("fpr") is not None:
        chosen = chosen[np.isclose(chosen.fpr, cell["fpr"])]
    if len(chosen) != 1:
        raise UserError(f"finding: {len(chosen)} metrics match {cell} under protocol {protocol!r}")
    return chosen.iloc[0]


def _describe(cell: dict) -> str:
    text = f"{cell['method']} {cell['metric']}"
    return text + (f"@{cell['fpr']:g}" if cell.get("fpr") is not None else "") + f" [{cell['experiment']}]"


def finding_scope(finding: dict, levels: dict[str, str]) -> list[str | None]:
    """The experiments a finding is checked on: those named (`experiments: [names]`), every
    experiment of a level (`experiments: sample`; `levels` maps name to level), or [None]
    when its two cells name their own experiments."""
    scope = finding.get("experiments")
    if isinstance(scope, list):
        return list(scope)
    return [name for name, level in levels.items() if level == scope] if scope else [None]


def check_findings(
    findings: list[dict], metrics: dict[str, pd.DataFrame], levels: dict[str, str], protocol: str = "corrected"
) -> pd.DataFrame:
    """One row per comparison: does `compare` exceed `against` by more than `margin`?

    A finding with `experiments: <level>` is checked on every experiment of that level
    (`levels` maps experiment name to level), one with `experiments: [names]` on those
    experiments; its cells then name no experiment.
    """
    rows = []
    for finding in findings:
        for name in finding_scope(finding, levels):
            compare = {k: finding["compare"].get(k) for k in CELL_KEYS}
            against = {k: finding["against"].get(k) for k in CELL_KEYS}
            if name is not None:
                compare["experiment"] = against["experiment"] = name
            a, b = _cell(metrics, compare, protocol), _cell(metrics, against, protocol)
            margin = float(finding.get("margin", 0.0))
            difference = float(a.value) - float(b.value)
            holds = difference > margin or (finding.get("allow_equal", False) and np.isclose(difference, margin))
            rows.append(
                {
                    "finding": finding["id"],
                    "claim": finding["claim"],
                    "experiment": name or compare["experiment"],
                    "compare": _describe(compare),
                    "value": float(a.value),
                    "ci_low": float(a.ci_low),
                    "ci_high": float(a.ci_high),
                    "against": _describe(against),
                    "against_value": float(b.value),
                    "against_ci_low": float(b.ci_low),
                    "against_ci_high": float(b.ci_high),
                    "margin": margin,
                    "holds": bool(holds),
                    # the intervals do not overlap: the difference is beyond resampling noise
                    "separated": bool(a.ci_low > b.ci_high),
                }
            )
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def render_findings(checks: pd.DataFrame, world: str) -> str:
    lines = [
        "# The paper's findings in this world",
        "",
        f"World: {world}. Corrected protocol; 95% bootstrap intervals in brackets. A finding holds when the first",
        "value exceeds the second by more than the margin; `separated` when the intervals do not overlap.",
        "",
    ]
    for finding, part in checks.groupby("finding", sort=False):
        held = int(part.holds.sum())
        verdict = "holds" if held == len(part) else ("does NOT hold" if held == 0 else f"holds in {held} of {len(part)}")
        lines += [f"## {part.claim.iloc[0]}: {verdict}", "", "| first | value | second | value | holds | separated |", "|---|---|---|---|---|---|"]
        for _, r in part.iterrows():
            lines.append(
                f"| {r['compare']} | {r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] | {r.against} | "
                f"{r.against_value:.3f} [{r.against_ci_low:.3f}, {r.against_ci_high:.3f}] | {'yes' if r.holds else 'NO'} | {'yes' if r.separated else 'no'} |"
            )
        lines.append("")
    return "\n".join(lines)
