"""An experiment: what one column of a table measures."""

from __future__ import annotations

from dataclasses import dataclass, fields

from mlmia.core.errors import UserError
from mlmia.terms.scores import ENERGY_KINDS as ENERGIES

LEVELS = ("sample", "patient")
#: the suffix of a sample table's neighbours (mlmia.scoring.neighbours): "clinical~neighbours"
NEIGHBOUR_SET = "~neighbours"


@dataclass(frozen=True)
class Experiment:
    """A target (and a reference) scored on one sample table, members against the
    non-members of one source, thresholds from the population of another, on one length
    bucket (None: all), one energy kind, at sample or patient level. A spec may list
    population sources in order of preference; the study chooses one before it builds the
    experiment (`mlmia.study.study.Study`), so `population` is always one source. Every field is
    given: a validated tables spec carries the schema's defaults (`experiments.<name>`)."""

    name: str
    dataset: str
    target: str
    reference: str | None
    nonmembers: str
    population: str
    energy: str
    length: str | None
    level: str
    #: "pool": the configured reference pool (LiRA, RMIA); None: no reference models
    references: str | None
    #: whether the attacks read the target's energies on each sample's neighbours
    neighbours: bool

    @classmethod
    def from_config(cls, name: str, spec: dict) -> Experiment:
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = set(spec) - known
        if unknown:
            raise UserError(f"experiment {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
        # a validated entry has every key (the schema's defaults written in)
        missing = sorted(known - set(spec))
        if missing:
            raise UserError(f"experiment {name!r}: missing key(s) {', '.join(missing)}")
        experiment = cls(name=name, **spec)
        if experiment.reference is not None and experiment.reference == experiment.target:
            raise UserError(
                f"experiment {name!r}: target and reference are the same model {experiment.target!r} "
                "(their energies would cancel: every likelihood ratio 0)"
            )
        if experiment.level not in LEVELS:
            raise UserError(f"experiment {name!r}: level {experiment.level!r} is not one of {', '.join(LEVELS)}")
        if experiment.references not in (None, "pool"):
            raise UserError(f"experiment {name!r}: references must be 'pool' (the configured reference models)")
        if experiment.energy not in ENERGIES:
            raise UserError(f"experiment {name!r}: energy {experiment.energy!r} is not one of {', '.join(ENERGIES)}")
        return experiment

    @property
    def models(self) -> dict[str, str]:
        """The models by the role they play for an attack (`mlmia.attacks.base.MODEL_ROLES`)."""
        return {role: name for role, name in (("target", self.target), ("reference", self.reference)) if name}

    @property
    def neighbour_set(self) -> str:
        """The sample table of this experiment's neighbour texts."""
        return f"{self.dataset}{NEIGHBOUR_SET}"

    def selection(self) -> dict:
        """Which samples of the sample table the experiment takes (`build_attack_table`)."""
        return {"nonmembers": self.nonmembers, "population": self.population, "length": self.length}
