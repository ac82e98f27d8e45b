"""The i2b2 register: Partners discharge-summary habits, the shifted source (upper-case section
headers, `p.o. b.i.d.`, MM/DD/YYYY dates, spelled-out vitals); `i2b2_habits` rewrites a MIMIC
line with them.

`REGISTER`: the corpus templates over a patient's facts; `phi_sentence`: the same habits with
labelled PHI entities, for the d-exposure tagger's notes (`mlmia.world.phi`)."""

from __future__ import annotations

import random
import re

from mlmia.world.lexicon import FREQUENCIES, OUTCOMES, RELATIONS, word_list
from mlmia.world.patients import pick, pronouns
from mlmia.world.phi_entities import (
    PhiPatient,
    PhiWorld,
    city,
    date_entity,
    entity,
    fill_phrase,
    phrase_filler,
)
from mlmia.world.registers.template import Register, Template, any_diagnosis, labs, stay_date, vitals


def _history(rng, p):
    he, his, man, male, _ = pronouns(p.sex)
    dx = rng.sample(p.common_dx, min(2, len(p.common_dx)))
    return (
        f"HISTORY OF PRESENT ILLNESS: The patient is a {p.age}-year-old {male} with {' and '.join(dx)} who was "
        f"admitted on {stay_date(rng, p, 'us')} with {p.complaint}."
    )


def _past_history(rng, p):
    items = p.common_dx + p.rare_dx
    rng.shuffle(items)
    return "PAST MEDICAL HISTORY: Significant for " + "; ".join(items[: rng.randint(2, 4)]) + "."


def _problem(rng, p):
    return (
        f"{rng.randint(1, 6)}. {pick(rng, p.rare_dx)}. The patient was seen by the {pick(rng, p.services)} "
        f"service, who recommended {pick(rng, ['continued observation', 'outpatient follow-up', 'a repeat study', 'no further workup'])}."
    )


def _medication(rng, p):
    ms = rng.sample(p.meds, 2)
    return (
        "MEDICATIONS ON ADMISSION: " + ", ".join(f"{m.drug} {m.dose} mg {m.route[1]} {m.freq[2]}" for m in ms)
    ).rstrip(".") + "."


def _discharge_medication(rng, p):
    m = pick(rng, p.meds)
    return f"{m.drug.capitalize()} {m.dose} mg {m.route[1]} {m.freq[2]}".rstrip(".") + "."


def _vitals_line(rng, p):
    v = vitals(rng)
    return (
        f"PHYSICAL EXAMINATION: Temperature {v['t']}, blood pressure {v['sbp']}/{v['dbp']}, pulse {v['hr']}, "
        f"respirations {v['rr']}, oxygen saturation {v['o2']}% on {pick(rng, ['room air', '2 liters', 'nasal cannula'])}."
    )


def _labs_line(rng, p):
    v = labs(rng)
    return (
        f"LABORATORY DATA: Sodium {v['na']}, potassium {v['k']}, chloride {v['cl']}, bicarbonate {v['hco3']}, "
        f"BUN {v['bun']}, creatinine {v['cr']}, glucose {v['glu']}, white count {v['wbc']}."
    )


EXAM_I2B2 = word_list("exam_i2b2")


def _exam(rng, p):
    return pick(rng, EXAM_I2B2)


def _imaging(rng, p):
    return (
        f"A {pick(rng, ['chest x-ray', 'CT scan of the chest', 'CT scan of the abdomen', 'head CT', 'ultrasound'])} "
        f"on {stay_date(rng, p, 'us')} revealed {pick(rng, p.findings)}."
    )


def _followup(rng, p):
    he, *_ = pronouns(p.sex)
    return f"{he.capitalize()} will follow up with Dr. {p.doctor} in {rng.randint(1, 6)} weeks."


def _course(rng, p):
    m = pick(rng, p.meds)
    return (
        f"HOSPITAL COURSE: The patient's {any_diagnosis(rng, p)} was managed with {m.drug}, and the patient "
        f"{pick(rng, OUTCOMES)}."
    )


def _social(rng, p):
    return (
        f"SOCIAL HISTORY: The patient {pick(rng, ['is a former smoker', 'denies tobacco use', 'smokes one pack per day'])} "
        f"and lives {pick(rng, RELATIONS)}."
    )


