"""Reading user tables and writing outputs atomically (no partial files on error)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pandas as pd

from mlmia.errors import UserError

TABLE_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv", ".jsonl", ".json")


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a Parquet, CSV/TSV or JSONL table; raise UserError with the path on failure."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix == ".csv":
            return pd.read_csv(path, keep_default_na=False, na_values=[""])
        if suffix == ".tsv":
            return pd.read_csv(path, sep="\t", keep_default_na=False, na_values=[""])
        if suffix in (".jsonl", ".json"):
            return pd.read_json(path, lines=suffix == ".jsonl")
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: cannot read table: {first_line}") from exc
    raise UserError(f"{path}: unknown table format {suffix!r} (use one of {', '.join(TABLE_SUFFIXES)})")


def require_columns(df: pd.DataFrame, columns, where: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})")


def read_samples(path: str | os.PathLike) -> pd.DataFrame:
    """Read a sample table: at least `sample_id` and `text`, sample ids unique and non-empty."""
    df = read_table(path)
    require_columns(df, ["sample_id", "text"], str(path))
    df = df.copy()
    if df["sample_id"].isna().any():
        row = int(df.index[df["sample_id"].isna()][0])
        raise UserError(f"{path}: row {row + 1}: empty sample_id")
    df["sample_id"] = df["sample_id"].astype(str)
    dup = df["sample_id"].duplicated(keep="first")
    if dup.any():
        row = int(dup.to_numpy().nonzero()[0][0])
        raise UserError(f"{path}: row {row + 1}: duplicate sample_id {df['sample_id'].iloc[row]!r}")
    if df["text"].isna().any():
        row = int(df["text"].isna().to_numpy().nonzero()[0][0])
        raise UserError(f"{path}: row {row + 1}: empty text for sample_id {df['sample_id'].iloc[row]!r}")
    df["text"] = df["text"].astype(str)
    return df


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; move it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
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
