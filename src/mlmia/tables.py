"""The one table renderer: a table spec (data) + per-experiment metrics -> CSV, Markdown, LaTeX.

A table spec names its columns (each an experiment at an alpha), its rows (metric, method)
and its caption; the published numbers live beside it in a paper-values mapping
``{table: {column: {"metric/method": value}}}``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attack import Experiment
from mlmia.errors import UserError

TIDY_COLUMNS = [
    "table", "column", "header", "row", "metric", "method", "fpr", "split", "level", "nonmembers", "target", "reference",
    "length", "energy", "alpha", "protocol", "value", "ci_low", "ci_high", "paper_value", "experiment",
]  # fmt: skip
PERCENT_METRICS = ("precision", "recall", "tpr_at_fpr")


CELL_KEYS = ("metric", "method", "fpr", "split")  # what a row or a column may pin down


def parse_rows(spec_rows, row_sets: dict, where: str) -> list[dict]:
    if isinstance(spec_rows, str):
        if spec_rows not in row_sets:
            raise UserError(f"{where}: unknown row set {spec_rows!r}")
        spec_rows = row_sets[spec_rows]
    return [dict(row) for row in spec_rows]


def cell_key(cell: dict) -> str:
    """The paper-values key of a cell: "metric/method", "@fpr" for TPR rows."""
    return f"{cell['metric']}/{cell['method']}" + (f"@{cell['fpr']:g}" if cell.get("fpr") is not None else "")


def format_value(metric: str, value: float) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return f"{value:.1f}" if metric in PERCENT_METRICS else f"{value:.3f}"


def _select(metrics: pd.DataFrame, cell: dict, alpha: float, protocol: str) -> pd.DataFrame:
    chosen = metrics[(metrics["metric"] == cell["metric"]) & (metrics["method"] == cell["method"]) & (metrics["protocol"] == protocol)]
    if cell["metric"] in ("precision", "recall"):
        chosen = chosen[np.isclose(chosen["alpha"], alpha)]
    if cell.get("fpr") is not None:
        chosen = chosen[np.isclose(chosen["fpr"], cell["fpr"])]
    if cell.get("split") is not None:
        chosen = chosen[chosen["split"] == cell["split"]]
    return chosen


def tidy_table(
    table_id: str,
    spec: dict,
    row_sets: dict,
    experiments: dict[str, Experiment],
    metrics: dict[str, pd.DataFrame],
    paper_values: dict,
    protocols: list[str],
) -> pd.DataFrame:
    """One row per (column, row, protocol) cell of a table.

    A cell is the one metrics row that its row and its column pin down together: rows
    usually name (metric, method), columns an experiment at an alpha, but either may carry
    any of metric, method, fpr, split. `metrics` maps each column's experiment to its table.
    """
    where = f"table {table_id!r}"
    rows = parse_rows(spec["rows"], row_sets, where)
    published = paper_values.get(table_id, {}) or {}
    records = []
    for column in spec["columns"]:
        experiment = experiments[column["experiment"]]
        alpha = float(column.get("alpha", 0.1))
        column_paper = published.get(column["id"], {}) or {}
        for protocol in spec.get("protocols", protocols):
            for row in rows:
                cell = {key: row.get(key, column.get(key)) for key in CELL_KEYS}
                found = _select(metrics[experiment.name], cell, alpha, protocol)
                if len(found) != 1:
                    raise UserError(
                        f"{where}, column {column['id']!r}, row {row.get('label')!r}: "
                        f"{len(found)} metrics match {cell_key(cell)} under protocol {protocol!r} at alpha {alpha}"
                    )
                found = found.iloc[0]
                records.append(
                    {
                        "table": table_id,
                        "column": column["id"],
                        "header": column.get("header", column["id"]),
                        "row": row.get("label", cell_key(cell)),
                        "metric": cell["metric"],
                        "method": cell["method"],
                        "fpr": cell["fpr"],
                        "split": cell["split"],
                        "level": experiment.level,
                        "nonmembers": experiment.nonmembers,
                        "target": experiment.target,
                        "reference": experiment.reference,
                        "length": experiment.length,
                        "energy": experiment.energy,
                        "alpha": alpha if cell["metric"] in ("precision", "recall") else None,
                        "protocol": protocol,
                        "value": float(found["value"]),
                        "ci_low": float(found["ci_low"]),
                        "ci_high": float(found["ci_high"]),
                        "paper_value": column_paper.get(cell_key(cell)),
                        "experiment": experiment.name,
                    }
                )
    return pd.DataFrame.from_records(records, columns=TIDY_COLUMNS)


def _cell(record: pd.Series, with_paper: bool = True) -> str:
    text = format_value(record["metric"], record["value"])
    if not np.isnan(record["ci_low"]):
        text += f" [{format_value(record['metric'], record['ci_low'])}, {format_value(record['metric'], record['ci_high'])}]"
    if with_paper and record["paper_value"] is not None and not pd.isna(record["paper_value"]):
        text += f" ({format_value(record['metric'], float(record['paper_value']))})"
    return text


def _grid(tidy: pd.DataFrame, protocol: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    part = tidy[tidy["protocol"] == protocol]
    headers = list(dict.fromkeys(part["header"]))
    body = []
    for label in dict.fromkeys(part["row"]):
        cells = part[part["row"] == label].set_index("header")
        body.append((label, [_cell(cells.loc[h]) if h in cells.index else "" for h in headers]))
    return headers, body


PROTOCOL_NOTES = {
    "published": "the authors' protocol (unmatched member draws, threshold on the non-members)",
    "corrected": "corrected protocol (matched member pairs, threshold on the population set, bootstrap 95% interval in brackets)",
}


def render_markdown(tidy: pd.DataFrame, spec: dict) -> str:
    lines = [f"# {spec.get('title', tidy['table'].iloc[0])}", ""]
    if spec.get("caption"):
        lines += [spec["caption"].strip(), ""]
    lines += ["In parentheses: the number published in the paper, where it has that cell.", ""]
    for protocol in dict.fromkeys(tidy["protocol"]):
        headers, body = _grid(tidy, protocol)
        lines += [f"## {protocol}: {PROTOCOL_NOTES.get(protocol, protocol)}", ""]
        lines.append("| | " + " | ".join(headers) + " |")
        lines.append("|---|" + "---|" * len(headers))
        lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in body]
        lines.append("")
    return "\n".join(lines)


def _latex_escape(text: str) -> str:
    for char, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("μ", r"$\mu$"), ("α", r"$\alpha$")):
        text = text.replace(char, escaped)
    return text


def render_latex(tidy: pd.DataFrame, spec: dict) -> str:
    out = []
    for protocol in dict.fromkeys(tidy["protocol"]):
        headers, body = _grid(tidy, protocol)
        caption = _latex_escape(f"{spec.get('title', '')}. {spec.get('caption', '').strip()} Protocol: {PROTOCOL_NOTES.get(protocol, protocol)}. In parentheses: the published number.")
        out += [
            r"\begin{table}[t]",
            r"\centering\small",
            r"\begin{tabular}{l" + "c" * len(headers) + "}",
            r"\toprule",
            " & " + " & ".join(_latex_escape(h) for h in headers) + r" \\",
            r"\midrule",
        ]
        out += [_latex_escape(label) + " & " + " & ".join(_latex_escape(c) for c in cells) + r" \\" for label, cells in body]
        out += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", rf"\label{{tab:{tidy['table'].iloc[0]}-{protocol}}}", r"\end{table}", ""]
    return "\n".join(out)


def render_static(table_id: str, spec: dict) -> tuple[pd.DataFrame, str, str]:
    """A table of fixed text (Table 8, notation): `header` and `body` rows from the spec."""
    header, body = spec["header"], spec["body"]
    tidy = pd.DataFrame(body, columns=header).assign(table=table_id)
    lines = [f"# {spec.get('title', table_id)}", ""]
    if spec.get("caption"):
        lines += [spec["caption"].strip(), ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in body]
    latex = [
        r"\begin{table}[t]",
        r"\centering\small",
        r"\begin{tabular}{" + "l" * len(header) + "}",
        r"\toprule",
        " & ".join(_latex_escape(h) for h in header) + r" \\",
        r"\midrule",
        *[" & ".join(_latex_escape(str(c)) for c in row) + r" \\" for row in body],
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_latex_escape(spec.get('title', table_id))}}}",
        rf"\label{{tab:{table_id}}}",
        r"\end{table}",
    ]
    return tidy, "\n".join(lines) + "\n", "\n".join(latex) + "\n"
