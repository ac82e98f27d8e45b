"""PHI-labelled note sentences: the training data of a de-identification tagger, for d-exposure.

Helali, Kleinbauer and Klakow, "Assessing Unintended Memorization in Neural Discriminative
Sequence Models", TSD 2020, measure what a tagger memorised through AMBIGUOUS words: words
labelled under two or more classes in the training data (their examples: "Williams",
"Chelsea", "Melbourne"). This module writes such data for the embedded world, and reads the
i2b2 2014 de-identification XML into the same shape (the paper setup of this workflow).

The generated notes (`generate_notes`), deterministic in (seed, sizes):

- sentences in the world's two note registers (`mlmia.world.corpus`): MIMIC habits (ISO dates,
  ``Followup Instructions:``, ``Social History:``) and i2b2 habits (upper-case headers, US
  dates), one register per patient (`i2b2_share` of the patients write i2b2). A share
  `phi_share` of a patient's sentences come from PHI templates (below); the rest are the
  world's own PHI-free templates (problems, medications, vitals, exam lines, hospital course),
  all words labelled O;
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
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger

log = get_logger(__name__)

#: the labelled classes (BIO tags "B-<class>", "I-<class>", and "O")
PHI_CLASSES = ("PERSON", "LOCATION", "ORGANIZATION", "DATE")
#: classes with one-word entities that fill a one-word slot: the d-exposure classes
SLOT_CLASSES = ("PERSON", "LOCATION", "ORGANIZATION")
NOTE_COLUMNS = ["sentence_id", "group_id", "register", "split", "words", "tags"]
SLOT = "{slot}"

#: settings of the generated notes with their defaults (keys of the config's `dexposure:`)
PHI_DEFAULTS: dict = {
    "seed": 0,
    "patients": 400,
    "sentences_per_patient": 8,
    "i2b2_share": 0.4,
    "phi_share": 0.6,
    "hospitals": 40,
    "ambiguous": 6,
    "occurrences": 12,
    "valid_share": 0.2,
    "phrase": "The patient often talks about {slot} .",
}

HOSPITAL_SUFFIXES = (
    "Hospital",
    "General Hospital",
    "Medical Center",
    "Memorial Hospital",
    "Regional Medical Center",
    "Community Hospital",
    "Clinic",
    "Health Center",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
RELATIVES = ("daughter", "son", "wife", "husband", "sister", "brother", "niece", "nephew")


def tag_names(classes: Sequence[str] = PHI_CLASSES) -> list[str]:
    """The tag set: "O", then "B-<class>", "I-<class>" for each class in order."""
    return ["O"] + [f"{prefix}-{cls}" for cls in classes for prefix in ("B", "I")]


@functools.lru_cache(maxsize=1)
def _normalizer():
    from mlmia.models.tokenizer import _bert_normalizer

    return _bert_normalizer()


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
# the places and names of the PHI world


@dataclass(frozen=True)
class PhiWorld:
    """The entity pools of one seed: names (weighted), places, hospitals, ambiguous words."""

    first_female: tuple
    w_female: tuple
    first_male: tuple
    w_male: tuple
    last: tuple
    w_last: tuple
    street_names: tuple
    street_suffixes: tuple
    cities: tuple
    states: tuple
    hospitals: tuple  # (full name, place word)
    w_hospitals: tuple
    ambiguous: tuple


@functools.lru_cache(maxsize=1)
def _faker_places() -> tuple[tuple, tuple, tuple, tuple]:
    from faker.providers.address.en_US import Provider as Address
    from faker.providers.geo import Provider as Geo

    us = tuple(sorted({c[2] for c in Geo.land_coords if c[3] == "US"}))
    return us, tuple(Address.states), tuple(Address.street_suffixes), tuple(Address.city_suffixes)


def phi_world(seed: int, hospitals: int, ambiguous: int) -> PhiWorld:
    """The pools of names and places, deterministic in (seed, hospitals, ambiguous)."""
    from mlmia.world.lexicon import lexicon

    lex = lexicon()
    rng = random.Random(f"phi-world:{seed}")
    us, states, street_suffixes, city_suffixes = _faker_places()
    firsts = set(lex.first_female) | set(lex.first_male)
    natural = sorted(set(lex.last) & {c for c in us if " " not in c})
    rng.shuffle(natural)
    chosen = natural[:ambiguous]
    if ambiguous > len(chosen):  # beyond the natural overlap: surnames that also name a town
        pool = sorted(
            w for w in lex.last[100:600] if w not in firsts and w not in us and w not in states and w.isalpha()
        )
        chosen += rng.sample(pool, ambiguous - len(chosen))
    amb = set(chosen)
    # street names: surnames kept apart from the person draws (so a street never makes a
    # surname ambiguous); persons: every other name of the lexicon, with its weight
    street_pool = sorted(w for w in lex.last[200:] if w not in amb and w not in us and w.isalpha())
    streets = tuple(rng.sample(street_pool, min(60, len(street_pool))))
    not_person = amb | set(streets)

    def keep(names, weights):
        kept = [(n, w) for n, w in zip(names, weights) if n not in not_person]
        return tuple(n for n, _ in kept), tuple(w for _, w in kept)

    ff, wf = keep(lex.first_female, lex.w_female)
    fm, wm = keep(lex.first_male, lex.w_male)
    la, wl = keep(lex.last, lex.w_last)
    # places: the US places split into residences and hospital place words (one word), plus
    # towns built the faker way (surname + city suffix)
    places = [c for c in us if c not in amb]
    rng.shuffle(places)
    one_word = [c for c in places if " " not in c and "-" not in c]
    n_hosp = min(max(hospitals, 0), len(one_word) // 2)
    hospital_places = one_word[:n_hosp]
    cities = [c for c in places if c not in set(hospital_places)]
    towns = sorted({f"{n}{rng.choice(city_suffixes)}" for n in rng.sample(la[:400], 40)})
    cities = tuple(sorted(set(cities) | set(towns)))
    names = tuple((f"{p} {rng.choice(HOSPITAL_SUFFIXES)}", p) for p in sorted(hospital_places))
    weights = tuple(1.0 / (i + 1) for i in range(len(names)))  # Zipf: a few busy hospitals
    order = list(range(len(names)))
    rng.shuffle(order)
    names = tuple(names[i] for i in order)
    return PhiWorld(ff, wf, fm, wm, la, wl, streets, street_suffixes, cities, states, names, weights, tuple(chosen))


# --------------------------------------------------------------------------------------------
# templates: lists of segments, a plain string or an entity (class, words, roles)

# roles mark the one-word entity positions that an ambiguous word may replace
_SUBSTITUTABLE = {"PERSON": "surname", "LOCATION": "city", "ORGANIZATION": "place"}


def _ent(cls: str, text: str, role: str | None = None) -> tuple:
    words = text.split()
    roles = [None] * len(words)
    if role is not None:
        roles[-1 if role == "surname" else 0] = role
    return (cls, words, roles)


@dataclass
class _Patient:
    facts: object  # the world's Patient (diagnoses, medications, services, sex, age)
    first: str
    last: str
    doctor_first: str
    doctor: str
    relative: str
    relative_first: str
    city: str
    moved_from: str
    state: str
    street: str
    hospital: tuple
    transfer: tuple
    admit: tuple
    register: str


def _pick(rng: random.Random, items, weights=None):
    if weights is None:
        return items[rng.randrange(len(items))]
    return rng.choices(items, weights=weights, k=1)[0]


def _make_patient(rng: random.Random, world: PhiWorld, lex, pid: str, register: str) -> _Patient:
    from mlmia.world.patients import make_patient

    facts = make_patient(rng, lex, pid, register)
    female = facts.sex == "F"
    first = _pick(rng, world.first_female, world.w_female) if female else _pick(rng, world.first_male, world.w_male)
    rel_female = rng.random() < 0.5
    street = f"{rng.randint(2, 9899)} {_pick(rng, world.street_names)} {_pick(rng, world.street_suffixes)}"
    return _Patient(
        facts=facts,
        first=first,
        last=_pick(rng, world.last, world.w_last),
        doctor_first=_pick(rng, world.first_female + world.first_male, world.w_female + world.w_male),
        doctor=_pick(rng, world.last, world.w_last),
        relative=_pick(rng, RELATIVES),
        relative_first=(
            _pick(rng, world.first_female, world.w_female) if rel_female else _pick(rng, world.first_male, world.w_male)
        ),
        city=_pick(rng, world.cities),
        moved_from=_pick(rng, world.cities),
        state=_pick(rng, world.states),
        street=street,
        hospital=_pick(rng, world.hospitals, world.w_hospitals),
        transfer=_pick(rng, world.hospitals, world.w_hospitals),
        admit=(rng.randint(2100, 2190), rng.randint(1, 12), rng.randint(1, 28)),
        register=register,
    )


def _date(p: _Patient, rng: random.Random, fmt: str, shift: int | None = None) -> tuple:
    y, m, d = p.admit
    d = min(28, d + (rng.randint(0, 6) if shift is None else shift))
    text = {
        "iso": f"{y}-{m:02d}-{d:02d}",
        "us": f"{m:02d}/{d:02d}/{y}",
        "month_day": f"{MONTHS[m - 1]} {d}",
        "month_year": f"{MONTHS[m - 1]} {y}",
    }[fmt]
    return _ent("DATE", text)


def _city(name: str) -> tuple:
    return _ent("LOCATION", name, "city" if len(name.split()) == 1 else None)


def _he(p: _Patient) -> tuple[str, str, str, str, str]:
    return ("she", "her", "woman", "female", "Ms.") if p.facts.sex == "F" else ("he", "his", "man", "male", "Mr.")


def _phrase_filler(rng: random.Random, p: _Patient, world: PhiWorld) -> tuple:
    """One word of a random slot class for the ambiguous template (never an ambiguous word)."""
    cls = rng.choice(SLOT_CLASSES)
    if cls == "PERSON":
        return _ent("PERSON", _pick(rng, world.last, world.w_last))
    if cls == "LOCATION":
        return _ent("LOCATION", _pick(rng, [c for c in world.cities if " " not in c] or list(world.cities)))
    return _ent("ORGANIZATION", _pick(rng, world.hospitals, world.w_hospitals)[1])


def _mimic_phi(rng: random.Random, p: _Patient, world: PhiWorld, phrase: list) -> list:
    he, his, man, _, title = _he(p)
    f = p.facts
    choices = [
        (1.0, lambda: ["Admission Date:", _date(p, rng, "iso", 0), "Discharge Date:", _date(p, rng, "iso")]),
        (0.8, lambda: ["Name:", _ent("PERSON", f"{p.first} {p.last}", "surname"), f"Unit No: {f.mrn}"]),
        (
            1.0,
            lambda: [
                title,
                _ent("PERSON", p.last, "surname"),
                f"is a {f.age} year old {man} transferred from",
                _ent("ORGANIZATION", p.transfer[0], "place"),
                f"with {f.complaint} .",
            ],
        ),
        (
            1.0,
            lambda: [
                "Followup Instructions: please follow up with Dr.",
                _ent("PERSON", p.doctor, "surname"),
                "at",
                _ent("ORGANIZATION", p.hospital[0], "place"),
                f"in {rng.randint(1, 6)} weeks .",
            ],
        ),
        (
            1.0,
            lambda: [
                f"Social History: lives {_pick(rng, ['alone', 'with family', f'with {his} {p.relative}'])} in",
                _city(p.city),
                ",",
                _ent("LOCATION", p.state),
                f", {_pick(rng, ['denies tobacco', 'former smoker', 'smokes 1 ppd', 'quit tobacco 10 years ago'])} .",
            ],
        ),
        (0.6, lambda: ["Address:", _ent("LOCATION", p.street), ",", _city(p.city), ",", _ent("LOCATION", p.state)]),
        (
            1.0,
            lambda: [
                f"{he.capitalize()} was transferred to us from",
                _ent("ORGANIZATION", p.transfer[1], "place"),
                "for further management .",
            ],
        ),
        (
            0.7,
            lambda: [
                f"{his.capitalize()} {p.relative}",
                _ent("PERSON", p.relative_first),
                "called from",
                _city(p.moved_from),
                "to discuss the plan .",
            ],
        ),
        (
            0.8,
            lambda: [
                _pick(rng, ["CXR", "CT chest", "CT head", "RUQ US", "MRI"]),
                "on",
                _date(p, rng, "iso"),
                f"showed {_pick(rng, f.findings)} .",
            ],
        ),
        (
            0.6,
            lambda: [
                "Dictated By:",
                _ent("PERSON", f"{p.doctor_first} {p.doctor}", "surname"),
                ", MD on",
                _date(p, rng, "iso"),
            ],
        ),
        (
            0.8,
            lambda: [
                f"{he.capitalize()} was seen by Dr.",
                _ent("PERSON", p.doctor, "surname"),
                f"in the {_pick(rng, f.services)} clinic at",
                _ent("ORGANIZATION", p.hospital[1], "place"),
                "on",
                _date(p, rng, "iso"),
                ".",
            ],
        ),
        (0.5, lambda: [f"{he.capitalize()} recently moved from", _city(p.moved_from), "to", _city(p.city), "."]),
        (0.6, lambda: _fill(phrase, _phrase_filler(rng, p, world))),
    ]
    return _pick(rng, [c for _, c in choices], [w for w, _ in choices])()


def _i2b2_phi(rng: random.Random, p: _Patient, world: PhiWorld, phrase: list) -> list:
    he, his, _, male, title = _he(p)
    f = p.facts
    choices = [
        (1.0, lambda: ["ADMISSION DATE:", _date(p, rng, "us", 0), "DISCHARGE DATE:", _date(p, rng, "us")]),
        (
            1.0,
            lambda: [
                f"HISTORY OF PRESENT ILLNESS: {title}",
                _ent("PERSON", p.last, "surname"),
                f"is a {f.age}-year-old {male} who was admitted to",
                _ent("ORGANIZATION", p.hospital[0], "place"),
                "on",
                _date(p, rng, "us", 0),
                f"with {f.complaint} .",
            ],
        ),
        (0.7, lambda: ["ATTENDING:", _ent("PERSON", f"{p.doctor_first} {p.doctor}", "surname"), ", M.D."]),
        (
            1.0,
            lambda: [
                f"DISPOSITION: {he.capitalize()} will follow up with Dr.",
                _ent("PERSON", p.doctor, "surname"),
                "at",
                _ent("ORGANIZATION", p.hospital[0], "place"),
                ".",
            ],
        ),
        (
            1.0,
            lambda: [
                "SOCIAL HISTORY: The patient lives in",
                _city(p.city),
                ",",
                _ent("LOCATION", p.state),
                f"{_pick(rng, ['alone', 'with family', f'with {his} {p.relative}'])} .",
            ],
        ),
        (
            1.0,
            lambda: [
                "The patient was transferred from",
                _ent("ORGANIZATION", p.transfer[1], "place"),
                "on",
                _date(p, rng, "month_day"),
                ".",
            ],
        ),
        (0.6, lambda: ["cc: Dr.", _ent("PERSON", p.doctor, "surname"), ",", _ent("ORGANIZATION", p.hospital[0])]),
        (0.6, lambda: ["ADDRESS:", _ent("LOCATION", p.street), ",", _city(p.city), ",", _ent("LOCATION", p.state)]),
        (
            0.7,
            lambda: [
                f"{he.capitalize()} was last seen by Dr.",
                _ent("PERSON", p.doctor, "surname"),
                "in",
                _date(p, rng, "month_year"),
                ".",
            ],
        ),
        (
            0.7,
            lambda: [
                f"{his.capitalize()} {p.relative}",
                _ent("PERSON", p.relative_first),
                "lives in",
                _city(p.moved_from),
                "and will assist with care at home .",
            ],
        ),
        (0.6, lambda: _fill(phrase, _phrase_filler(rng, p, world))),
    ]
    return _pick(rng, [c for _, c in choices], [w for w, _ in choices])()


def _fill(phrase: list, entity: tuple) -> list:
    words, slot = phrase
    return [" ".join(words[:slot]), entity, " ".join(words[slot + 1 :])]


def _assemble(segments: Iterable) -> tuple[list[str], list[str], list[tuple[int, str, str]]]:
    """Words, BIO tags and substitutable slots (word index, class, role) of a segment list."""
    words: list[str] = []
    tags: list[str] = []
    slots: list[tuple[int, str, str]] = []
    for seg in segments:
        if isinstance(seg, str):
            for w in seg.split():
                words.append(w)
                tags.append("O")
            continue
        cls, ent_words, roles = seg
        for j, (w, role) in enumerate(zip(ent_words, roles)):
            if role is not None:
                slots.append((len(words), cls, role))
            words.append(w)
            tags.append(("B-" if j == 0 else "I-") + cls)
    return words, tags, slots


# --------------------------------------------------------------------------------------------
# the generator


def phi_settings(config: Mapping | None) -> dict:
    """The generator's settings from the `dexposure:` config (defaults filled in, checked)."""
    config = dict(config or {})
    out = {key: config.get(key, default) for key, default in PHI_DEFAULTS.items()}
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


