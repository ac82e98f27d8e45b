"""Importers for raw clinical data, writing the paper's processed CSV format.

The processed format (the files the authors share on request): a CSV with a header row and
the columns ``patient_id, note_id, sentence, text`` (column 0 the patient id, column 3 the
text, `sentence` the 0-based sentence number within the note), one file per role. Read them
back with `mlmia.data.datasets.read_dataset` and ``columns: {group: 0, text: 3}``; the length
buckets come later, from the scoring tokenizer (`mlmia.data.datasets.assign_lengths`).

- `mimic_noteevents`: MIMIC-III ``NOTEEVENTS.csv`` split into sentences, each patient marked
  `trained` when one of Lehman et al.'s ``SUBJECT_ID_to_NOTES_1a.csv``/``1b.csv`` lists them
  (the patients the ClinicalBERT checkpoints of that paper were trained on).
- `i2b2_xml`: the i2b2 2014 de-identification XML files split into sentences.
- `sample_patients`: the paper's patient-level draw of members, non-members and population.
- `write_processed`: one processed CSV per role.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import atomic_path, describe_columns
from mlmia.core.logs import get_logger
from mlmia.terms.manifest import ROLES, TRAINED_ROLES

log = get_logger(__name__)

PROCESSED_COLUMNS = ["patient_id", "note_id", "sentence", "text"]
NOTEEVENTS_COLUMNS = ["ROW_ID", "SUBJECT_ID", "CATEGORY", "ISERROR", "TEXT"]
#: roles drawn among the patients a model was trained on (the others among the rest)
I2B2_NAME = re.compile(r"(\d+)-(\d+)\.xml", re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# sentence splitting

_DEID = re.compile(r"\[\*\*[^\n]*?\*\*\]")
_HEADER = re.compile(r"[ \t]*([A-Z][A-Za-z]*(?:[ \t/&-]+[A-Za-z]+){0,5})[ \t]*:(?=\s|$)")
_LIST_ITEM = re.compile(r"[ \t]*(?:\d{1,2}[.)]|[-*\u2022])[ \t]+")
_BOUNDARY = re.compile(r"([.!?])([\"')\]]*)\s+(?=[A-Z0-9\ue000])")
_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")
_TITLES = {"dr", "mr", "mrs", "ms", "prof", "st"}
MIN_WORD_CHARS = 3


def _split_block(block: str) -> list[str]:
    pieces, start = [], 0
    for m in _BOUNDARY.finditer(block):
        if m.group(1) == ".":
            token = block[: m.start()].rsplit(None, 1)[-1] if block[: m.start()].strip() else ""
            if token.lower() in _TITLES or re.fullmatch(r"[A-Z]", token):
                continue
        end = m.end(2)
        pieces.append(block[start:end])
        start = m.end()
    pieces.append(block[start:])
    return pieces


def split_sentences(text: str | None) -> list[str]:
    """Split a clinical note into sentences with deterministic rules.

    1. De-identification brackets (``[**2101-3-4**]``, ``[**Hospital1 18**]``; on one line) are
       opaque: nothing splits inside them, and one may start a sentence.
    2. A blank line (empty or whitespace only) ends a sentence.
    3. A section header at the start of a line ends the sentence before it and is a piece of
       its own: one to six words of letters (joined by spaces, ``/``, ``&`` or ``-``), the
       first capitalised, then a colon followed by whitespace or the end of the line
       (``HISTORY OF PRESENT ILLNESS:``, ``Discharge Medications:``, ``Sig:``). Text after
       the colon on the same line starts the next sentence.
    4. A list item at the start of a line (``1.``, ``2)``, ``-``, ``*``, a bullet, then a space)
       starts a new sentence; the marker itself is dropped.
    5. Other line breaks join lines with a space (notes wrap lines mid-sentence).
    6. Within the joined text a sentence ends after ``.``, ``!`` or ``?`` (and any closing
       quotes, parentheses or brackets) followed by whitespace and an upper-case letter, a
       digit or a de-identification bracket; not after the titles Dr., Mr., Mrs., Ms., Prof.,
       St. nor after a single capital letter (an initial, ``J. Smith``).
    7. Whitespace runs collapse to one space, pieces are stripped, and pieces with fewer than
       three word characters (``\\w``) are dropped.
    """
    if not text:
        return []
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    brackets: list[str] = []

    def protect(m: re.Match) -> str:
        brackets.append(m.group(0))
        return f"\ue000{len(brackets) - 1}\ue001"

    text = _DEID.sub(protect, text)
    blocks: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in text.split("\n"):
        if not line.strip():
            flush()
            continue
        if header := _HEADER.match(line):
            flush()
            blocks.append(header.group(1) + ":")
            rest = line[header.end() :]
            if rest.strip():
                current.append(rest)
            continue
        if item := _LIST_ITEM.match(line):
            flush()
            current.append(line[item.end() :])
            continue
        current.append(line)
    flush()

    out = []
    for block in blocks:
        for piece in _split_block(block):
            piece = _PLACEHOLDER.sub(lambda m: brackets[int(m.group(1))], piece)
            piece = " ".join(piece.split())
            if len(re.findall(r"\w", piece)) >= MIN_WORD_CHARS:
                out.append(piece)
    return out


def _sentence_rows(patient_id: str, note_id: str, text) -> list[tuple[str, str, int, str]]:
    return [(patient_id, note_id, i, s) for i, s in enumerate(split_sentences(text))]


# --------------------------------------------------------------------------------------------
# MIMIC-III


def _norm_id(value) -> str:
    text = "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value).strip()
    m = re.fullmatch(r"(\d+)\.0+", text)
    return m.group(1) if m else text


def read_patient_list(path: str | os.PathLike, chunksize: int = 100_000) -> set[str]:
    """The patient ids of a list such as Lehman et al.'s ``SUBJECT_ID_to_NOTES_1a.csv``.

    The ``SUBJECT_ID`` column when the header has one; else column 0 (a header row is
    assumed unless its first cell is a number). Read in chunks: those files hold whole notes.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: patient list not found")
    try:
        first = pd.read_csv(path, nrows=1, header=None, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: empty patient list") from None
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}") from exc
    cells = [str(c).strip() for c in first.iloc[0].tolist()] if len(first) else []
    if "SUBJECT_ID" in cells:
        header, usecols = 0, ["SUBJECT_ID"]
    elif cells and re.fullmatch(r"\d+(\.0+)?", cells[0]):
        header, usecols = None, [0]
    else:
        header, usecols = 0, [0]
    ids: set[str] = set()
    try:
        for chunk in pd.read_csv(
            path, header=header, usecols=usecols, dtype=str, keep_default_na=False, chunksize=chunksize
        ):
            ids.update(_norm_id(v) for v in chunk.iloc[:, 0].tolist())
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}") from exc
    ids.discard("")
    if not ids:
        raise UserError(f"{path}: no patient ids (expected a SUBJECT_ID column, or ids in column 0)")
    return ids


