"""PHI-labelled note sentences: the training data of a de-identification tagger, for d-exposure.

Helali, Kleinbauer and Klakow, "Assessing Unintended Memorization in Neural Discriminative
Sequence Models", TSD 2020, measure what a tagger memorised through AMBIGUOUS words: words
labelled under two or more classes in the training data (their examples: "Williams",
"Chelsea", "Melbourne"). This module writes such data for the embedded world; `load_notes`
reads the i2b2 2014 de-identification XML into the same shape instead (the paper setup of this
workflow, `mlmia.data.i2b2_phi`).

The generated notes (`generate_notes`), deterministic in (seed, sizes):

- sentences in the world's two note registers (`mlmia.world.registers.mimic`, `.i2b2`): MIMIC
  habits (ISO dates, ``Followup Instructions:``, ``Social History:``) and i2b2 habits
  (upper-case headers, US dates), one register per patient (`i2b2_share` of the patients write
  i2b2). A share `phi_share` of a patient's sentences come from the register's PHI templates
  (`phi_sentence`, entities from `mlmia.world.phi_entities`); the rest are the register's
  templates not flagged PHI-bearing (problems, medications, vitals, exam lines, hospital
  course), all words labelled O;
- gold labels known by construction: BIO tags over whitespace words for PERSON (patients,
  relatives and physicians: faker's frequency-weighted US first names and surnames, the
  world's lexicon), LOCATION (cities: the US places of faker's geo provider and towns built
  the faker way, surname + a faker city suffix; states: faker's en_US list; streets: a
  number, a name and a faker street suffix), ORGANIZATION (hospitals: a place name + "General
  Hospital", "Medical Center", ...; notes also name a hospital by its place word alone,
  "transferred from Searcy") and DATE (ISO, US and month-name dates). Entity words are
  separated from punctuation by a space; the world's PHI-free sentences keep their
  punctuation as written;
- AMBIGUOUS entities, with balanced frequency: `ambiguous` words that are both faker surnames
  and US place names ("Jackson", "Tyler", "Kent", ... the natural overlap of the two lists;
  beyond it, further surnames used as town names) are kept out of every natural draw and
  then put, in the TRAINING split, into exactly `occurrences` PERSON slots (a surname),
  `occurrences` LOCATION slots (a one-word city) and `occurrences` ORGANIZATION slots (a
  hospital's place word) each. The lists also overlap by themselves, unbalanced ("Virginia"
  and "Georgia" are first names and states, "Washington" a surname and a state): Table 1
  counts every word found under more than one class;
- the ambiguous TEMPLATE of the d-exposure phrase (`phrase`, e.g. "The patient often talks
  about {slot} .") is a template of the data too: its slot holds a surname, a one-word city
  or a hospital's place word (never an ambiguous word), so the context alone cannot tell
  the class;
- patients are split into `train` and `valid` (`valid_share` of them, seeded).

Word identity (`word_key`): words are compared after BERT-uncased normalisation (lower case,
accents stripped), as the uncased WordPiece tagger sees them. The statistics of Helali et
al. are counted on the training split: `word_tag_counts` (occurrences of each word under
each tag), `class_statistics` (their Table 1), `entity_occurrences` (their Table 2),
`candidate_words` (the set C_i) and `choose_entities` (the inserted word of each class).

Nothing here logs or prints a sentence or an entity word; messages carry counts and classes.
"""

from __future__ import annotations

import functools
import os
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.data.i2b2_phi import i2b2_labelled_sentences
from mlmia.models.tokenizer import bert_normalizer
from mlmia.world.lexicon import lexicon
from mlmia.world.patients import pick
from mlmia.world.phi_entities import PHI_CLASSES, SLOT_CLASSES, SUBSTITUTABLE, assemble, make_phi_patient, phi_world
from mlmia.world.registers import i2b2, mimic

log = get_logger(__name__)

NOTE_COLUMNS = ["sentence_id", "group_id", "register", "split", "words", "tags"]
SLOT = "{slot}"

