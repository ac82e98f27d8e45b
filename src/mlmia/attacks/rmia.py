"""RMIA (offline): the target's likelihood ratio of a sample compared with the population's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import reference_sides, row_ids
from mlmia.core.errors import UserError


def _number(attack: str, key: str, value, ok, need: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not ok(number):
        raise UserError(f"config key attacks.{attack}.{key}: {need} is needed, got {value!r}")
    return number


class Rmia(Attack):
    """The share of population samples z with LR(x) / LR(z) ≥ γ, where LR(x) = Pr(x | θ) /
    Pr(x) is the target's likelihood of x over its probability under models not trained on it.

    Zarifzadeh, Liu and Shokri, "Low-Cost High-Power Membership Inference Attacks", ICML 2024
    (RMIA), offline form:

    - Pr(x | θ) := exp(−E(x; θ)), the geometric-mean probability per masked token of the text
      under the target (E: the energy, mean cross-entropy per masked token);
    - Pr(x) := ((1 + a) / 2) · mean_OUT exp(−E(x; θ_ref)) + (1 − a) / 2, the paper's linear
      approximation of the average over IN and OUT models from the OUT references only
      (``references_in`` False; a sample with none is an error). The paper chooses `a` per
      data set by attacking one reference model with the others; default ``a: 0.3``, the
      default `offline_a` of the authors' implementation (Privacy Meter). With a = 1, Pr(x)
      is the OUT models' mean;
    - the population samples z are the attack table's rows of role ``population`` (each
      with its own LR(z) from its own OUT references); statistic(x) = |{z : LR(x) / LR(z) ≥
      γ}| / |Z|, computed on log LR. A population row is compared with the other population
      rows only (leave one out), so that its statistic is distributed as a fresh
      non-member's; this needs at least two population rows. Parameter `gamma` (γ, default 1).

    The comparison set Z is the attack table's population rows as they are: the patient
    bootstrap resamples the statistics computed once on the whole table, not Z. Higher
    means "member"."""

    name = "rmia"
    label = "RMIA (offline)"
    inputs = {"target": ("energy",), "references": ("energy",)}
    lower_is_member = False
    aggregates = True
    row_local = False
    parameters = {"a": 0.3, "gamma": 1.0}

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        a = _number(self.name, "a", self.params["a"], lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")
        gamma = _number(self.name, "gamma", self.params["gamma"], lambda v: 0.0 < v < np.inf, "a positive number")
        if "role" not in table.columns:
            raise UserError(f"attack {self.name}: the attack table has no role column (population rows are needed)")
        population = np.flatnonzero(table["role"].to_numpy() == "population")
        if len(population) < 2:
            raise UserError(
                f"attack {self.name}: the attack table has {len(population)} population rows; at least 2 are needed"
            )
        outs, _ = reference_sides(table, self.name, need_in=False)
        prior = np.array([np.exp(-g).mean() for g in outs], dtype=float)
        marginal = (1.0 + a) / 2.0 * prior + (1.0 - a) / 2.0
        if not (marginal > 0).all():  # a = 1 and every OUT energy so large that exp underflows
            sid = row_ids(table)[int(np.flatnonzero(~(marginal > 0))[0])]
            raise UserError(f"attack {self.name}: sample {sid}: Pr(x) underflows to 0 (OUT energies too large)")
        log_lr = -table["target_energy"].to_numpy(dtype=float) - np.log(marginal)
        reference = np.sort(log_lr[population])
        # LR(x) / LR(z) >= gamma  <=>  log LR(z) <= log LR(x) - log gamma
        counts = np.searchsorted(reference, log_lr - np.log(gamma), side="right").astype(float)
        share = counts / len(population)
        self_counted = 0.0 >= np.log(gamma)  # a population row always meets itself with ratio 1
        share[population] = (counts[population] - float(self_counted)) / (len(population) - 1)
        return share
