"""Online LiRA: the target's energy under Gaussians fitted to IN and to OUT reference models."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import (
    audited_rows,
    check_lira_params,
    gaussian_fit,
    lira_references_lack,
    reference_sides,
    row_ids,
)


def log_normal(x: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """log N(x; μ, σ²)."""
    return -0.5 * np.square((x - mu) / sigma) - np.log(sigma) - 0.5 * np.log(2.0 * np.pi)


class LiraOnline(Attack):
    """log N(E; μ_in, σ_in²) − log N(E; μ_out, σ_out²): the log-likelihood ratio of the
    target's energy E = E(s; θ) of a sample under Gaussians fitted to the energies of the
    reference models trained on it (IN: ``references_in`` True) and of those not (OUT).

    Carlini, Chien, Nasr, Song, Terzis and Tramèr, "Membership Inference Attacks From First
    Principles", IEEE S&P 2022 (LiRA, online variant, Algorithm 1); the reference-definition
    test (tests/test_attack_references.py) follows tensorflow_privacy's `compute_score_lira`
    (``option="both"``, ``median_or_mean="mean"``, whose score is this one negated). As in the
    offline variant (`mlmia.attacks.lira_offline`, which says why the energy replaces the
    paper's logit-scaled confidence) μ_in and μ_out are the means of the sample's IN and OUT
    energies. Parameter `variance`: ``global`` (default; its ``fix_variance``: σ_in and
    σ_out each the spread of every sample's energies around its own mean, over every scored
    row of the attack table: the paper's choice when there are few reference models) or
    ``per_sample`` (each sample's own standard deviations, ddof 0; at least two IN and two
    OUT references each); `min_sigma` (default 1e-3) floors both. Every member and
    non-member needs at least one IN and one OUT reference; held-in and population rows
    (never trained on by a reference) get no statistic (NaN; `scored_roles`: the metrics
    drop them, so no population threshold is defined for this attack). Higher means
    "member"."""

    name = "lira_online"
    label = "LiRA (online)"
    inputs = {"target": ("energy",), "references": ("energy",)}
    lower_is_member = False
    aggregates = True
    scored_roles = ("member", "nonmember")
    parameters = {"variance": "global", "min_sigma": 1e-3}

    def check_params(self) -> None:
        check_lira_params(self.name, self.params)

    def reads_other_rows(self) -> bool:
        return self.params["variance"] == "global"  # σ pooled over the table's rows

    def references_lack(self, count: int, online: bool) -> str | None:
        return lira_references_lack(self.name, self.params, count, online, ("IN", "OUT"))

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        # References train on halves of the audited (member and non-member) patients only:
        # held-in and population rows have no IN reference, and no online statistic (NaN;
        # thresholds from the population are not defined for this attack).
        audited = audited_rows(table)
        out = np.full(len(table), np.nan)
        if not audited.any():
            return out
        part = table[audited]
        variance, floor = check_lira_params(self.name, self.params)
        outs, ins = reference_sides(part, self.name, need_in=True)
        ids = row_ids(part)
        mu_in, sigma_in = gaussian_fit(ins, variance, floor, self.name, "IN", ids)
        mu_out, sigma_out = gaussian_fit(outs, variance, floor, self.name, "OUT", ids)
        energy = part["target_energy"].to_numpy(dtype=float)
        out[audited] = log_normal(energy, mu_in, sigma_in) - log_normal(energy, mu_out, sigma_out)
        return out