#: the generated notes' settings: keys of the config's `dexposure:` (`phi_settings`)
NOTE_SETTINGS = (
    "seed",
    "patients",
    "sentences_per_patient",
    "i2b2_share",
    "phi_share",
    "hospitals",
    "ambiguous",
    "occurrences",
    "valid_share",
    "phrase",
)
#: the PHI templates of each note register
PHI_TEMPLATES = {"mimic": mimic.phi_sentence, "i2b2": i2b2.phi_sentence}


def tag_names(classes: Sequence[str] = PHI_CLASSES) -> list[str]:
    """The tag set: "O", then "B-<class>", "I-<class>" for each class in order."""
    return ["O"] + [f"{prefix}-{cls}" for cls in classes for prefix in ("B", "I")]


@functools.lru_cache(maxsize=1)
def _normalizer():
    return bert_normalizer()


@functools.lru_cache(maxsize=200_000)
def word_key(word: str) -> str:
    """A word as the uncased tagger sees it (BERT normalisation: lower case, accents stripped)."""
    return _normalizer().normalize_str(str(word))


def phrase_slot(phrase: str) -> tuple[list[str], int]:
    """The phrase's whitespace words and the index of its one slot word ("{slot}")."""
    words = str(phrase).split()
    slots = [i for i, w in enumerate(words) if w == SLOT]
    if len(slots) != 1 or str(phrase).count(SLOT) != 1:
        raise UserError(f"dexposure.phrase: needs exactly one {SLOT} as a word of its own (spaces around it)")
    return words, slots[0]


# --------------------------------------------------------------------------------------------
# the generator


def phi_settings(config: Mapping) -> dict:
    """The generator's settings (`NOTE_SETTINGS`) from the `dexposure:` config as validation
    resolved it (a key missing is a KeyError), checked."""
    out = {key: config[key] for key in NOTE_SETTINGS}
    for key in ("seed", "patients", "sentences_per_patient", "hospitals", "ambiguous", "occurrences"):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise UserError(f"dexposure.{key}: must be a non-negative integer, got {value!r}")
    for key in ("i2b2_share", "phi_share", "valid_share"):
        if not 0 <= float(out[key]) <= 1:
            raise UserError(f"dexposure.{key}: must lie between 0 and 1, got {out[key]!r}")
    if out["patients"] < 2 or out["sentences_per_patient"] < 1:
        raise UserError("dexposure: needs at least 2 patients and 1 sentence per patient")
    if out["hospitals"] < 2:
        raise UserError("dexposure.hospitals: needs at least 2 hospitals")
    phrase_slot(out["phrase"])
    return out


def generate_notes(config: Mapping) -> pd.DataFrame:
    """PHI-labelled note sentences with gold BIO tags, deterministic in (seed, sizes).

    Returns a table with columns sentence_id, group_id (the patient), register (mimic|i2b2),
    split (train|valid), words (list of whitespace words), tags (list of BIO tags, one per
    word). See the module docstring for what is generated; settings: `phi_settings`."""
    cfg = phi_settings(config)
    seed = int(cfg["seed"])
    lex = lexicon()
    world = phi_world(seed, int(cfg["hospitals"]), int(cfg["ambiguous"]))
    phrase = phrase_slot(cfg["phrase"])
    free = {"mimic": mimic.REGISTER.phi_free(), "i2b2": i2b2.REGISTER.phi_free()}
    rng = random.Random(f"phi-notes:{seed}")
    n_sent = int(cfg["sentences_per_patient"])
    rows: list[dict] = []
    slots: list[tuple[int, int, str, str]] = []
    for i in range(int(cfg["patients"])):
        pid = f"phi-{i:05d}"
        register = "i2b2" if rng.random() < float(cfg["i2b2_share"]) else "mimic"
        p = make_phi_patient(rng, world, lex, pid, register)
        spread = n_sent // 3
        for j in range(max(1, rng.randint(n_sent - spread, n_sent + spread))):
            if rng.random() < float(cfg["phi_share"]):
                words, tags, found = assemble(PHI_TEMPLATES[register](rng, p, world, phrase))
            else:
                template = pick(rng, free[register], [t.weight for t in free[register]])
                words, tags, found = assemble([template.render(rng, p.facts)])
            slots.extend((len(rows), k, cls, role) for k, cls, role in found)
            rows.append(
                {"sentence_id": f"{pid}-{j:03d}", "group_id": pid, "register": register, "words": words, "tags": tags}
            )
    notes = split_patients(pd.DataFrame(rows), cfg["valid_share"], seed)
    _place_ambiguous(notes, slots, world.ambiguous, int(cfg["occurrences"]), seed)
    log.info(
        "PHI notes: %d sentences of %d patients (%d train, %d valid), %d ambiguous entities x %d occurrences per class",
        len(notes),
        notes["group_id"].nunique(),
        int((notes["split"] == "train").sum()),
        int((notes["split"] == "valid").sum()),
        len(world.ambiguous),
        int(cfg["occurrences"]),
    )
    return notes[NOTE_COLUMNS]


