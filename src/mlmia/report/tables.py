"""The one table renderer: a table spec (data) + per-experiment metrics -> CSV, Markdown, LaTeX.

A table spec names its columns (each an experiment at an alpha) and its rows (a metric of an
attack, at a threshold or an FPR); a cell is the one metric that its row and column pin down
together (`mlmia.study.study.Cell`). The published numbers come beside it from a
paper-values mapping ``{column id: {cell key: value}}``. Under the table, what its numbers
rest on beyond the cells (`data_notes`): a parameter an attack chose from the data, and the
population an attack compared each sample with.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import PARAMETER_METRIC
from mlmia.core.errors import UserError
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.markdown import markdown_table
from mlmia.terms.experiment import Experiment
from mlmia.terms.spec import COUNT_METRICS, Cell

TIDY_COLUMNS = [
    "table", "column", "header", "row", "metric", "attack", "threshold", "fpr", "split", "features", "role", "level",
    "nonmembers", "target", "reference", "length", "energy", "alpha", "protocol", "value", "ci_low", "ci_high",
    "resolvable", "paper_value", "experiment", "versus", "difference", "difference_ci_low", "difference_ci_high",
]  # fmt: skip
PERCENT_METRICS = ("precision", "recall", "tpr_at_fpr")
NOT_RESOLVABLE = "n.r."
PROTOCOL_NOTES = {
    "published": "the authors' protocol (unmatched member draws, threshold on the non-members)",
    "corrected": "corrected protocol (matched member draws, threshold on the population set)",
}


def value_format(metric: str) -> str:
    """The format spec of a metric's numbers: counts whole, percentages with 1 decimal, others 3."""
    if metric in COUNT_METRICS:
        return ".0f"
    return ".1f" if metric in PERCENT_METRICS else ".3f"