def mimic_noteevents(
    noteevents_csv: str | os.PathLike,
    member_lists: list[str | os.PathLike],
    categories: tuple[str, ...] | list[str] | None = ("Discharge summary",),
    chunksize: int = 20_000,
) -> pd.DataFrame:
    """MIMIC-III notes as sentences: columns patient_id, note_id, sentence, text, trained.

    `patient_id` is SUBJECT_ID, `note_id` ROW_ID, `sentence` the 0-based number of the
    sentence in its note (`split_sentences`), `trained` whether the patient is in one of
    `member_lists`. Rows with ISERROR = 1 are skipped; `categories` keeps only notes of
    those CATEGORY values (compared without case and surrounding spaces; None keeps all).
    The file is read `chunksize` rows at a time.
    """
    path = Path(noteevents_csv)
    if not path.is_file():
        raise UserError(f"{path}: NOTEEVENTS file not found")
    trained: set[str] = set()
    for member_list in member_lists:
        trained |= read_patient_list(member_list)
    wanted = None if categories is None else {str(c).strip().casefold() for c in categories}
    try:
        columns = list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: empty file (expected MIMIC-III NOTEEVENTS.csv)") from None
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}") from exc
    missing = [c for c in NOTEEVENTS_COLUMNS if c not in columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)} (has: {', '.join(columns)})")

    rows: list[tuple[str, str, int, str]] = []
    n_notes = n_error = n_kept = 0
    try:
        reader = pd.read_csv(path, usecols=NOTEEVENTS_COLUMNS, dtype=str, keep_default_na=False, chunksize=chunksize)
        for chunk in reader:
            n_notes += len(chunk)
            error = chunk["ISERROR"].str.strip().isin(["1", "1.0"])
            n_error += int(error.sum())
            keep = ~error
            if wanted is not None:
                keep &= chunk["CATEGORY"].str.strip().str.casefold().isin(wanted)
            chunk = chunk[keep]
            n_kept += len(chunk)
            for row_id, subject_id, note in zip(chunk["ROW_ID"], chunk["SUBJECT_ID"], chunk["TEXT"]):
                rows.extend(_sentence_rows(_norm_id(subject_id), _norm_id(row_id), note))
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}") from exc
    if not n_kept:
        which = "any category" if wanted is None else f"categories {', '.join(map(repr, categories))}"
        raise UserError(f"{path}: no notes of {which} (of {n_notes} rows, {n_error} marked ISERROR)")
    out = pd.DataFrame(rows, columns=PROCESSED_COLUMNS)
    out["sentence"] = out["sentence"].astype("int64")
    out["trained"] = out["patient_id"].isin(trained)
    patients = set(out["patient_id"])
    log.info(
        "%s: %d notes kept of %d (%d ISERROR), %d sentences, %d patients (%d trained); "
        "%d listed patients have no kept note",
        path,
        n_kept,
        n_notes,
        n_error,
        len(out),
        len(patients),
        len(patients & trained),
        len(trained - patients),
    )
    return out