def _place_ambiguous(notes: pd.DataFrame, slots: list, ambiguous: Sequence[str], occurrences: int, seed: int) -> None:
    """Put each ambiguous word into exactly `occurrences` training slots of each slot class
    (a surname, a one-word city, a hospital's place word), chosen at random (seeded)."""
    if not ambiguous or not occurrences:
        return
    train = set(np.flatnonzero(notes["split"].to_numpy() == "train"))
    rng = random.Random(f"phi-ambiguous:{seed}")
    for cls in SLOT_CLASSES:
        role = SUBSTITUTABLE[cls]
        eligible = [(r, k) for r, k, c, rl in slots if c == cls and rl == role and r in train]
        needed = len(ambiguous) * occurrences
        if len(eligible) < needed:
            raise UserError(
                f"dexposure: {len(ambiguous)} ambiguous entities x {occurrences} occurrences need {needed} "
                f"{cls} slots in the training notes, there are {len(eligible)} (raise dexposure.patients or "
                f"lower dexposure.occurrences)"
            )
        rng.shuffle(eligible)
        for j, (r, k) in enumerate(eligible[:needed]):
            notes.at[r, "words"][k] = ambiguous[j % len(ambiguous)]


# --------------------------------------------------------------------------------------------
# the statistics of Helali et al. (on the training split)


