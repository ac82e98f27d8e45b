"""The PHI entities of the generated notes (`mlmia.world.phi`): the pools of names and places of a
seed, a patient's PHI, and the labelled segments the PHI templates write them as.

A PHI template (`phi_sentence` of `mlmia.world.registers.mimic` and `.i2b2`) returns a list of
segments: a plain string (words labelled O) or an entity (class, words, roles); a role marks the
one-word position an ambiguous word may replace (`SUBSTITUTABLE`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass

from mlmia.world.lexicon import Lexicon, lexicon, word_list, zipf_weights
from mlmia.world.patients import Patient, make_patient, note_date, pick, render_date

#: the labelled classes (BIO tags "B-<class>", "I-<class>", and "O")
PHI_CLASSES = ("PERSON", "LOCATION", "ORGANIZATION", "DATE")
#: classes with one-word entities that fill a one-word slot: the d-exposure classes
SLOT_CLASSES = ("PERSON", "LOCATION", "ORGANIZATION")
HOSPITAL_SUFFIXES = word_list("hospital_suffixes")
RELATIVES = word_list("relatives")


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
    weights = zipf_weights(len(names))  # a few busy hospitals
    order = list(range(len(names)))
    rng.shuffle(order)
    names = tuple(names[i] for i in order)
    return PhiWorld(ff, wf, fm, wm, la, wl, streets, street_suffixes, cities, states, names, weights, tuple(chosen))


#: the role of each slot class's one-word entity position, which an ambiguous word may replace
SUBSTITUTABLE = {"PERSON": "surname", "LOCATION": "city", "ORGANIZATION": "place"}


def entity(cls: str, text: str, role: str | None = None) -> tuple:
    """An entity segment: `text` labelled `cls`, its last (surname) or first word given `role`."""
    words = text.split()
    roles = [None] * len(words)
    if role is not None:
        roles[-1 if role == "surname" else 0] = role
    return (cls, words, roles)


@dataclass
class PhiPatient:
    """A patient of the notes: the world's facts (diagnoses, medications, sex, age) and PHI of their own."""

    facts: Patient
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


def make_phi_patient(rng: random.Random, world: PhiWorld, lex: Lexicon, pid: str, register: str) -> PhiPatient:
    """A patient of the world (`make_patient`) with PHI drawn from `world`'s pools."""
    facts = make_patient(rng, lex, pid, register)
    female = facts.sex == "F"
    first = pick(rng, world.first_female, world.w_female) if female else pick(rng, world.first_male, world.w_male)
    rel_female = rng.random() < 0.5
    street = f"{rng.randint(2, 9899)} {pick(rng, world.street_names)} {pick(rng, world.street_suffixes)}"
    return PhiPatient(
        facts=facts,
        first=first,
        last=pick(rng, world.last, world.w_last),
        doctor_first=pick(rng, world.first_female + world.first_male, world.w_female + world.w_male),
        doctor=pick(rng, world.last, world.w_last),
        relative=pick(rng, RELATIVES),
        relative_first=(
            pick(rng, world.first_female, world.w_female) if rel_female else pick(rng, world.first_male, world.w_male)
        ),
        city=pick(rng, world.cities),
        moved_from=pick(rng, world.cities),
        state=pick(rng, world.states),
        street=street,
        hospital=pick(rng, world.hospitals, world.w_hospitals),
        transfer=pick(rng, world.hospitals, world.w_hospitals),
        admit=(rng.randint(2100, 2190), rng.randint(1, 12), rng.randint(1, 28)),
        register=register,
    )


def date_entity(rng: random.Random, p: PhiPatient, form: str, shift: int | None = None) -> tuple:
    """A date of `p`'s stay (`note_date`; `shift` days after admission, None: drawn) as a DATE entity."""
    return entity("DATE", render_date(*note_date(rng, p.admit, shift), form))


def city(name: str) -> tuple:
    """A LOCATION entity; a one-word name is a city slot."""
    return entity("LOCATION", name, "city" if len(name.split()) == 1 else None)


def phrase_filler(rng: random.Random, world: PhiWorld) -> tuple:
    """One word of a random slot class for the ambiguous template (never an ambiguous word)."""
    cls = rng.choice(SLOT_CLASSES)
    if cls == "PERSON":
        return entity("PERSON", pick(rng, world.last, world.w_last))
    if cls == "LOCATION":
        return entity("LOCATION", pick(rng, [c for c in world.cities if " " not in c] or list(world.cities)))
    return entity("ORGANIZATION", pick(rng, world.hospitals, world.w_hospitals)[1])


def fill_phrase(phrase: tuple[list[str], int], filler: tuple) -> list:
    """The phrase (`mlmia.world.phi.phrase_slot`) as segments, `filler` in its slot."""
    words, slot = phrase
    return [" ".join(words[:slot]), filler, " ".join(words[slot + 1 :])]


def assemble(segments: Iterable) -> tuple[list[str], list[str], list[tuple[int, str, str]]]:
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
