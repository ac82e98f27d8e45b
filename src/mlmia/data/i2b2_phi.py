"""The i2b2 2014 de-identification XML as PHI-labelled sentences: the paper setup of d-exposure
(the tagger's training data when `dexposure.i2b2_xml` names the files; `mlmia.world.phi.load_notes`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.data.raw import i2b2_records

log = get_logger(__name__)

#: i2b2 2014 PHI (element, TYPE) -> class; an element with TYPE None maps every type; the rest
#: (AGE, CONTACT, ID, PROFESSION) stays O
I2B2_CLASSES: dict[tuple[str, str | None], str] = {
    ("NAME", None): "PERSON",
    ("LOCATION", "HOSPITAL"): "ORGANIZATION",
    ("LOCATION", "ORGANIZATION"): "ORGANIZATION",
    ("LOCATION", None): "LOCATION",
    ("DATE", None): "DATE",
}


def _i2b2_class(element: str, phi_type: str | None, mapping: Mapping) -> str | None:
    return mapping.get((element, phi_type), mapping.get((element, None)))


_TITLE_WORDS = {"dr.", "mr.", "mrs.", "ms.", "prof.", "st."}


def i2b2_labelled_sentences(paths_or_dir, mapping: Mapping[tuple[str, str | None], str] = I2B2_CLASSES) -> pd.DataFrame:
    """i2b2 2014 de-identification XML as labelled sentences: sentence_id, group_id, note_id,
    register ("i2b2"), words, tags (no split column; `split_patients` adds it).

    The note is the TEXT element of each ``PATIENT-RECORD.xml`` (as `mlmia.data.raw.i2b2_xml`
    reads it); the gold labels are its TAGS: each PHI element's ``start``/``end`` character
    offsets in the note and its class by `mapping` (element name and TYPE; `I2B2_CLASSES`:
    NAME -> PERSON, LOCATION HOSPITAL/ORGANIZATION -> ORGANIZATION, other LOCATION types
    (CITY, STATE, STREET, ZIP, COUNTRY, LOCATION-OTHER) -> LOCATION, DATE -> DATE; AGE,
    CONTACT, ID, PROFESSION -> O). Words are the note's whitespace-separated strings, also cut
    at every PHI boundary (so "Smith's" with the PHI "Smith" gives "Smith" and "'s"); a word
    inside a PHI span gets B- (the span's first word) or I-. Sentences end at line breaks and
    after a word ending in ``.``, ``!`` or ``?`` that is followed by a capitalised word or a
    digit on the same line (not after Dr., Mr., Mrs., Ms., Prof., St., nor inside a PHI span).
    A tag whose ``text`` attribute differs from the note at its offsets is an error naming the
    file and the tag id (never the text).
    """
    rows = []
    for path, patient, note_id, root, text in i2b2_records(paths_or_dir):
        spans = []
        for tag in root.find("TAGS") if root.find("TAGS") is not None else []:
            cls = _i2b2_class(tag.tag, tag.get("TYPE"), mapping)
            if cls is None:
                continue
            try:
                start, end = int(tag.get("start")), int(tag.get("end"))
            except (TypeError, ValueError):
                raise UserError(f"{path}: tag {tag.get('id', '?')}: start/end are not integers") from None
            if not 0 <= start < end <= len(text):
                raise UserError(f"{path}: tag {tag.get('id', '?')}: offsets outside the note")
            if tag.get("text") is not None and text[start:end] != tag.get("text"):
                raise UserError(f"{path}: tag {tag.get('id', '?')}: its text differs from the note at its offsets")
            spans.append((start, end, cls))
        for j, (words, tags) in enumerate(_label_text(text, spans)):
            rows.append(
                {
                    "sentence_id": f"{note_id}-{j:04d}",
                    "group_id": patient,
                    "note_id": note_id,
                    "register": "i2b2",
                    "words": words,
                    "tags": tags,
                }
            )
    out = pd.DataFrame(rows, columns=["sentence_id", "group_id", "note_id", "register", "words", "tags"])
    log.info("i2b2 PHI: %d sentences of %d patients", len(out), out["group_id"].nunique())
    return out


def _label_text(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[list[str], list[str]]]:
    """Whitespace words cut at PHI boundaries, their BIO tags, grouped into sentences."""
    spans = sorted(spans)
    owner = np.full(len(text), -1, dtype=np.int64)
    for k, (start, end, _) in enumerate(spans):  # the first span wins where spans overlap
        free = owner[start:end] == -1
        owner[start:end][free] = k
    tokens = []  # (start, end, span or -1)
    for m in re.finditer(r"\S+", text):
        start = m.start()
        for pos in range(m.start() + 1, m.end() + 1):
            if pos == m.end() or owner[pos] != owner[pos - 1]:
                tokens.append((start, pos, int(owner[start])))
                start = pos
    sentences: list[tuple[list[str], list[str]]] = []
    words: list[str] = []
    tags: list[str] = []
    previous_span = -1
    for i, (start, end, span) in enumerate(tokens):
        if words and "\n" in text[tokens[i - 1][1] : start]:
            sentences.append((words, tags))
            words, tags, previous_span = [], [], -1
        word = text[start:end]
        if span < 0:
            tags.append("O")
        else:
            tags.append(("I-" if span == previous_span else "B-") + spans[span][2])
        words.append(word)
        previous_span = span
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if (
            nxt is not None
            and span < 0
            and word[-1] in ".!?"
            and word.lower() not in _TITLE_WORDS
            and "\n" not in text[end : nxt[0]]
            and (text[nxt[0]].isupper() or text[nxt[0]].isdigit())
        ):
            sentences.append((words, tags))
            words, tags, previous_span = [], [], -1
    if words:
        sentences.append((words, tags))
    return sentences