def check_notes(notes: pd.DataFrame, where: str = "notes") -> pd.DataFrame:
    """The notes table's columns, one tag per word, valid tags (BIO prefixes), both splits."""
    missing = [c for c in NOTE_COLUMNS if c not in notes.columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    for row, (words, tags) in enumerate(zip(notes["words"], notes["tags"]), start=1):
        if len(words) != len(tags) or not len(words):
            raise UserError(f"{where}: row {row}: {len(words)} words and {len(tags)} tags")
        for tag in tags:
            if tag != "O" and not re.fullmatch(r"[BI]-[A-Z_]+", str(tag)):
                raise UserError(f"{where}: row {row}: tag {tag!r} is not O, B-<class> or I-<class>")
    splits = set(notes["split"])
    if not {"train", "valid"} <= splits or splits - {"train", "valid"}:
        raise UserError(f"{where}: the split column must hold train and valid (has: {', '.join(sorted(splits))})")
    return notes


def word_tag_counts(notes: pd.DataFrame, split: str | None = "train") -> pd.DataFrame:
    """How often each word (`word_key`) carries each tag in `split` (None: all sentences).

    One row per word key (the index), one column per tag seen ("O", "B-PERSON", ...), and
    `surface`: the word's most frequent written form (ties: the first seen)."""
    part = notes if split is None else notes[notes["split"] == split]
    counts: dict[tuple[str, str], int] = {}
    surfaces: dict[str, dict[str, int]] = {}
    for words, tags in zip(part["words"], part["tags"]):
        for word, tag in zip(words, tags):
            key = word_key(word)
            counts[(key, tag)] = counts.get((key, tag), 0) + 1
            forms = surfaces.setdefault(key, {})
            forms[word] = forms.get(word, 0) + 1
    if not counts:
        return pd.DataFrame(columns=["surface", "O"])
    series = pd.Series(counts)
    table = series.unstack(fill_value=0).astype("int64")
    table.index.name = "word"
    table.insert(0, "surface", [max(surfaces[k].items(), key=lambda kv: kv[1])[0] for k in table.index])
    return table.sort_index()


def class_counts(counts: pd.DataFrame, classes: Sequence[str]) -> pd.DataFrame:
    """Occurrences of each word under each class (B- plus I- tags), and under O."""
    out = pd.DataFrame(index=counts.index)
    for cls in classes:
        out[cls] = sum(counts[t] for t in (f"B-{cls}", f"I-{cls}") if t in counts.columns) if len(counts) else 0
    out["O"] = counts["O"] if "O" in counts.columns else 0
    return out.astype("int64")


def candidate_words(counts: pd.DataFrame, cls: str, classes: Sequence[str]) -> list[str]:
    """The candidate set C_i of Helali et al. (TSD 2020): the words labelled only as C_i.

    Exactly: the words (`word_key`) that carry the tag B-<cls> at least once in the counted
    data and never any tag other than B-<cls> or I-<cls> (no other class, never O). Returned
    as their most frequent written forms, in word-key order."""
    if not len(counts):
        return []
    by_class = class_counts(counts, classes)
    begins = counts[f"B-{cls}"] if f"B-{cls}" in counts.columns else pd.Series(0, index=counts.index)
    others = by_class.drop(columns=[cls]).sum(axis=1)
    keep = (begins > 0) & (others == 0)
    return counts.loc[keep, "surface"].tolist()


def ambiguous_words(counts: pd.DataFrame, classes: Sequence[str]) -> pd.DataFrame:
    """Words labelled under two or more of `classes` (O aside), with their counts per class
    and `balance`: the smallest of the counts of the two most frequent classes."""
    by_class = class_counts(counts, classes)[list(classes)]
    multi = by_class[(by_class > 0).sum(axis=1) >= 2].copy()
    top2 = np.sort(multi.to_numpy(), axis=1)[:, -2:] if len(multi) else np.zeros((0, 2))
    multi["balance"] = top2[:, 0] if len(multi) else []
    multi.insert(0, "surface", counts.loc[multi.index, "surface"])
    return multi.sort_values(["balance", "surface"], ascending=[False, True])


def choose_entities(
    counts: pd.DataFrame, classes: Sequence[str], labelled: Sequence[str], given: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The inserted word of each d-exposure class: an ambiguous word labelled as that class
    and as another in the training data, the most balanced first.

    For class C_i, among the words not yet chosen that occur under C_i and under at least one
    other class of `labelled` (O aside): the largest min(#C_i, #most frequent other class),
    then the larger total, then the word key. `given` (class -> word) overrides a class; such a
    word must be labelled as C_i and as another class in the training data."""
    given = dict(given or {})
    by_class = class_counts(counts, labelled)[list(labelled)]
    chosen: dict[str, str] = {}
    used: set[str] = set()
    for cls in classes:
        if cls not in labelled:
            raise UserError(f"dexposure.classes: {cls!r} is not a labelled class ({', '.join(labelled)})")
        others = by_class.drop(columns=[cls]).max(axis=1) if len(labelled) > 1 else by_class[cls] * 0
        if cls in given:
            key = word_key(given[cls])
            if key not in by_class.index or by_class.at[key, cls] == 0 or others.at[key] == 0:
                raise UserError(
                    f"dexposure.entities.{cls}: the given word is not labelled both {cls} and another class in "
                    f"the training notes"
                )
        else:
            score = np.minimum(by_class[cls], others)
            table = pd.DataFrame({"score": score, "total": by_class.sum(axis=1)})
            table = table[(table["score"] > 0) & ~table.index.isin(used)]
            if table.empty:
                raise UserError(
                    f"dexposure: no word of the training notes is labelled both {cls} and another class "
                    f"(d-exposure needs an ambiguous entity per class)"
                )
            table = table.reset_index().sort_values(["score", "total", "word"], ascending=[False, False, True])
            key = table["word"].iloc[0]
        used.add(key)
        chosen[cls] = counts.at[key, "surface"]
    return chosen


def class_statistics(notes: pd.DataFrame, classes: Sequence[str], split: str | None = "train") -> pd.DataFrame:
    """Table 1 of Helali et al. (TSD 2020): per class, its entity mentions (B- tags), the
    distinct words labelled with it, |C_i| (the words labelled only with it: `candidate_words`)
    and how many of its words are labelled with another class too; a last row counts the words
    labelled under more than one class."""
    counts = word_tag_counts(notes, split)
    by_class = class_counts(counts, classes)
    n_classes = (by_class[list(classes)] > 0).sum(axis=1)
    rows = []
    for cls in classes:
        rows.append(
            {
                "class": cls,
                "mentions": int(counts[f"B-{cls}"].sum()) if f"B-{cls}" in counts.columns else 0,
                "words": int((by_class[cls] > 0).sum()),
                "only_this_class": len(candidate_words(counts, cls, classes)),
                "also_other_class": int(((by_class[cls] > 0) & (n_classes >= 2)).sum()),
            }
        )
    rows.append(
        {
            "class": "more than one class",
            "mentions": np.nan,
            "words": int((n_classes >= 2).sum()),
            "only_this_class": np.nan,
            "also_other_class": np.nan,
        }
    )
    return pd.DataFrame(rows)


def entity_occurrences(notes: pd.DataFrame, words: Sequence[str], classes: Sequence[str]) -> pd.DataFrame:
    """Table 2 of Helali et al. (TSD 2020): occurrences of each word in the training split
    under each class and as O (rows in the order of `words`)."""
    counts = class_counts(word_tag_counts(notes, "train"), classes)
    rows = []
    for word in words:
        key = word_key(word)
        row = counts.loc[key] if key in counts.index else pd.Series(0, index=counts.columns)
        rows.append({"word": word, **{c: int(row.get(c, 0)) for c in [*classes, "O"]}})
    return pd.DataFrame(rows, columns=["word", *classes, "O"])


def split_patients(sentences: pd.DataFrame, valid_share: float, seed: int) -> pd.DataFrame:
    """A `split` column: `valid_share` of the patients (seeded, at least one, never all) are
    `valid`, the rest `train`."""
    patients = sorted(sentences["group_id"].astype(str).unique())
    if len(patients) < 2:
        raise UserError("dexposure: needs notes of at least 2 patients (one for the validation split)")
    order = random.Random(f"phi-split:{seed}").sample(patients, len(patients))
    n_valid = min(len(patients) - 1, max(1, round(float(valid_share) * len(patients))))
    valid = set(order[:n_valid])
    out = sentences.copy()
    out["split"] = np.where(out["group_id"].astype(str).isin(valid), "valid", "train")
    return out


def load_notes(settings: Mapping, xml: Sequence[str | os.PathLike] = ()) -> pd.DataFrame:
    """The tagger's notes: the i2b2 2014 XML files or directories in `xml` when given (split by
    patient with the settings' `valid_share` and `seed`), else `generate_notes(settings)`."""
    if xml:
        cfg = phi_settings(settings)
        sentences = i2b2_labelled_sentences([Path(p) for p in xml])
        return check_notes(split_patients(sentences, cfg["valid_share"], cfg["seed"])[NOTE_COLUMNS], "i2b2 notes")
    return check_notes(generate_notes(settings), "generated notes")
