"""One attack table per experiment: each sample's role and its target and reference energy."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mlmia.errors import UserError
from mlmia.roles import ROLES

ATTACK_COLUMNS = ["sample_id", "group_id", "role", "source", "length", "n_tokens", "target", "reference", "stat"]


@dataclass(frozen=True)
class Experiment:
    """What one column of a paper table measures."""

    name: str
    dataset: str
    target: str
    reference: str
    nonmembers: str
    population: str
    energy: str = "masked"
    length: str | None = None
    level: str = "sample"

    @classmethod
    def from_config(cls, name: str, spec: dict) -> Experiment:
        known = set(cls.__dataclass_fields__) - {"name"}
        unknown = set(spec) - known
        if unknown:
            raise UserError(f"experiment {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
        return cls(name=name, **spec)


def _energies(scores: pd.DataFrame, model: str, energy: str, where: str) -> pd.DataFrame:
    missing = [c for c in ("sample_id", "energy") if c not in scores.columns]
    if missing:
        raise UserError(f"{where}: scores of model {model!r} lack column(s) {', '.join(missing)}")
    if "energy_kind" in scores.columns and not (scores["energy_kind"] == energy).all():
        raise UserError(f"{where}: scores of model {model!r} are not all of energy kind {energy!r}")
    if scores["sample_id"].duplicated().any():
        raise UserError(f"{where}: scores of model {model!r} repeat sample_id {scores['sample_id'][scores['sample_id'].duplicated()].iloc[0]!r}")
    return scores.set_index("sample_id")


def build_attack_table(
    manifest: pd.DataFrame, target_scores: pd.DataFrame, reference_scores: pd.DataFrame, experiment: Experiment
) -> pd.DataFrame:
    """Select the experiment's samples from the manifest and join both models' energies."""
    where = f"experiment {experiment.name!r}"
    for column in ("sample_id", "group_id", "role", "source"):
        if column not in manifest.columns:
            raise UserError(f"{where}: sample manifest lacks column {column!r}")
    selected = manifest
    if experiment.length is not None:
        if "length" not in manifest.columns:
            raise UserError(f"{where}: length {experiment.length!r} asked for but the samples have no length bucket")
        selected = selected[selected["length"] == experiment.length]
    keep = (
        selected["role"].isin(["member", "member_heldin"])
        | ((selected["role"] == "nonmember") & (selected["source"] == experiment.nonmembers))
        | ((selected["role"] == "population") & (selected["source"] == experiment.population))
    )
    selected = selected[keep]
    for role in ROLES:
        if not (selected["role"] == role).any():
            detail = {"nonmember": f" from source {experiment.nonmembers!r}", "population": f" from source {experiment.population!r}"}
            raise UserError(
                f"{where}: role {role!r}{detail.get(role, '')} has no samples"
                + (f" of length {experiment.length!r}" if experiment.length else "")
            )
    target = _energies(target_scores, experiment.target, experiment.energy, where)
    reference = _energies(reference_scores, experiment.reference, experiment.energy, where)
    for model, scores in ((experiment.target, target), (experiment.reference, reference)):
        absent = ~selected["sample_id"].isin(scores.index)
        if absent.any():
            raise UserError(
                f"{where}: model {model!r} has no {experiment.energy} score for sample {selected['sample_id'][absent].iloc[0]!r} "
                f"({int(absent.sum())} missing)"
            )
    table = selected.reset_index(drop=True).copy()
    for column in ("length",):
        if column not in table.columns:
            table[column] = None
    table["n_tokens"] = target["n_tokens"].reindex(table["sample_id"]).to_numpy() if "n_tokens" in target else pd.NA
    table["target"] = target["energy"].reindex(table["sample_id"]).to_numpy(dtype=float)
    table["reference"] = reference["energy"].reindex(table["sample_id"]).to_numpy(dtype=float)
    table["stat"] = table["target"] - table["reference"]
    return table[ATTACK_COLUMNS]
