"""The MIMIC register: MIMIC-III discharge-summary habits (`Sig: One (1) Tablet PO BID`, lab
strings such as `WBC-11.2`, `# diagnosis:` problem lines, terse exam lines, ISO dates).

`REGISTER`: the corpus templates over a patient's facts; `phi_sentence`: the same habits with
labelled PHI entities, for the d-exposure tagger's notes (`mlmia.world.phi`)."""

from __future__ import annotations

import random

from mlmia.world.lexicon import OUTCOMES, RELATIONS, word_list
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

NUMBER_WORDS = {1: "One", 2: "Two", 3: "Three", 4: "Four"}


def _history(rng, p):
    he, his, man, _, title = pronouns(p.sex)
    dx = rng.sample(p.common_dx, min(2, len(p.common_dx))) + p.rare_dx[:1]
    return (
        f"{title} {p.last} is a {p.age} year old {man} with a history of {', '.join(dx[:-1])} and {dx[-1]} "
        f"who presents with {p.complaint} for {rng.randint(1, 10)} days."
    )


def _past_history(rng, p):
    items = p.common_dx + p.rare_dx
    rng.shuffle(items)
    return "Past Medical History: " + ", ".join(items[: rng.randint(2, 4)]) + "."


def _problem(rng, p):
    m = pick(rng, p.meds)
    return (
        f"# {pick(rng, p.rare_dx)}: {pick(rng, p.services)} was consulted and {m.drug} was "
        f"{pick(rng, ['started', 'continued', 'held', 'uptitrated'])}."
    )


def _medication(rng, p):
    m = pick(rng, p.meds)
    return f"{pronouns(p.sex)[0].capitalize()} was started on {m.drug} {m.dose} mg {m.route[0]} {m.freq[0]} for {any_diagnosis(rng, p)}."


def _discharge_medication(rng, p):
    m = pick(rng, p.meds)
    n = rng.randint(1, 2)
    return (
        f"{rng.randint(1, 14)}. {m.drug.capitalize()} {m.dose} mg Tablet Sig: {NUMBER_WORDS[n]} ({n}) Tablet "
        f"{m.route[0]} {m.freq[0]} ({m.freq[1]})."
    )


def _vitals_line(rng, p):
    v = vitals(rng)
    return (
        f"VS: T {v['t']} BP {v['sbp']}/{v['dbp']} HR {v['hr']} RR {v['rr']} O2 sat {v['o2']}% on "
        f"{pick(rng, ['RA', '2L NC', '4L NC', 'NRB', '40% FM'])}."
    )


def _labs_line(rng, p):
    v = labs(rng)
    return (
        f"{stay_date(rng, p, 'iso')} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}AM BLOOD WBC-{v['wbc']} "
        f"Hgb-{v['hgb']} Hct-{v['hct']} Plt Ct-{v['plt']} Glucose-{v['glu']} UreaN-{v['bun']} "
        f"Creat-{v['cr']} Na-{v['na']} K-{v['k']}"
    )


EXAM_MIMIC = word_list("exam_mimic")


def _exam(rng, p):
    line = pick(rng, EXAM_MIMIC)
    if rng.random() < 0.3:
        line = (
            line[:-1] + f", {pick(rng, ['trace', '1+', '2+'])} edema to the {pick(rng, ['ankles', 'shins', 'knees'])}."
        )
    return line


def _imaging(rng, p):
    return (
        f"{pick(rng, ['CXR', 'CT chest', 'CT abd/pelvis', 'CT head', 'RUQ US', 'MRI'])} on "
        f"{stay_date(rng, p, 'iso')} showed {pick(rng, p.findings)}."
    )


def _followup(rng, p):
    return (
        f"Followup Instructions: please follow up with Dr. {p.doctor} ({pick(rng, p.services)}) in "
        f"{rng.randint(1, 6)} weeks, phone {rng.randint(200, 989)}-{rng.randint(200, 989)}-{rng.randint(1000, 9999)}."
    )


def _course(rng, p):
    he, his, *_ = pronouns(p.sex)
    m1, m2 = rng.sample(p.meds, 2)
    return (
        f"Over the hospital course {his} {any_diagnosis(rng, p)} was treated with {m1.drug} and {m2.drug} and "
        f"{pick(rng, OUTCOMES)}."
    )


def _social(rng, p):
    return (
        f"Social History: lives {pick(rng, RELATIONS)} in {p.state}, "
        f"{pick(rng, ['quit tobacco 10 years ago', 'smokes 1 ppd', 'denies tobacco', 'former smoker'])}, "
        f"{pick(rng, ['occasional etoh', 'denies etoh', 'heavy etoh', 'no illicits'])}."
    )


