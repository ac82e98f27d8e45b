"""A sentence template and a register's set of them, and the random values templates share.

Whether a template writes PHI (a name, a place or a date of the patient, the classes the
d-exposure tagger labels) is part of its record: the PHI-labelled notes (`mlmia.world.phi`) take
their all-O sentences from the templates without it, so the flag, not a template's name, decides
which sentences are PHI-free.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from mlmia.world.patients import Patient, note_date, pick, render_date


@dataclass(frozen=True)
class Template:
    """`render(rng, patient)` writes one sentence; `name` is the sample table's `kind`,
    `weight` its share of the draws, `phi_bearing` whether it writes PHI."""

    name: str
    render: Callable[[random.Random, Patient], str]
    weight: float = 1.0
    phi_bearing: bool = False


@dataclass(frozen=True)
class Register:
    """A register's templates: `opening`, a patient's first sentence, then `templates` by weight."""

    opening: Template
    templates: tuple[Template, ...]

    def phi_free(self) -> list[Template]:
        """The templates that write no PHI, in order."""
        return [t for t in self.templates if not t.phi_bearing]


def number(rng: random.Random, lo: float, hi: float, decimals: int = 0) -> str:
    value = rng.uniform(lo, hi)
    return f"{value:.{decimals}f}" if decimals else str(int(round(value)))


def vitals(rng: random.Random) -> dict[str, str]:
    return dict(
        t=number(rng, 96.5, 101.8, 1),
        sbp=number(rng, 88, 182),
        dbp=number(rng, 48, 104),
        hr=number(rng, 52, 128),
        rr=number(rng, 12, 28),
        o2=number(rng, 88, 100),
    )


def labs(rng: random.Random) -> dict[str, str]:
    return dict(
        wbc=number(rng, 2.5, 19.5, 1),
        hgb=number(rng, 6.8, 15.9, 1),
        hct=number(rng, 21, 47, 1),
        plt=number(rng, 45, 480),
        na=number(rng, 124, 148),
        k=number(rng, 2.9, 5.9, 1),
        cl=number(rng, 92, 112),
        hco3=number(rng, 16, 32),
        bun=number(rng, 6, 88),
        cr=number(rng, 0.5, 4.8, 1),
        glu=number(rng, 68, 390),
    )


def any_diagnosis(rng: random.Random, p: Patient) -> str:
    return pick(rng, p.rare_dx + p.common_dx)


def stay_date(rng: random.Random, p: Patient, form: str) -> str:
    """A date of `p`'s stay (`note_date`) written in `form` (`render_date`)."""
    return render_date(*note_date(rng, p.admit), form)