# --------------------------------------------------------------------------------------------
# i2b2 2014


def xml_files(paths_or_dir) -> list[Path]:
    items = [paths_or_dir] if isinstance(paths_or_dir, (str, os.PathLike)) else list(paths_or_dir)
    files: list[Path] = []
    for item in items:
        item = Path(item)
        if item.is_dir():
            found = sorted(p for p in item.iterdir() if p.suffix.lower() == ".xml")
            if not found:
                raise UserError(f"{item}: no .xml files in this directory")
            files.extend(found)
        elif item.is_file():
            files.append(item)
        else:
            raise UserError(f"{item}: i2b2 XML file or directory not found")
    if not files:
        raise UserError("i2b2 import: no XML files given")
    return files


def i2b2_records(paths_or_dir):
    """The records of i2b2 2014 de-identification XML files, in file order: (path, patient_id,
    note_id, root element, note text) per file. A file named ``110-02.xml`` is record 02 of
    patient 110: patient_id ``110``, note_id ``110-02``; its note is the ``TEXT`` element (CDATA)
    of the ``deIdi2b2`` root. A badly named file, a record read twice, invalid XML or a missing
    TEXT element is one line naming the file."""
    seen: dict[str, Path] = {}
    for path in xml_files(paths_or_dir):
        m = I2B2_NAME.fullmatch(path.name)
        if not m:
            raise UserError(f"{path}: expected a name PATIENT-RECORD.xml like 110-02.xml")
        note_id = f"{m.group(1)}-{m.group(2)}"
        if note_id in seen:
            raise UserError(f"{path}: record {note_id} also read from {seen[note_id]}")
        seen[note_id] = path
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as exc:
            raise UserError(f"{path}: not valid XML: {exc}") from exc
        element = root.find("TEXT")
        if element is None or element.text is None:
            raise UserError(f"{path}: no TEXT element (expected <deIdi2b2><TEXT>...</TEXT></deIdi2b2>)")
        yield path, m.group(1), note_id, root, element.text