def format_value(metric: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if metric in COUNT_METRICS:
        return f"{int(value)}"
    return format(value, value_format(metric))


def _select(metrics: pd.DataFrame, cell: Cell, alpha: float, protocol: str, replicates: bool = False) -> pd.DataFrame:
    chosen = metrics
    if "replicate" in chosen.columns:
        chosen = chosen[chosen["replicate"].notna() if replicates else chosen["replicate"].isna()]
    chosen = chosen[(chosen["metric"] == cell.metric) & (chosen["protocol"] == protocol)]
    for key in ("attack", "threshold", "split", "features", "role"):
        if getattr(cell, key) is not None:
            chosen = chosen[chosen[key] == getattr(cell, key)]
    if cell.metric in ("precision", "recall"):
        chosen = chosen[np.isclose(chosen["alpha"].astype(float), alpha)]
    if cell.fpr is not None:
        chosen = chosen[np.isclose(chosen["fpr"].astype(float), cell.fpr)]
    return chosen


def tidy_table(
    table_id: str,
    spec: dict,
    rows: list[dict],
    experiments: dict[str, Experiment],
    metrics: dict[str, pd.DataFrame],
    paper_values: dict,
    protocols: list[str],
) -> pd.DataFrame:
    """One row per (column, row, protocol) cell of a table; `metrics` maps each column's
    experiment to its metrics table, `paper_values` each column id to its published cells."""
    where = f"table {table_id!r}"
    records = []
    for column in spec["columns"]:
        experiment = experiments[column["experiment"]]
        alpha = float(column["alpha"])
        column_paper = paper_values.get(column["id"], {}) or {}
        for protocol in spec.get("protocols") or protocols:
            for row in rows:
                cell = Cell.pinned(column, row)
                found = _select(metrics[experiment.name], cell, alpha, protocol)
                if len(found) != 1:
                    raise UserError(
                        f"{where}, column {column['id']!r}, row {row.get('label')!r}: "
                        f"{len(found)} metrics match {cell.key} under protocol {protocol!r} at alpha {alpha}"
                    )
                found = found.iloc[0]
                difference = _versus(metrics[experiment.name], cell, alpha, protocol, found, where)
                records.append({
                    "table": table_id, "column": column["id"], "header": column.get("header", column["id"]),
                    "row": row.get("label", cell.key), "metric": cell.metric, "attack": cell.attack,
                    "threshold": cell.threshold, "fpr": cell.fpr, "split": cell.split, "features": cell.features, "role": cell.role,
                    "level": experiment.level, "nonmembers": experiment.nonmembers, "target": experiment.target,
                    "reference": experiment.reference, "length": experiment.length, "energy": experiment.energy,
                    "alpha": alpha if cell.metric in ("precision", "recall") else None, "protocol": protocol,
                    "value": float(found["value"]), "ci_low": float(found["ci_low"]), "ci_high": float(found["ci_high"]),
                    "resolvable": bool(found.get("resolvable", True)), "paper_value": column_paper.get(cell.key),
                    "experiment": experiment.name, "versus": cell.versus, **difference,
                })  # fmt: skip
    return pd.DataFrame.from_records(records, columns=TIDY_COLUMNS)


def _versus(metrics: pd.DataFrame, cell: Cell, alpha: float, protocol: str, found: pd.Series, where: str) -> dict:
    """The cell minus the same metric of attack `cell.versus`, with the 95% interval of the
    paired difference over the bootstrap replicates (both on the same resampled patients)."""
    empty = {"difference": np.nan, "difference_ci_low": np.nan, "difference_ci_high": np.nan}
    if cell.versus is None or cell.versus == cell.attack:
        return empty
    other = replace(cell, attack=cell.versus, versus=None)
    base = _select(metrics, other, alpha, protocol)
    if len(base) != 1:
        raise UserError(
            f"{where}: {len(base)} metrics match {other.key} (the cell's `versus`) under protocol {protocol!r}"
        )
    ours = _select(metrics, cell, alpha, protocol, replicates=True).set_index("replicate")["value"]
    theirs = _select(metrics, other, alpha, protocol, replicates=True).set_index("replicate")["value"]
    low, high = percentile_interval((ours - theirs).dropna().to_numpy())
    return {"difference": float(found["value"]) - float(base.iloc[0]["value"]), "difference_ci_low": low,
            "difference_ci_high": high}  # fmt: skip


def _has_paper(tidy: pd.DataFrame) -> bool:
    return bool(tidy["paper_value"].notna().any())


def _has_intervals(tidy: pd.DataFrame) -> bool:
    return bool(tidy["ci_low"].notna().any())


def _has_unresolvable(tidy: pd.DataFrame) -> bool:
    return bool((~tidy["resolvable"].astype(bool)).any())


def _cell(record: pd.Series) -> str:
    if not record["resolvable"]:
        return NOT_RESOLVABLE
    text = format_value(record["metric"], record["value"])
    if not np.isnan(record["ci_low"]):
        text += f" [{format_value(record['metric'], record['ci_low'])}, {format_value(record['metric'], record['ci_high'])}]"
    if record["paper_value"] is not None and not pd.isna(record["paper_value"]):
        text += f" ({format_value(record['metric'], float(record['paper_value']))})"
    if not pd.isna(record.get("difference", np.nan)):
        m = record["metric"]
        sign = "+" if record["difference"] >= 0 else "-"
        text += f"; Δ {sign}{format_value(m, abs(record['difference']))}"
        if not pd.isna(record["difference_ci_low"]):
            text += (
                f" [{format_value(m, record['difference_ci_low'])}, {format_value(m, record['difference_ci_high'])}]"
            )
    return text


def _grid(tidy: pd.DataFrame, protocol: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    part = tidy[tidy["protocol"] == protocol]
    headers = list(dict.fromkeys(part["header"]))
    body = []
    for label in dict.fromkeys(part["row"]):
        cells = part[part["row"] == label].set_index("header")
        body.append((label, [_cell(cells.loc[h]) if h in cells.index else "" for h in headers]))
    return headers, body


def notes(tidy: pd.DataFrame) -> list[str]:
    """What the brackets, parentheses and marks of this table mean (only those it has)."""
    out = []
    if _has_intervals(tidy):
        out.append("In brackets: the 95% interval of the patient bootstrap (patients resampled within each role).")
    if _has_paper(tidy):
        out.append("In parentheses: the number published in the paper, where it has that cell.")
    if "difference" in tidy.columns and tidy["difference"].notna().any():
        versus = ", ".join(sorted(set(tidy["versus"].dropna())))
        out.append(
            f"Δ: the cell minus the same metric of {versus}, with the 95% interval of the paired difference "
            "(both attacks on the same bootstrap resamples)."
        )
    if _has_unresolvable(tidy):
        out.append(
            f"{NOT_RESOLVABLE}: not resolvable: a TPR at an FPR below 1 / (number of non-members) cannot be "
            "estimated from this many non-members (the convention: the largest TPR over thresholds whose FPR is "
            "at most the given FPR)."
        )
    return out


def _short(value: float) -> str:
    """A parameter as the note prints it: 1.0, 0.3, 0.25."""
    text = f"{value:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _per_column(values: list[tuple[str, str]]) -> str:
    """The values: `x in every column`, or `x (A, B), y (C)`."""
    if len({v for _, v in values}) == 1:
        return f"{values[0][1]} in every column"
    grouped: dict[str, list[str]] = {}
    for header, value in values:
        grouped.setdefault(value, []).append(header)
    return ", ".join(f"{value} ({', '.join(headers)})" for value, headers in grouped.items())


def data_notes(spec: dict, rows: list[dict], experiments: dict[str, Experiment], metrics: dict) -> list[str]:
    """For each attack of the table's rows: the parameters it chose from the data in each
    column (metric rows ``parameter``, `Attack.tuned`), e.g. "RMIA (offline): a = 1.0 (tuned
    on the reference models)."; and where it compares each sample with the population
    (`Attack.reads_population`), the source of each column's population samples."""
    if spec["kind"] != "metrics":
        return []
    columns = [(c.get("header", c["id"]), c["experiment"]) for c in spec.get("columns", [])]
    out = []
    for name in dict.fromkeys(row["attack"] for row in rows if row.get("attack")):
        attack = get_attack(name)
        tuned: dict[str, list[tuple[str, str]]] = {}
        for header, experiment in columns:
            found = metrics[experiment]
            if "parameter" not in found.columns:
                continue
            found = found[(found["metric"] == PARAMETER_METRIC) & (found["attack"] == name)]
            for parameter, value in dict(zip(found["parameter"], found["value"])).items():
                tuned.setdefault(parameter, []).append((header, _short(float(value))))
        how = f" ({attack.tuning})" if attack.tuning else ""
        for parameter, values in tuned.items():
            if len({v for _, v in values}) == 1 and len(values) == len(columns):
                out.append(f"{attack.label}: {parameter} = {values[0][1]}{how}.")
            else:
                out.append(f"{attack.label}: {parameter}{how}: {_per_column(values)}.")
        if attack.reads_population:
            sources = [(header, experiments[experiment].population) for header, experiment in columns]
            out.append(f"{attack.label}: population samples from {_per_column(sources)}.")
    return out


def render_markdown(tidy: pd.DataFrame, spec: dict, extra: list[str] = ()) -> str:
    lines = [f"# {spec.get('title', tidy['table'].iloc[0])}", ""]
    if spec.get("caption"):
        lines += [spec["caption"].strip(), ""]
    for note in notes(tidy):
        lines += [note, ""]
    for protocol in dict.fromkeys(tidy["protocol"]):
        headers, body = _grid(tidy, protocol)
        if spec["kind"] == "metrics":  # Table 7's cells come from no protocol
            lines += [f"## {protocol}: {PROTOCOL_NOTES.get(protocol, protocol)}", ""]
        lines += [markdown_table(["", *headers], [[label, *cells] for label, cells in body]), ""]
    for note in extra:
        lines += [note, ""]
    return "\n".join(lines)


def _latex_escape(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("μ", r"$\mu$"),
        ("α", r"$\alpha$"),
    ):  # fmt: skip
        text = text.replace(char, escaped)
    return text


def render_latex(tidy: pd.DataFrame, spec: dict, extra: list[str] = ()) -> str:
    out = []
    for protocol in dict.fromkeys(tidy["protocol"]):
        headers, body = _grid(tidy, protocol)
        protocol_note = [f"Protocol: {PROTOCOL_NOTES.get(protocol, protocol)}."] if spec["kind"] == "metrics" else []
        caption = " ".join(
            [f"{spec.get('title', '')}.", spec.get("caption", "").strip(), *protocol_note, *notes(tidy), *extra]
        )
        out += [
            r"\begin{table}[t]",
            r"\centering\small",
            r"\begin{tabular}{l" + "c" * len(headers) + "}",
            r"\toprule",
            " & " + " & ".join(_latex_escape(h) for h in headers) + r" \\",
            r"\midrule",
        ]
        out += [
            _latex_escape(label) + " & " + " & ".join(_latex_escape(c) for c in cells) + r" \\" for label, cells in body
        ]
        out += [
            r"\bottomrule", r"\end{tabular}", rf"\caption{{{_latex_escape(caption)}}}",
            rf"\label{{tab:{tidy['table'].iloc[0]}-{protocol}}}", r"\end{table}", "",
        ]  # fmt: skip
    return "\n".join(out)


def render_static(table_id: str, spec: dict) -> tuple[pd.DataFrame, str, str]:
    """A table of fixed text (Table 8, notation): `header` and `body` rows from the spec."""
    header, body = spec["header"], spec["body"]
    tidy = pd.DataFrame(body, columns=header).assign(table=table_id)
    lines = [f"# {spec.get('title', table_id)}", ""]
    if spec.get("caption"):
        lines += [spec["caption"].strip(), ""]
    lines.append(markdown_table(header, body))
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


def render_table(
    table_id: str, spec: dict, rows: list[dict], experiments: dict[str, Experiment],
    metrics: dict[str, pd.DataFrame], paper_values: dict, protocols: list[str],
) -> tuple[pd.DataFrame, str, str]:  # fmt: skip
    """(tidy CSV table, Markdown, LaTeX) of one table."""
    if spec.get("kind") == "static":
        return render_static(table_id, spec)
    tidy = tidy_table(table_id, spec, rows, experiments, metrics, paper_values, protocols)
    extra = data_notes(spec, rows, experiments, metrics)
    return tidy, render_markdown(tidy, spec, extra), render_latex(tidy, spec, extra)