def _allergies(rng, p):
    return f"Allergies: {pick(rng, ['Penicillins', 'Sulfa (Sulfonamide Antibiotics)', 'Codeine', 'No Known Allergies to Drugs', 'Iodine', 'Latex'])}"


REGISTER = Register(
    opening=Template("m_hpi", _history, phi_bearing=True),  # the patient's surname
    templates=(
        Template("m_pmh", _past_history, 1.0),
        Template("m_problem", _problem, 1.6),
        Template("m_med", _medication, 1.4),
        Template("m_dcmed", _discharge_medication, 1.6),
        Template("m_vitals", _vitals_line, 1.0),
        Template("m_labs", _labs_line, 1.0, phi_bearing=True),  # a date
        Template("m_exam", _exam, 2.0),
        Template("m_imaging", _imaging, 0.7, phi_bearing=True),  # a date
        Template("m_followup", _followup, 0.5, phi_bearing=True),  # the physician
        Template("m_course", _course, 1.0),
        Template("m_social", _social, 0.5, phi_bearing=True),  # the state
        Template("m_allergy", _allergies, 0.4),
    ),
)


# PHI templates: sentences with labelled PHI entities, for the d-exposure tagger's notes


def phi_sentence(rng: random.Random, p: PhiPatient, world: PhiWorld, phrase: tuple[list[str], int]) -> list:
    """One sentence of PHI templates as segments (`mlmia.world.phi_entities`), drawn by weight."""
    he, his, man, _, title = pronouns(p.facts.sex)
    f = p.facts
    choices = [
        (
            1.0,
            lambda: ["Admission Date:", date_entity(rng, p, "iso", 0), "Discharge Date:", date_entity(rng, p, "iso")],
        ),
        (0.8, lambda: ["Name:", entity("PERSON", f"{p.first} {p.last}", "surname"), f"Unit No: {f.mrn}"]),
        (
            1.0,
            lambda: [
                title,
                entity("PERSON", p.last, "surname"),
                f"is a {f.age} year old {man} transferred from",
                entity("ORGANIZATION", p.transfer[0], "place"),
                f"with {f.complaint} .",
            ],
        ),
        (
            1.0,
            lambda: [
                "Followup Instructions: please follow up with Dr.",
                entity("PERSON", p.doctor, "surname"),
                "at",
                entity("ORGANIZATION", p.hospital[0], "place"),
                f"in {rng.randint(1, 6)} weeks .",
            ],
        ),
        (
            1.0,
            lambda: [
                f"Social History: lives {pick(rng, ['alone', 'with family', f'with {his} {p.relative}'])} in",
                city(p.city),
                ",",
                entity("LOCATION", p.state),
                f", {pick(rng, ['denies tobacco', 'former smoker', 'smokes 1 ppd', 'quit tobacco 10 years ago'])} .",
            ],
        ),
        (0.6, lambda: ["Address:", entity("LOCATION", p.street), ",", city(p.city), ",", entity("LOCATION", p.state)]),
        (
            1.0,
            lambda: [
                f"{he.capitalize()} was transferred to us from",
                entity("ORGANIZATION", p.transfer[1], "place"),
                "for further management .",
            ],
        ),
        (
            0.7,
            lambda: [
                f"{his.capitalize()} {p.relative}",
                entity("PERSON", p.relative_first),
                "called from",
                city(p.moved_from),
                "to discuss the plan .",
            ],
        ),
        (
            0.8,
            lambda: [
                pick(rng, ["CXR", "CT chest", "CT head", "RUQ US", "MRI"]),
                "on",
                date_entity(rng, p, "iso"),
                f"showed {pick(rng, f.findings)} .",
            ],
        ),
        (
            0.6,
            lambda: [
                "Dictated By:",
                entity("PERSON", f"{p.doctor_first} {p.doctor}", "surname"),
                ", MD on",
                date_entity(rng, p, "iso"),
            ],
        ),
        (
            0.8,
            lambda: [
                f"{he.capitalize()} was seen by Dr.",
                entity("PERSON", p.doctor, "surname"),
                f"in the {pick(rng, f.services)} clinic at",
                entity("ORGANIZATION", p.hospital[1], "place"),
                "on",
                date_entity(rng, p, "iso"),
                ".",
            ],
        ),
        (0.5, lambda: [f"{he.capitalize()} recently moved from", city(p.moved_from), "to", city(p.city), "."]),
        (0.6, lambda: fill_phrase(phrase, phrase_filler(rng, world))),
    ]
    return pick(rng, [c for _, c in choices], [w for w, _ in choices])()