def i2b2_xml(paths_or_dir) -> pd.DataFrame:
    """i2b2 2014 de-identification XML files (`i2b2_records`: a directory of ``*.xml``, one
    file, or a list of files and directories) as sentences: patient_id, note_id, sentence, text."""
    rows: list[tuple[str, str, int, str]] = []
    records = 0
    for _, patient, note_id, _, text in i2b2_records(paths_or_dir):
        rows.extend(_sentence_rows(patient, note_id, text))
        records += 1
    out = pd.DataFrame(rows, columns=PROCESSED_COLUMNS)
    out["sentence"] = out["sentence"].astype("int64")
    log.info("i2b2: %d records, %d sentences, %d patients", records, len(out), out["patient_id"].nunique())
    return out


# --------------------------------------------------------------------------------------------
# sampling and writing


def sample_patients(sentences: pd.DataFrame, counts: dict[str, int], seed: int, key: str) -> pd.DataFrame:
    """The sentences of `counts[role]` patients per role, drawn disjointly, with a `role` column.

    With a `trained` column, member and member_heldin patients are drawn among the trained
    patients and nonmember and population patients among the others; without one, the
    non-member roles are drawn among all patients (and member roles are an error). Patient ids
    are sorted, then one seeded permutation per pool is cut into the roles in the order of
    `mlmia.terms.manifest.ROLES`. Rows keep their input order. `key` is the config key of `counts`.
    """
    missing = [c for c in ("patient_id", "text") if c not in sentences.columns]
    if missing:
        raise UserError(f"{key}: the sentence table lacks column(s) {', '.join(missing)}")
    if not isinstance(counts, dict) or not counts:
        raise UserError(f"{key}: must be a mapping {{role: number of patients}}")
    for role, n in counts.items():
        if role not in ROLES:
            raise UserError(f"{key}.{role}: unknown role (known roles: {', '.join(ROLES)})")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise UserError(f"{key}.{role}: must be a non-negative integer, got {n!r}")
    has_trained = "trained" in sentences.columns
    patient_ids = sentences["patient_id"].astype(str)
    if has_trained:
        trained_ids = set(patient_ids[sentences["trained"].astype(bool)])
        pools = {
            "trained": sorted(trained_ids),
            "other": sorted(set(patient_ids) - trained_ids),
        }
    else:
        asked = [r for r in TRAINED_ROLES if counts.get(r)]
        if asked:
            raise UserError(
                f"{key}.{asked[0]}: members need a `trained` column in the sentence table (MIMIC with member lists)"
            )
        pools = {"other": sorted(set(patient_ids))}
    rng = np.random.default_rng(seed)
    drawn: dict[str, str] = {}
    for pool_name, pool in pools.items():
        roles = [r for r in ROLES if r in counts and (r in TRAINED_ROLES) == (pool_name == "trained")]
        asked = sum(int(counts[r]) for r in roles)
        if asked > len(pool):
            parts = " + ".join(f"{r} {int(counts[r])}" for r in roles)
            kind = {"trained": "trained ", "other": "untrained " if has_trained else ""}[pool_name]
            raise UserError(f"{key}: {asked} {kind}patients asked for ({parts}), there are {len(pool)}")
        order = rng.permutation(len(pool))
        start = 0
        for role in roles:
            for i in order[start : start + int(counts[role])]:
                drawn[pool[i]] = role
            start += int(counts[role])
    out = sentences[patient_ids.isin(drawn)].copy()
    out["role"] = patient_ids[patient_ids.isin(drawn)].map(drawn).to_numpy()
    log.info(
        "%s: %d sentences of %d patients (%s)",
        key,
        len(out),
        len(drawn),
        out.groupby("role")["patient_id"].nunique().to_dict(),
    )
    return out.reset_index(drop=True)


