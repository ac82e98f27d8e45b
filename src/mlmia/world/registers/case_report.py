"""The case-report register (the `domain` corpus, the stand-in for PubMed): patients written up
in case-report style, and abstract sentences about diagnoses and drugs of the lexicon."""

from __future__ import annotations

import random

from mlmia.world.lexicon import OUTCOMES, Lexicon
from mlmia.world.patients import pick, pronouns
from mlmia.world.registers.template import Register, Template, any_diagnosis, labs, vitals


def _case_opening(rng, p):
    he, his, man, *_ = pronouns(p.sex)
    return (
        f"We report a {p.age}-year-old {man} who presented with {p.complaint} and was found to have "
        f"{pick(rng, p.rare_dx).lower()}."
    )


def _history(rng, p):
    dx = rng.sample(p.common_dx + p.rare_dx, 2)
    return f"The patient had a history of {dx[0].lower()} and {dx[1].lower()}."


def _treatment(rng, p):
    m = pick(rng, p.meds)
    return (
        f"Treatment with {m.drug} at a dose of {m.dose} mg {m.freq[3]} was associated with "
        f"{pick(rng, ['clinical improvement', 'partial remission', 'resolution of symptoms', 'no benefit'])}."
    )


def _vitals_line(rng, p):
    v = vitals(rng)
    return (
        f"On examination, the blood pressure was {v['sbp']}/{v['dbp']} mm Hg, the heart rate was {v['hr']} "
        f"beats per minute and the temperature was {v['t']} degrees."
    )


def _labs_line(rng, p):
    v = labs(rng)
    return (
        f"Laboratory studies showed a sodium level of {v['na']} mmol/l, potassium of {v['k']} mmol/l, "
        f"creatinine of {v['cr']} mg/dl and a white cell count of {v['wbc']}."
    )


def _imaging(rng, p):
    return (
        f"{pick(rng, ['Computed tomography', 'Chest radiography', 'Magnetic resonance imaging', 'Ultrasonography'])} "
        f"revealed {pick(rng, p.findings)}."
    )


def _course(rng, p):
    m = pick(rng, p.meds)
    return f"After {rng.randint(2, 21)} days of {m.drug}, the {any_diagnosis(rng, p).lower()} {pick(rng, OUTCOMES)}."


def _exam(rng, p):
    return pick(
        rng,
        [
            "Physical examination was otherwise unremarkable.",
            "The lungs were clear on auscultation.",
            "Cardiac examination revealed a regular rhythm without murmurs.",
            "The abdomen was soft and nontender.",
            "Neurological examination was normal.",
            "There was no peripheral edema.",
        ],
    )


REGISTER = Register(
    opening=Template("d_case", _case_opening),
    templates=(
        Template("d_history", _history, 1.0),
        Template("d_treat", _treatment, 1.6),
        Template("d_vitals", _vitals_line, 1.0),
        Template("d_labs", _labs_line, 1.0),
        Template("d_imaging", _imaging, 0.8),
        Template("d_course", _course, 1.2),
        Template("d_exam", _exam, 1.5),
    ),
)


def abstract_sentence(rng: random.Random, lex: Lexicon) -> str:
    """One sentence of an abstract (a cohort, a finding, a conclusion) on diagnoses and drugs of `lex`."""
    dx = pick(rng, lex.rare_dx).lower() if rng.random() < 0.6 else pick(rng, lex.common_dx, lex.w_common_dx).lower()
    dx2 = pick(rng, lex.common_dx, lex.w_common_dx).lower()
    drug = pick(rng, lex.rare_drugs) if rng.random() < 0.4 else pick(rng, lex.common_drugs, lex.w_common_drugs)
    n = rng.randint(24, 2400)
    k = rng.randint(3, max(4, n // 3))
    forms = [
        f"Among {n} patients with {dx}, {k} ({100 * k / n:.1f}%) received {drug}.",
        f"{dx.capitalize()} is an uncommon condition that may present with {dx2}.",
        f"These findings suggest that {drug} may be beneficial in patients with {dx}.",
        f"We conducted a retrospective cohort study of {n} adults with {dx} treated with {drug}.",
        f"The incidence of {dx2} was higher in patients receiving {drug} (hazard ratio {rng.uniform(0.4, 3.2):.2f}).",
        f"In conclusion, {dx} should be considered in the differential diagnosis of {dx2}.",
        f"{drug.capitalize()} reduced the risk of {dx2} by {rng.randint(5, 60)}% compared with placebo.",
    ]
    return pick(rng, forms)
