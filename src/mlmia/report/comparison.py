"""`paper_comparison.md`: every table cell beside the number the paper printed."""

from __future__ import annotations

import pandas as pd

from mlmia.report.markdown import markdown_table
from mlmia.report.tables import format_value

COLUMNS = ["column", "row", "protocol", "ours", "95% CI", "paper", "difference", "same digit"]


def _printed_digits(metric: str) -> int:
    return 3 if metric == "auc" else 1


def paper_comparison(tables: list[pd.DataFrame], world: str) -> str:
    lines = [
        "# Our numbers beside the published ones",
        "",
        f"World: {world}. One line per table cell; `paper` is empty where the paper has no such cell.",
        "`same digit` says whether our value, rounded as the paper prints it, equals the printed number.",
        "",
    ]
    for tidy in tables:
        if "value" not in tidy.columns or tidy.empty:
            continue
        table_id = tidy["table"].iloc[0]
        has_paper = tidy["paper_value"].notna()
        lines += [f"## {table_id}", ""]
        for protocol, sub in tidy[has_paper].groupby("protocol", sort=False):
            digits = sub["metric"].map(_printed_digits)
            same = [round(v, d) == round(float(p), d) for v, d, p in zip(sub["value"], digits, sub["paper_value"])]
            lines.append(
                f"- {protocol}: {sum(same)} of {len(same)} cells with a published number match it to the printed digit."
            )
        if has_paper.any():
            lines.append("")
        body = []
        for _, r in tidy.iterrows():
            ci = (
                ""
                if pd.isna(r["ci_low"])
                else f"[{format_value(r['metric'], r['ci_low'])}, {format_value(r['metric'], r['ci_high'])}]"
            )
            if pd.isna(r["paper_value"]):
                paper = difference = same_digit = ""
            else:
                paper = format_value(r["metric"], float(r["paper_value"]))
                difference = format_value(r["metric"], r["value"] - float(r["paper_value"]))
                d = _printed_digits(r["metric"])
                same_digit = "yes" if round(r["value"], d) == round(float(r["paper_value"]), d) else "no"
            body.append(
                [r["header"], r["row"], r["protocol"], format_value(r["metric"], r["value"]), ci, paper, difference,
                 same_digit]
            )  # fmt: skip
        lines += [markdown_table(COLUMNS, body), ""]
    return "\n".join(lines)


__all__ = ["paper_comparison"]