def generate_notes(config: Mapping | None = None) -> pd.DataFrame:
    """PHI-labelled note sentences with gold BIO tags, deterministic in (seed, sizes).

    Returns a table with columns sentence_id, group_id (the patient), register (mimic|i2b2),
    split (train|valid), words (list of whitespace words), tags (list of BIO tags, one per
    word). See the module docstring for what is generated; settings: `PHI_DEFAULTS`."""
    from mlmia.world.lexicon import lexicon
    from mlmia.world.registers import i2b2, mimic

    cfg = phi_settings(config)
    seed = int(cfg["seed"])
    lex = lexicon()
    world = phi_world(seed, int(cfg["hospitals"]), int(cfg["ambiguous"]))
    phrase = phrase_slot(cfg["phrase"])
    free = {"mimic": mimic.REGISTER.phi_free(), "i2b2": i2b2.REGISTER.phi_free()}
    writers = {"mimic": _mimic_phi, "i2b2": _i2b2_phi}
    rng = random.Random(f"phi-notes:{seed}")
    n_sent = int(cfg["sentences_per_patient"])
    rows: list[dict] = []
    slots: list[tuple[int, int, str, str]] = []
    for i in range(int(cfg["patients"])):
        pid = f"phi-{i:05d}"
        register = "i2b2" if rng.random() < float(cfg["i2b2_share"]) else "mimic"
        p = _make_patient(rng, world, lex, pid, register)
        spread = n_sent // 3
        for j in range(max(1, rng.randint(n_sent - spread, n_sent + spread))):
            if rng.random() < float(cfg["phi_share"]):
                words, tags, found = _assemble(writers[register](rng, p, world, phrase))
            else:
                template = _pick(rng, free[register], [t.weight for t in free[register]])
                words, tags, found = _assemble([template.render(rng, p.facts)])
            slots.extend((len(rows), k, cls, role) for k, cls, role in found)
            rows.append(
                {"sentence_id": f"{pid}-{j:03d}", "group_id": pid, "register": register, "words": words, "tags": tags}
            )
    notes = pd.DataFrame(rows)
    patients = sorted(notes["group_id"].unique())
    order = random.Random(f"phi-split:{seed}").sample(patients, len(patients))
    n_valid = min(len(patients) - 1, max(1, round(float(cfg["valid_share"]) * len(patients))))
    valid = set(order[:n_valid])
    notes["split"] = np.where(notes["group_id"].isin(valid), "valid", "train")
    _place_ambiguous(notes, slots, world.ambiguous, int(cfg["occurrences"]), seed)
    log.info(
        "PHI notes: %d sentences of %d patients (%d train, %d valid), %d ambiguous entities x %d occurrences per class",
        len(notes),
        len(patients),
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
        role = _SUBSTITUTABLE[cls]
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


# --------------------------------------------------------------------------------------------
# the paper setup: i2b2 2014 de-identification XML

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
    from mlmia.data.raw import I2B2_NAME, _xml_files

    rows = []
    for path in _xml_files(paths_or_dir):
        m = I2B2_NAME.fullmatch(path.name)
        if not m:
            raise UserError(f"{path}: expected a name PATIENT-RECORD.xml like 110-02.xml")
        patient, note_id = m.group(1), f"{m.group(1)}-{m.group(2)}"
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as exc:
            raise UserError(f"{path}: not valid XML: {exc}") from exc
        element = root.find("TEXT")
        if element is None or element.text is None:
            raise UserError(f"{path}: no TEXT element (expected <deIdi2b2><TEXT>...</TEXT></deIdi2b2>)")
        text = element.text
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