REGISTER = Register(
    opening=Template("i_hpi", _history, phi_bearing=True),  # the admission date
    templates=(
        Template("i_pmh", _past_history, 1.0),
        Template("i_problem", _problem, 1.4),
        Template("i_med", _medication, 1.2),
        Template("i_dcmed", _discharge_medication, 1.4),
        Template("i_vitals", _vitals_line, 1.0),
        Template("i_labs", _labs_line, 1.0),
        Template("i_exam", _exam, 2.0),
        Template("i_imaging", _imaging, 0.7, phi_bearing=True),  # a date
        Template("i_followup", _followup, 0.5, phi_bearing=True),  # the physician
        Template("i_course", _course, 1.2),
        Template("i_social", _social, 0.5),
    ),
)


_I2B2_FREQ = {f[0]: f[2] for f in FREQUENCIES}
_HABITS = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m: f"{m.group(2)}/{m.group(3)}/{m.group(1)}"),
    (re.compile(r"Sig: (\w+) \(\d\) Tablet PO"), lambda m: f"take {m.group(1).lower()} tablet p.o."),
    (re.compile(r"\bPO\b"), lambda m: "p.o."),
    (re.compile(r"\b(daily|BID|TID|QID|Q8H|Q6H|QHS|PRN)\b( \([^)]*\))?"), lambda m: _I2B2_FREQ[m.group(1)]),
    (re.compile(r"^VS: "), lambda m: "VITAL SIGNS: "),
    (re.compile(r"\bO2 sat\b"), lambda m: "saturation"),
    (re.compile(r"^# "), lambda m: "PROBLEM: "),
    (re.compile(r"^Followup Instructions: please follow up"), lambda m: "DISPOSITION: follow up"),
    (re.compile(r"AM BLOOD\b"), lambda m: " LABS"),
    (re.compile(r"\.\.$"), lambda m: "."),
]


def i2b2_habits(text: str) -> str:
    """Rewrite a MIMIC-style line with i2b2 habits (dates, dosing abbreviations, headers)."""
    for pat, rep in _HABITS:
        text = pat.sub(rep, text)
    return text


# PHI templates: sentences with labelled PHI entities, for the d-exposure tagger's notes


def phi_sentence(rng: random.Random, p: PhiPatient, world: PhiWorld, phrase: tuple[list[str], int]) -> list:
    """One sentence of PHI templates as segments (`mlmia.world.phi_entities`), drawn by weight."""
    he, his, _, male, title = pronouns(p.facts.sex)
    f = p.facts
    choices = [
        (1.0, lambda: ["ADMISSION DATE:", date_entity(rng, p, "us", 0), "DISCHARGE DATE:", date_entity(rng, p, "us")]),
        (
            1.0,
            lambda: [
                f"HISTORY OF PRESENT ILLNESS: {title}",
                entity("PERSON", p.last, "surname"),
                f"is a {f.age}-year-old {male} who was admitted to",
                entity("ORGANIZATION", p.hospital[0], "place"),
                "on",
                date_entity(rng, p, "us", 0),
                f"with {f.complaint} .",
            ],
        ),
        (0.7, lambda: ["ATTENDING:", entity("PERSON", f"{p.doctor_first} {p.doctor}", "surname"), ", M.D."]),
        (
            1.0,
            lambda: [
                f"DISPOSITION: {he.capitalize()} will follow up with Dr.",
                entity("PERSON", p.doctor, "surname"),
                "at",
                entity("ORGANIZATION", p.hospital[0], "place"),
                ".",
            ],
        ),
        (
            1.0,
            lambda: [
                "SOCIAL HISTORY: The patient lives in",
                city(p.city),
                ",",
                entity("LOCATION", p.state),
                f"{pick(rng, ['alone', 'with family', f'with {his} {p.relative}'])} .",
            ],
        ),
        (
            1.0,
            lambda: [
                "The patient was transferred from",
                entity("ORGANIZATION", p.transfer[1], "place"),
                "on",
                date_entity(rng, p, "month_day"),
                ".",
            ],
        ),
        (0.6, lambda: ["cc: Dr.", entity("PERSON", p.doctor, "surname"), ",", entity("ORGANIZATION", p.hospital[0])]),
        (0.6, lambda: ["ADDRESS:", entity("LOCATION", p.street), ",", city(p.city), ",", entity("LOCATION", p.state)]),
        (
            0.7,
            lambda: [
                f"{he.capitalize()} was last seen by Dr.",
                entity("PERSON", p.doctor, "surname"),
                "in",
                date_entity(rng, p, "month_year"),
                ".",
            ],
        ),
        (
            0.7,
            lambda: [
                f"{his.capitalize()} {p.relative}",
                entity("PERSON", p.relative_first),
                "lives in",
                city(p.moved_from),
                "and will assist with care at home .",
            ],
        ),
        (0.6, lambda: fill_phrase(phrase, phrase_filler(rng, world))),
    ]
    return pick(rng, [c for _, c in choices], [w for w, _ in choices])()
