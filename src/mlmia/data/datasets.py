"""User sample files read into a manifest (the scored sample set of the workflow).

A dataset is a config section (its config path, e.g. ``datasets.mimic``, is `key` in the
error messages)::

    format: auto            # csv | tsv | parquet | jsonl; auto = by file extension
    header: true            # csv/tsv only: the first row names the columns
    columns: {text: text, group: patient_id, role: role, source: source, id: null}
      # each a column name or a 0-based integer position; role, source and id optional
    files:
      - {path: members_long.csv, role: member, source: mimic, length: long}
      - {path: all.jsonl}
    role_names: {train: member, heldout: nonmember}   # optional: the files' role labels -> ROLES
    group_ids: as_given     # or by_source: patients are `<source>:<group>`

- The section is taken as validation resolved it: every key with a schema default (format,
  header, rows, group_ids, shards) is given; one missing is a KeyError, a caller's mistake.
- Paths are relative to `root` (else the section's own ``root`` key, else the working
  directory); the section may also hold ``tokenizer`` and ``shards``, read by the caller
  and ignored here. ``auto`` recognises
  ``.csv``, ``.tsv``, ``.parquet``/``.pq`` and ``.jsonl``, also compressed (``.csv.gz`` ...).
- A file's `role`, `source` and `length` apply to all its rows and take precedence over the
  role and source columns; a file needs a role (its own or a role column) and a source (its
  own or a source column). `length` is ``short`` or ``long``: the paper's processed files
  come one per length bucket, and `assign_lengths` keeps the bucket a file gives.
- ``role_names`` maps labels (of the role column and of the files' roles) to
  ``member``, ``member_heldin``, ``nonmember`` or ``population``; labels that already are
  one of those need no entry.
- ``group_ids``: ``as_given`` (the default) keeps the group column's value as the patient, so a
  patient listed under two roles is refused whatever its sources; ``by_source`` makes the patient
  ``<source>:<group>`` (``mimic:110``, ``i2b2:110``), for sources that are disjoint populations
  whose ids may coincide (the paper's setup: MIMIC-III's SUBJECT_IDs and i2b2's record numbers
  both run through the low hundreds).
- ``sample_id`` is the id column when given, else ``"{file stem}:{i}"`` with ``i`` the
  0-based data row (the layout of imported score sets, so ``members.csv`` row 0 is
  ``members:0``). Error messages count data rows from 1 (the header is not a row).
- The paper's processed files (CSV with a header, column 0 the patient id, column 3 the
  text, one file per role and length) read with ``columns: {group: 0, text: 3}``.

`assign_lengths` then counts content tokens with the scoring tokenizer and fills the
length bucket (`mlmia.terms.manifest.length_bucket`) where a file did not give one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import as_text, describe_columns, read_jsonl
from mlmia.core.logs import get_logger
from mlmia.data.raw import split_sentences
from mlmia.models.tokenizer import content_tokens
from mlmia.terms.manifest import (
    LENGTHS,
    MANIFEST_COLUMNS,
    ROLES,
    check_roles_disjoint,
    length_bucket,
    patient_in_two_roles,
)

log = get_logger(__name__)

#: the columns `read_dataset` returns (the manifest without n_tokens)
DATASET_COLUMNS = [c for c in MANIFEST_COLUMNS if c != "n_tokens"]
FORMATS = ("csv", "tsv", "parquet", "jsonl")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl"}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip")
SPEC_KEYS = ("format", "header", "columns", "files", "role_names", "group_ids", "rows")
#: `group_ids`: a patient as the group column gives it, or namespaced by its source (`mimic:110`)
GROUP_IDS = ("as_given", "by_source")
#: what a row of the files is: one sample, or a whole note cut into sentence samples
ROWS = ("samples", "notes")
#: keys of a dataset's config section that its caller reads (accepted and ignored here,
#: except `root`, the default for the `root` argument)
CALLER_KEYS = ("root", "tokenizer", "shards")
COLUMN_KEYS = ("text", "group", "role", "source", "id")
FILE_KEYS = ("path", "role", "source", "length")
TOKENIZE_BATCH = 4096


# --------------------------------------------------------------------------------------------
# the spec


def _check_keys(mapping, known, where: str) -> None:
    if not isinstance(mapping, dict):
        raise UserError(f"{where}: must be a mapping, got {type(mapping).__name__}")
    unknown = [str(k) for k in mapping if k not in known]
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(known)})")


def _role_names(spec: dict) -> dict:
    """`role_names` with string keys (YAML may give numbers: `1: member`)."""
    return {str(label).strip(): role for label, role in (spec.get("role_names") or {}).items()}


def _check_spec(spec, key: str) -> None:
    _check_keys(spec, SPEC_KEYS + CALLER_KEYS, key)
    fmt = spec["format"]
    if fmt not in ("auto", *FORMATS):
        raise UserError(f"{key}.format: unknown format {fmt!r} (use one of auto, {', '.join(FORMATS)})")
    if spec["group_ids"] not in GROUP_IDS:
        raise UserError(f"{key}.group_ids: must be one of {', '.join(GROUP_IDS)}, got {spec['group_ids']!r}")
    rows = spec["rows"]
    if rows not in ROWS:
        raise UserError(f"{key}.rows: must be one of {', '.join(ROWS)}, got {rows!r}")
    if not isinstance(spec["header"], bool):
        raise UserError(f"{key}.header: must be true or false, got {spec['header']!r}")
    columns = spec.get("columns")
    if columns is None:
        raise UserError(f"{key}.columns: missing (needs at least text and group)")
    _check_keys(columns, COLUMN_KEYS, f"{key}.columns")
    for name in ("text", "group"):
        if columns.get(name) is None:
            raise UserError(f"{key}.columns.{name}: missing (a column name or a 0-based position)")
    for name, col in columns.items():
        if col is None:
            continue
        if isinstance(col, bool) or not isinstance(col, (int, str)) or (isinstance(col, int) and col < 0) or col == "":
            raise UserError(f"{key}.columns.{name}: must be a column name or a 0-based position, got {col!r}")
    role_names = spec.get("role_names") or {}
    if not isinstance(role_names, dict):
        raise UserError(f"{key}.role_names: must be a mapping from the files' labels to roles")
    role_names = _role_names(spec)
    for label, role in role_names.items():
        if role not in ROLES:
            raise UserError(f"{key}.role_names.{label}: unknown role {role!r} (known roles: {', '.join(ROLES)})")
    files = spec.get("files")
    if not isinstance(files, list) or not files:
        raise UserError(f"{key}.files: must be a non-empty list of {{path: ...}} entries")
    for i, entry in enumerate(files):
        where = f"{key}.files[{i}]"
        _check_keys(entry, FILE_KEYS, where)
        if not isinstance(entry.get("path"), str) or not entry["path"].strip():
            raise UserError(f"{where}.path: missing (the file to read)")
        for name in ("role", "source"):
            value = entry.get(name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise UserError(f"{where}.{name}: must be a non-empty string, got {value!r}")
        if entry.get("role") is not None and role_names.get(entry["role"].strip(), entry["role"].strip()) not in ROLES:
            raise UserError(
                f"{where}.role: unknown role {entry['role']!r} (known roles: {', '.join(ROLES)}"
                + (f"; role_names: {', '.join(map(str, role_names))})" if role_names else ")")
            )
        if entry.get("length") is not None and entry["length"] not in LENGTHS:
            raise UserError(f"{where}.length: must be one of {', '.join(LENGTHS)} or null, got {entry['length']!r}")
        if entry.get("length") is not None and rows == "notes":
            raise UserError(
                f"{where}.length: a file of whole notes ({key}.rows: notes) has sentences of every length: leave it "
                "out (the scoring tokenizer counts each sentence)"
            )


# --------------------------------------------------------------------------------------------
# reading one file


def _file_format(path: Path, fmt: str, key: str) -> str:
    if fmt != "auto":
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    if suffix not in EXTENSIONS:
        raise UserError(
            f"{path}: unknown format for extension {suffix or '(none)'!r} "
            f"(name it .csv, .tsv, .parquet or .jsonl, or set {key}.format to one of {', '.join(FORMATS)})"
        )
    return EXTENSIONS[suffix]


def _read_file(path: Path, fmt: str, header: bool) -> pd.DataFrame:
    try:
        if fmt in ("csv", "tsv"):
            try:
                return pd.read_csv(
                    path,
                    sep="," if fmt == "csv" else "\t",
                    header=0 if header else None,
                    dtype=str,
                    keep_default_na=False,
                    na_filter=False,
                )
            except pd.errors.EmptyDataError:
                return pd.DataFrame()
        if fmt == "parquet":
            return pd.read_parquet(path)
        return read_jsonl(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: cannot read as {fmt}: {first_line}") from exc


def _as_str(values) -> list[str]:
    """Each value as a stripped string; missing values (None, NaN, NA) as ''."""
    return as_text(pd.Series(list(values), dtype=object)).tolist()


def _column(df: pd.DataFrame, col, name: str, path: Path, key: str, header: bool) -> list[str]:
    """The values of the column `col` (a name or a 0-based position) of `df`."""
    if isinstance(col, int):
        if col >= len(df.columns):
            raise UserError(
                f"{path}: {key}.columns.{name} is position {col} but the file has {len(df.columns)} "
                f"column(s) (positions 0-{len(df.columns) - 1})"
            )
        return _as_str(df.iloc[:, col].tolist())
    if not header:
        raise UserError(
            f"{key}.columns.{name}: {col!r} is a column name but {key}.header is false (use a 0-based position)"
        )
    if col not in df.columns:
        raise UserError(
            f"{path}: no column {col!r} ({key}.columns.{name}); the file has: {describe_columns(df.columns)}"
        )
    return _as_str(df[col].tolist())


def _first_empty(values: list[str]) -> int | None:
    for i, v in enumerate(values):
        if not v:
            return i
    return None


def declared_sources(spec: dict, role: str, length: str | None) -> set[str] | None:
    """The sources whose samples of `role` (of bucket `length`; None: any) the dataset's files
    declare, read from the spec alone; None where a file takes its role or source from a
    column (then only reading the files would tell)."""
    names = _role_names(spec)
    out = set()
    for entry in spec.get("files") or []:
        if entry.get("role") is None or entry.get("source") is None:
            return None
        if names.get(entry["role"].strip(), entry["role"].strip()) != role:
            continue
        if length is None or entry.get("length") in (None, length):
            out.add(entry["source"].strip())
    return out


def dataset_paths(spec: dict, root: str | Path | None = None) -> list[Path]:
    """The files of a dataset spec: relative paths taken from `root`, else the spec's own
    ``root`` key, else the working directory."""
    root = spec.get("root") if root is None else root
    paths = [Path(entry["path"]) for entry in spec["files"]]
    return [p if root is None or p.is_absolute() else Path(root) / p for p in paths]


def count_rows(spec: dict, root: str | Path | None = None) -> int | None:
    """How many samples a dataset's files hold, or None while one of them does not exist yet
    (e.g. written by an importer later in the run). Cheap: Parquet metadata, JSONL lines,
    one column of a CSV/TSV."""
    total = 0
    for path in dataset_paths(spec, root):
        if not path.is_file():
            return None
        fmt = _file_format(path, spec["format"], "datasets")
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                total += pq.ParquetFile(path).metadata.num_rows
            elif fmt == "jsonl":
                with path.open(encoding="utf-8", errors="replace") as handle:
                    total += sum(1 for line in handle if line.strip())
            else:
                header = 0 if spec["header"] else None
                total += len(
                    pd.read_csv(path, sep="," if fmt == "csv" else "\t", header=header, usecols=[0], dtype=str)
                )
        except (ValueError, OSError, pd.errors.ParserError):
            return None  # unreadable: reading it for real says what is wrong
    return total


def _read_one(entry: dict, i: int, spec: dict, path: Path, key: str) -> tuple[Path, pd.DataFrame]:
    where = f"{key}.files[{i}]"
    if not path.is_file():
        raise UserError(f"{path}: file not found ({where}.path)")
    fmt = _file_format(path, spec["format"], key)
    header = bool(spec["header"]) if fmt in ("csv", "tsv") else True
    df = _read_file(path, fmt, header)
    columns = spec["columns"]
    role_names = _role_names(spec)
    n = len(df)

    if entry.get("role") is None and columns.get("role") is None:
        raise UserError(f"{where}: {path} has no role: give {where}.role or {key}.columns.role")
    if entry.get("source") is None and columns.get("source") is None:
        raise UserError(f"{where}: {path} has no source: give {where}.source or {key}.columns.source")

    if df.shape == (0, 0):  # an empty file: no columns to check
        return path, pd.DataFrame({c: pd.Series([], dtype=object) for c in DATASET_COLUMNS})
    text = _column(df, columns["text"], "text", path, key, header)
    group = _column(df, columns["group"], "group", path, key, header)
    if (row := _first_empty(text)) is not None:
        raise UserError(f"{path}: row {row + 1}: empty text")
    if (row := _first_empty(group)) is not None:
        raise UserError(f"{path}: row {row + 1}: empty group id ({key}.columns.group)")

    if entry.get("role") is not None:
        label = entry["role"].strip()
        roles = [role_names.get(label, label)] * n
    else:
        labels = _column(df, columns["role"], "role", path, key, header)
        roles = [role_names.get(label, label) for label in labels]
        for row, role in enumerate(roles):
            if role not in ROLES:
                known = f"known roles: {', '.join(ROLES)}"
                if role_names:
                    known += f"; {key}.role_names maps: {', '.join(map(str, role_names))}"
                # the label is not printed: a role column mapped to the wrong column holds text
                raise UserError(f"{path}: row {row + 1}: column {columns['role']!r}: unknown role label ({known})")

    if entry.get("source") is not None:
        sources = [entry["source"].strip()] * n
    else:
        sources = _column(df, columns["source"], "source", path, key, header)
        if (row := _first_empty(sources)) is not None:
            raise UserError(f"{path}: row {row + 1}: empty source ({key}.columns.source)")

    if columns.get("id") is not None:
        ids = _column(df, columns["id"], "id", path, key, header)
        if (row := _first_empty(ids)) is not None:
            raise UserError(f"{path}: row {row + 1}: empty sample id ({key}.columns.id)")
    else:
        stem = Path(path.stem).stem if path.suffix.lower() in COMPRESSION_SUFFIXES else path.stem
        ids = [f"{stem}:{row}" for row in range(n)]

    out = pd.DataFrame(
        {
            "sample_id": pd.Series(ids, dtype=object),
            "group_id": pd.Series(group, dtype=object),
            "text": pd.Series(text, dtype=object),
            "role": pd.Series(roles, dtype=object),
            "source": pd.Series(sources, dtype=object),
            "length": pd.Series([entry.get("length")] * n, dtype=object),
        }
    )
    return path, out


def notes_to_sentences(notes: pd.DataFrame, path: Path | str = "notes") -> pd.DataFrame:
    """Cut each row of `notes` (a whole note: the columns of `_read_one`'s output) into sentence
    samples with the library's splitter (`mlmia.data.raw.split_sentences`, the one the paper's raw
    importers use), each keeping its note's patient, role and source; sample id `<note id>#<i>`,
    i the sentence's 0-based place in the note. A note with no sentence of three word characters
    gives none; how many did is logged (by count: the notes' text is never printed)."""
    rows = []
    empty = 0
    for note in notes.itertuples(index=False):
        sentences = split_sentences(note.text)
        empty += not sentences
        rows += [
            (f"{note.sample_id}#{i}", note.group_id, s, note.role, note.source, None) for i, s in enumerate(sentences)
        ]
    log.info(
        "%s: %d notes cut into %d sentence samples (%d notes gave none of three word characters)",
        path, len(notes), len(rows), empty,
    )  # fmt: skip
    return pd.DataFrame(rows, columns=notes.columns, dtype=object)


# --------------------------------------------------------------------------------------------
# entry points


def read_dataset(spec: dict, root: str | Path | None = None, key: str = "datasets.<name>") -> pd.DataFrame:
    """Read the files of one dataset spec into a manifest (columns `DATASET_COLUMNS`).

    Relative paths are taken from `root`, else the spec's own ``root`` key, else the working
    directory. The spec may also hold the keys in `CALLER_KEYS` (read by the caller, ignored
    here). Every problem is a UserError of one line naming the config key, the file and the
    row. `length` is the file's length bucket or None (see `assign_lengths`).
    """
    _check_spec(spec, key)
    parts = []
    seen: dict[str, tuple[Path, int]] = {}
    for i, (entry, file_path) in enumerate(zip(spec["files"], dataset_paths(spec, root))):
        path, part = _read_one(entry, i, spec, file_path, key)
        for row, sample_id in enumerate(part["sample_id"]):
            if sample_id in seen:
                first_path, first_row = seen[sample_id]
                raise UserError(
                    f"{path}: row {row + 1}: sample id {shown_id(sample_id)} already used by {first_path} row {first_row + 1} "
                    f"(sample ids must be unique across the files of {key})"
                )
            seen[sample_id] = (path, row)
        if spec["rows"] == "notes":  # ids checked on the notes, whose rows the user sees
            part = notes_to_sentences(part, path)
        if part.empty:
            raise UserError(f"{path}: no rows ({key}.files[{i}]): give it samples or leave it out of the list")
        else:
            log.info("%s: %d rows (%s)", path, len(part), part.groupby(["role", "source"]).size().to_dict())
        parts.append(part)
    manifest = pd.concat(parts, ignore_index=True)
    if spec["group_ids"] == "by_source":
        manifest["group_id"] = manifest["source"].astype(str) + ":" + manifest["group_id"].astype(str)
    check_roles_disjoint(
        manifest, f"{key} ({', '.join(str(p) for p in dataset_paths(spec, root))})", _sources_hint(manifest, key)
    )
    return manifest[DATASET_COLUMNS]


def _sources_hint(manifest: pd.DataFrame, key: str) -> str:
    """What to set when the patient in two roles is listed under two sources: the same id in two
    disjoint populations (MIMIC-III's SUBJECT_ID 110 and i2b2's patient 110) is two patients."""
    found = patient_in_two_roles(manifest)
    if found is None:
        return ""
    sources = sorted(set(manifest.loc[manifest["group_id"].astype(str) == found[0], "source"].astype(str)))
    if len(sources) < 2:
        return ""
    return (
        f"; it is listed under sources {' and '.join(sources)}: if these are different populations, "
        f"set {key}.group_ids: by_source"
    )


def _bucket_function(buckets):
    """`length_bucket`, or one from a mapping {name: [lo, hi]} of inclusive token ranges."""
    if buckets is None:
        return length_bucket
    if not isinstance(buckets, dict) or not buckets:
        raise UserError(f"length buckets: must be a mapping {{name: [lo, hi]}}, got {buckets!r}")
    ranges = []
    for name, bounds in buckets.items():
        if (
            not isinstance(bounds, (list, tuple))
            or len(bounds) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            or bounds[0] > bounds[1]
        ):
            raise UserError(f"length buckets.{name}: must be [lo, hi] integers with lo <= hi, got {bounds!r}")
        ranges.append((str(name), int(bounds[0]), int(bounds[1])))
    ranges.sort(key=lambda r: r[1])
    for (a, _, a_hi), (b, b_lo, _) in zip(ranges, ranges[1:]):
        if b_lo <= a_hi:
            raise UserError(f"length buckets: {a} and {b} overlap")

    def bucket(n: int) -> str | None:
        for name, lo, hi in ranges:
            if lo <= int(n) <= hi:
                return name
        return None

    return bucket


def assign_lengths(manifest: pd.DataFrame, tokenizer, buckets: dict | None = None) -> pd.DataFrame:
    """Fill `n_tokens` (content word pieces, no [CLS]/[SEP]) and `length`.

    A row whose file gave a length keeps it (its n_tokens are still counted); the others get
    the bucket of their token count: `mlmia.terms.manifest.length_bucket` (short 10-19, long 20-60),
    or `buckets`, a mapping {name: [lo, hi]} of inclusive ranges. Rows in no bucket keep
    length None (logged): experiments over all lengths use them, short/long ones do not. Returns the manifest columns (`mlmia.terms.manifest.MANIFEST_COLUMNS`).
    """
    missing = [c for c in DATASET_COLUMNS if c != "length" and c not in manifest.columns]
    if missing:
        raise UserError(f"assign_lengths: manifest lacks column(s) {', '.join(missing)}")
    bucket = _bucket_function(buckets)
    out = manifest.copy().reset_index(drop=True)
    texts = out["text"].tolist()
    counts = [content_tokens(tokenizer, texts[i : i + TOKENIZE_BATCH]) for i in range(0, len(texts), TOKENIZE_BATCH)]
    out["n_tokens"] = np.concatenate(counts).astype("int64") if counts else np.zeros(0, dtype="int64")
    given = _as_str(out["length"].tolist()) if "length" in out.columns else [""] * len(out)
    computed = [bucket(n) for n in out["n_tokens"]]
    kept_given = sum(1 for g in given if g)
    disagree = sum(1 for g, c in zip(given, computed) if g and g != c)
    if kept_given:
        log.info(
            "kept the file's length bucket for %d samples (%d of them fall in another bucket, or none, by this tokenizer)",
            kept_given,
            disagree,
        )
    out["length"] = pd.Series([g if g else c for g, c in zip(given, computed)], dtype=object)
    outside = out["length"].isna()
    if outside.any():
        # kept: an experiment over every length (`length: null`, audit `lengths: [all]`) uses them
        log.info(
            "%d of %d samples fall in no length bucket: only experiments over all lengths use them",
            int(outside.sum()),
            len(out),
        )
    return out[MANIFEST_COLUMNS]


def check_requirements(manifest: pd.DataFrame, requirements: list[dict], key: str) -> None:
    """Every experiment finds the samples it needs (a role, from a source, of a length bucket)
    in the prepared sample table: refused here, before anything is scored."""
    for need in requirements:
        rows = manifest["role"] == need["role"]
        if need.get("source") is not None:
            rows &= manifest["source"] == need["source"]
        if need.get("length") is not None:
            rows &= manifest["length"] == need["length"]
        if not rows.any():
            source = f" from source {need['source']!r}" if need.get("source") is not None else ""
            length = f" of length {need['length']!r}" if need.get("length") is not None else ""
            raise UserError(
                f"{key}: experiment {need['experiment']!r} needs {need['role']} samples{source}{length}; "
                "the dataset has none"
            )
