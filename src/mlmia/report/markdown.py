"""The one Markdown table writer: every pipe table the project writes (result tables, findings,
the benchmark report) goes through `markdown_table`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown pipe table (https://github.github.com/gfm/#tables-extension-):
    the header row, the delimiter row ``|---|---|`` (left-aligned, one ``---|`` per column), one
    line per row; no trailing newline.

    Every cell is ``str(cell)`` with one space on either side (``| a | b |``), so an empty body
    cell reads ``|  |``; an empty header cell (the corner above a column of row labels) reads
    ``| |``. This is the exact layout of every table the project wrote before the writer existed,
    so result tables keep their bytes."""
    head = "|" + "|".join(f" {cell} " if str(cell) else " " for cell in header) + "|"
    return "\n".join([head, "|" + "---|" * len(header), *(_row(row) for row in rows)])
