"""Two results/<run>/ folders compared, for a change that should move no number (a refactor):
tables (csv, md, tex), Parquet, PNG, JSON and TSV byte for byte, PDFs without their creation
and modification dates (matplotlib writes the time); logs/ and benchmarks/ are left out (times).
A Parquet file that differs is read to say how: its columns, its shape, or which columns' values.

    python bench/compare_results.py results_before/ci results_after/ci

Prints one line per file that differs or lies in one folder only, then the counts; exit 1 when
any differs."""

from __future__ import annotations

import argparse
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


def parquet_difference(a: Path, b: Path) -> str:
    left, right = pd.read_parquet(a), pd.read_parquet(b)
    if list(left.columns) != list(right.columns):
        return f"columns {list(left.columns)} vs {list(right.columns)}"
    if left.shape != right.shape:
        return f"shape {left.shape} vs {right.shape}"
    columns = [c for c in left.columns if not left[c].astype(str).equals(right[c].astype(str))]
    return f"values differ in {columns}" if columns else "same values, other bytes (metadata)"


def compare(before: Path, after: Path) -> tuple[list[str], int]:
    """The lines naming what differs, and how many files are identical."""
    left, right = compared_files(before), compared_files(after)
    lines, same = [], 0
    for rel in sorted(left | right):
        if rel not in left or rel not in right:
            lines.append(f"only in {'before' if rel in left else 'after'}: {rel}")
        elif same_bytes(before / rel, after / rel):
            same += 1
        else:
            how = f" ({parquet_difference(before / rel, after / rel)})" if rel.suffix == ".parquet" else ""
            lines.append(f"differs: {rel}{how}")
    return lines, same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    lines, same = compare(args.before, args.after)
    print("\n".join(lines + [f"{same} identical, {len(lines)} differ"]))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
