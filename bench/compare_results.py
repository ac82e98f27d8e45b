"""Two results/<run>/ folders compared, for a change that should move no number (a refactor):
tables (csv, md, tex), Parquet, PNG, JSON and TSV byte for byte, PDFs without their creation
and modification dates (matplotlib writes the time); logs/ and benchmarks/ are left out (times).
A Parquet file that differs is read to say how: its columns, its shape, or which columns' values.

    python bench/compare_results.py results_before/ci results_after/ci

Prints one line per file that differs or lies in one folder only, then the counts; exit 1 when
any differs. For a change that renames a column or moves timings, `--renamed OLD=NEW` renames
BEFORE's Parquet columns first, and `--without-timings` leaves out what a rerun always changes:
the seconds and tokens per second of a training record (train_info.json, train_log.csv, a
run table's `seconds`), a JSON record compared with its keys sorted.

    python bench/compare_results.py --renamed k=patterns --without-timings BEFORE AFTER"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

COMPARED = (".csv", ".md", ".tex", ".parquet", ".png", ".pdf", ".json", ".tsv")
LEFT_OUT = re.compile(r"(^|/)(logs|benchmarks)/")
PDF_DATES = re.compile(rb"/(CreationDate|ModDate) \([^)]*\)")


def compared_files(folder: Path) -> set[Path]:
    return {
        p.relative_to(folder)
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in COMPARED and not LEFT_OUT.search(str(p.relative_to(folder)))
    }


def same_bytes(a: Path, b: Path) -> bool:
    x, y = a.read_bytes(), b.read_bytes()
    if a.suffix == ".pdf":
        x, y = PDF_DATES.sub(b"", x), PDF_DATES.sub(b"", y)
    return x == y


#: what a rerun of the same training changes: its wall-clock figures
TIMINGS = re.compile(r"seconds|per_second")


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in sorted(value.items()) if not TIMINGS.search(k)}
    return [_without_timings(v) for v in value] if isinstance(value, list) else value


def same_but_expected(a: Path, b: Path, renamed: dict[str, str], timings: bool) -> bool:
    """Whether two files differ only by the renamed columns and, with `timings`, the timings."""
    if a.suffix == ".parquet":
        left, right = pd.read_parquet(a).rename(columns=renamed), pd.read_parquet(b)
        if timings:
            left, right = (t.drop(columns=[c for c in t.columns if TIMINGS.search(c)]) for t in (left, right))
        return list(left.columns) == list(right.columns) and left.astype(str).equals(right.astype(str))
    if timings and a.suffix == ".json":
        return _without_timings(json.loads(a.read_text())) == _without_timings(json.loads(b.read_text()))
    if timings and a.name == "train_log.csv":
        left, right = pd.read_csv(a), pd.read_csv(b)
        keep = [c for c in left.columns if not TIMINGS.search(c)]
        return list(left.columns) == list(right.columns) and left[keep].equals(right[keep])
    return False


def parquet_difference(a: Path, b: Path) -> str:
    left, right = pd.read_parquet(a), pd.read_parquet(b)
    if list(left.columns) != list(right.columns):
        return f"columns {list(left.columns)} vs {list(right.columns)}"
    if left.shape != right.shape:
        return f"shape {left.shape} vs {right.shape}"
    columns = [c for c in left.columns if not left[c].astype(str).equals(right[c].astype(str))]
    return f"values differ in {columns}" if columns else "same values, other bytes (metadata)"


def compare(before: Path, after: Path, renamed: dict | None = None, timings: bool = False) -> tuple[list[str], int]:
    """The lines naming what differs, and how many files are identical (or differ only as expected:
    `same_but_expected`)."""
    left, right = compared_files(before), compared_files(after)
    lines, same = [], 0
    for rel in sorted(left | right):
        if rel not in left or rel not in right:
            lines.append(f"only in {'before' if rel in left else 'after'}: {rel}")
        elif same_bytes(before / rel, after / rel) or (
            (renamed or timings) and same_but_expected(before / rel, after / rel, renamed or {}, timings)
        ):
            same += 1
        else:
            how = f" ({parquet_difference(before / rel, after / rel)})" if rel.suffix == ".parquet" else ""
            lines.append(f"differs: {rel}{how}")
    return lines, same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW",
                        help="a Parquet column of BEFORE renamed in AFTER")  # fmt: skip
    parser.add_argument("--without-timings", action="store_true", help="leave the training records' timings out")
    args = parser.parse_args(argv)
    renamed = dict(item.split("=", 1) for item in args.renamed)
    lines, same = compare(args.before, args.after, renamed, args.without_timings)
    print("\n".join(lines + [f"{same} identical, {len(lines)} differ"]))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