def write_processed(df: pd.DataFrame, directory: str | os.PathLike, prefix: str) -> list[Path]:
    """One processed CSV per role, ``{directory}/{prefix}_{role}.csv``, written atomically.

    Columns patient_id, note_id, sentence, text with a header row; roles in the order of
    `mlmia.terms.manifest.ROLES`. Returns the paths written.
    """
    missing = [c for c in [*PROCESSED_COLUMNS, "role"] if c not in df.columns]
    if missing:
        raise UserError(
            f"write_processed {prefix}: missing column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})"
        )
    unknown = sorted(set(df["role"].astype(str)) - set(ROLES))
    if unknown:
        raise UserError(
            f"write_processed {prefix}: unknown role(s) {', '.join(unknown)} (known roles: {', '.join(ROLES)})"
        )
    if df.empty:
        raise UserError(f"write_processed {prefix}: no rows to write")
    paths = []
    for role in ROLES:
        part = df.loc[df["role"] == role, PROCESSED_COLUMNS]
        if part.empty:
            continue
        path = Path(directory) / f"{prefix}_{role}.csv"
        with atomic_path(path) as tmp:
            part.to_csv(tmp, index=False)
        paths.append(path)
    return paths


#: the names files `read_names` reads: (id column, name columns joined by a space), compared
#: without case. Lehman et al.'s surrogate names for Base-b come as first and last name.
NAMES_LAYOUTS = (("SUBJECT_ID", ("name",)), ("SUBJECT_ID", ("FIRST_NAME", "LAST_NAME")))


def read_names(path: str | os.PathLike) -> dict[str, str]:
    """MIMIC-III SUBJECT_ID -> surrogate name (Base-b's name insertion), from a CSV with a header
    row in one of `NAMES_LAYOUTS`: ``SUBJECT_ID,name``, or Lehman et al.'s
    ``SUBJECT_ID,FIRST_NAME,LAST_NAME`` (the full name: first, a space, last, as Base-b was
    trained on it). Header names are compared without case; other columns are refused, as a
    layout that fits neither (naming its columns), an empty name part (naming the row and the
    patient id) and a patient given twice. Keys are the SUBJECT_IDs as NOTEEVENTS.csv writes them
    (`mimic_noteevents`' patient_id): the names are inserted before any dataset namespaces ids."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: names file not found")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: empty names file") from None
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}") from exc
    header = [str(c).strip() for c in table.columns]
    by_name = {c.casefold(): c for c in table.columns}
    for id_column, name_columns in NAMES_LAYOUTS:
        wanted = [id_column, *name_columns]
        if sorted(c.casefold() for c in wanted) == sorted(c.casefold() for c in header):
            break
    else:
        layouts = " or ".join(",".join([i, *n]) for i, n in NAMES_LAYOUTS)
        raise UserError(
            f"{path}: expected the columns {layouts} (Lehman et al.'s layout); "
            f"the file has: {describe_columns(table.columns)}"
        )
    out: dict[str, str] = {}
    ids = table[by_name[id_column.casefold()]]
    parts = [table[by_name[c.casefold()]] for c in name_columns]
    for row, (pid, *names) in enumerate(zip(ids, *parts), start=1):
        patient = _norm_id(pid)
        if not patient:
            raise UserError(f"{path}: row {row}: empty {id_column}")
        for column, name in zip(name_columns, names):
            if not str(name).strip():
                raise UserError(f"{path}: row {row}: empty {column} for patient {shown_id(patient, 'group_id')}")
        if patient in out:
            raise UserError(f"{path}: row {row}: patient {shown_id(patient, 'group_id')} given twice")
        out[patient] = " ".join(" ".join(str(n).split()) for n in names)
    if not out:
        raise UserError(f"{path}: no names (a header row and no patients)")
    return out


def insert_names(df: pd.DataFrame, names: dict[str, str], key: str) -> pd.DataFrame:
    """The trained patients' sentences with the patient's name prepended, as Base-b was
    trained on them (the paper's name insertion). Other roles are left out."""
    trained = df[df["role"].isin(TRAINED_ROLES)].copy()
    missing = sorted(set(trained["patient_id"].astype(str)) - set(names))
    if missing:
        raise UserError(
            f"{key}: no name for patient {shown_id(missing[0], 'group_id')} ({len(missing)} trained patients without one)"
        )
    trained["text"] = trained["patient_id"].astype(str).map(names) + " " + trained["text"].astype(str)
    return trained
