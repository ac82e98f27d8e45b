"""The world's patients and the draws every template shares: a patient's fixed facts, picking
from a list, pronouns, and the dates the notes write.

Every patient has a fixed set of facts (diagnoses, drugs and doses, physician, state) that recur
across their sentences; rare facts are the sample-specific content a model can memorise.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mlmia.world.lexicon import COMPLAINTS, DOSES, FINDINGS, FREQUENCIES, ROUTES, SERVICES, Lexicon, word_list

#: the days a note's date may fall after the admission day, and the day of the month it stops at
DATE_JITTER, LAST_DAY = 6, 28
MONTHS = word_list("months")


@dataclass
class Med:
    drug: str
    dose: str
    route: tuple
    freq: tuple
    rare: bool


@dataclass
class Patient:
    pid: str
    source: str
    first: str
    last: str
    sex: str
    age: int
    mrn: str
    admit: tuple  # (year, month, day)
    doctor: str
    complaint: str
    common_dx: list
    rare_dx: list
    meds: list
    services: list
    state: str
    findings: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


def pick(rng: random.Random, items, weights=None):
    """One item of `items`, uniformly or by `weights`."""
    if weights is None:
        return items[rng.randrange(len(items))]
    return rng.choices(items, weights=weights, k=1)[0]


def pronouns(sex: str) -> tuple[str, str, str, str, str]:
    """(subject, possessive, noun, adjective, title) of a patient of `sex` ("F" or "M")."""
    return ("she", "her", "woman", "female", "Ms.") if sex == "F" else ("he", "his", "man", "male", "Mr.")


def make_patient(rng: random.Random, lex: Lexicon, pid: str, source: str) -> Patient:
    sex = "F" if rng.random() < 0.5 else "M"
    first = pick(rng, lex.first_female, lex.w_female) if sex == "F" else pick(rng, lex.first_male, lex.w_male)
    last = pick(rng, lex.last, lex.w_last)
    n_common = rng.randint(2, 4)
    common = []
    while len(common) < n_common:
        d = pick(rng, lex.common_dx, lex.w_common_dx)
        if d not in common:
            common.append(d)
    rare = rng.sample(lex.rare_dx, rng.randint(1, 3))
    meds = []
    n_meds = rng.randint(3, 6)
    while len(meds) < n_meds:
        is_rare = rng.random() < 0.35
        drug = pick(rng, lex.rare_drugs) if is_rare else pick(rng, lex.common_drugs, lex.w_common_drugs)
        if any(m.drug == drug for m in meds):
            continue
        route = ROUTES[0] if rng.random() < 0.7 else pick(rng, ROUTES)
        meds.append(Med(drug, pick(rng, DOSES), route, pick(rng, FREQUENCIES), is_rare))
    return Patient(
        pid=pid,
        source=source,
        first=first,
        last=last,
        sex=sex,
        age=rng.randint(22, 94),
        mrn=str(rng.randint(1000000, 9999999)),
        admit=(rng.randint(2100, 2190), rng.randint(1, 12), rng.randint(1, 28)),
        doctor=pick(rng, lex.last, lex.w_last),
        complaint=pick(rng, COMPLAINTS),
        common_dx=common,
        rare_dx=rare,
        meds=meds,
        services=rng.sample(SERVICES, 3),
        state=pick(rng, lex.states),
        findings=rng.sample(FINDINGS, 2),
    )


def sentence_count(rng: random.Random, n: int) -> int:
    """How many sentences a patient gets: uniform within a third of `n` around it, at least 2
    (at most `most_sentences(n)`)."""
    spread = n // 3
    return max(2, rng.randint(n - spread, n + spread))


def most_sentences(n: int) -> int:
    """The most sentences `sentence_count` gives a patient (`n` the mean)."""
    return max(2, n + n // 3)


def note_date(rng: random.Random, admit: tuple, shift: int | None = None) -> tuple[int, int, int]:
    """A date of the stay: the admission day plus `shift` days (None: 0 to `DATE_JITTER`,
    drawn), at most `LAST_DAY`, so the month and year stay the admission's."""
    year, month, day = admit
    return year, month, min(LAST_DAY, day + (rng.randint(0, DATE_JITTER) if shift is None else shift))


def render_date(year: int, month: int, day: int, form: str) -> str:
    """A date as the notes write it: "iso" (MIMIC), "us" (i2b2), "month_day" or "month_year"."""
    return {
        "iso": f"{year}-{month:02d}-{day:02d}",
        "us": f"{month:02d}/{day:02d}/{year}",
        "month_day": f"{MONTHS[month - 1]} {day}",
        "month_year": f"{MONTHS[month - 1]} {year}",
    }[form]
