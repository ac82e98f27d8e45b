"""Reading user tables and writing outputs atomically (no partial files on error).

Cells are read as the text they are: CSV/TSV and JSONL values are never type-guessed (an id
`007` stays "007", `1e3` stays "1e3"), so ids compare as text; numeric columns are converted
where they are used, with an error naming the file, row and column. Messages name files,
rows, columns and ids, never a cell's text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, first_line, shown_id

TABLE_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv", ".jsonl")


def read_jsonl(path: str | os.PathLike) -> pd.DataFrame:
    """A JSON Lines file as a table of strings: numbers keep their literal text."""
    path = Path(path)
    records = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line, parse_int=str, parse_float=str, parse_constant=str)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}: line {number}: not valid JSON ({exc.msg}, column {exc.colno})") from None
                if not isinstance(record, dict):
                    raise UserError(f"{path}: line {number}: not a JSON object (one object per line)")
                records.append({key: "" if value is None else value for key, value in record.items()})
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return pd.DataFrame.from_records(records).astype(object) if records else pd.DataFrame()


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a Parquet, CSV/TSV or JSONL table; text tables as strings (no type guessing).
    A UserError names the path on failure."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a table")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".tsv"):
            try:
                return pd.read_csv(path, sep="," if suffix == ".csv" else "\t", dtype=str, keep_default_na=False)
            except pd.errors.EmptyDataError:
                return pd.DataFrame()
        if suffix == ".jsonl":
            return read_jsonl(path)
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read table: {first_line(exc)}") from None
    raise UserError(f"{path}: unknown table format {suffix!r} (use one of {', '.join(TABLE_SUFFIXES)})")


_HEADER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_ .()-]{0,39}$")


def describe_columns(columns) -> str:
    """A table's column names for a message, unless they do not look like a header row (a
    file read with a header it does not have would otherwise print its first row's text)."""
    names = [str(c) for c in columns]
    if names and len(names) <= 30 and all(_HEADER_NAME.match(n) for n in names):
        return ", ".join(names)
    return f"{len(names)} column(s), names not shown: they do not look like a header row"


def require_columns(df: pd.DataFrame, columns, where: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)} (has: {describe_columns(df.columns)})")


def as_text(values: pd.Series) -> pd.Series:
    """Values as stripped strings, missing ones (None, NaN, NA) as ''."""
    return pd.Series(["" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
                      for v in values], index=values.index, dtype=object)  # fmt: skip


def numbers(values: pd.Series, where: str, column: str) -> np.ndarray:
    """A column as finite floats; the first cell that is not one is named by row (its
    content is not printed)."""
    converted = pd.to_numeric(pd.Series(values).replace("", np.nan), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(converted)
    if bad.any():
        row = int(bad.nonzero()[0][0])
        raise UserError(f"{where}: row {row + 1}: {column} is not a finite number")
    return converted


def read_samples(path: str | os.PathLike) -> pd.DataFrame:
    """Read a sample table: at least `sample_id` and `text`, sample ids unique and non-empty,
    every text non-empty, at least one row."""
    df = read_table(path)
    require_columns(df, ["sample_id", "text"], str(path))
    if df.empty:
        raise UserError(f"{path}: no samples (the table has no rows)")
    df = df.copy()
    df["sample_id"] = as_text(df["sample_id"])
    empty = df["sample_id"] == ""
    if empty.any():
        raise UserError(f"{path}: row {int(empty.to_numpy().nonzero()[0][0]) + 1}: empty sample_id")
    dup = df["sample_id"].duplicated(keep="first")
    if dup.any():
        row = int(dup.to_numpy().nonzero()[0][0])
        raise UserError(f"{path}: row {row + 1}: duplicate sample_id {shown_id(df['sample_id'].iloc[row])}")
    blank = df["text"].isna() | (as_text(df["text"]) == "")
    if blank.any():
        row = int(blank.to_numpy().nonzero()[0][0])
        raise UserError(f"{path}: row {row + 1}: empty text for sample_id {shown_id(df['sample_id'].iloc[row])}")
    df["text"] = df["text"].astype(str)
    return df


def check_output_path(out: str | os.PathLike, inputs: list, what: str = "--out") -> Path:
    """Refuse, before any work, an output that is a directory, one of the inputs, or in a
    directory that cannot be written."""
    out = Path(out).expanduser()
    if out.is_dir():
        raise UserError(f"{what} {out}: is a directory (give a file name)")
    for given in inputs:
        if given is None:
            continue
        source = Path(given).expanduser()
        same = out.exists() and source.exists() and os.path.samefile(out, source)
        if same or out.resolve() == source.resolve():
            raise UserError(f"{what} {out}: is an input ({source}); write the output to another file")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{what} {out}: {parent} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise UserError(f"{what} {out}: cannot write in {parent} ({exc.strerror})") from None
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; move it into place only if the block succeeds.
    The file gets the permissions of a file the user would create (the umask applied), not
    the temporary file's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a Parquet table atomically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)
