"""Offline LiRA: the target's energy against the energies of reference models trained without the sample."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import check_lira_params, gaussian_fit, lira_references_lack, reference_sides, row_ids


class LiraOffline(Attack):
    """(E(s; θ) − μ_out(s)) / σ_out(s): how many standard deviations the target's energy of a
    sample lies from the energies of the reference models not trained on it (OUT:
    ``references_in`` False).

    Carlini, Chien, Nasr, Song, Terzis and Tramèr, "Membership Inference Attacks From First
    Principles", IEEE S&P 2022 (LiRA, offline variant): the OUT distribution of the
    per-sample statistic is fitted with a Gaussian N(μ_out, σ_out²) and the target's value is
    tested one-sided against it; the p-value, Φ((E − μ_out) / σ_out) (how likely a model not
    trained on the sample gives an energy this low), is Φ of the z-score computed here, so
    the two rank samples alike. The paper's statistic is the logit φ(p) = log(p /
    (1 − p)) of the model's confidence p in the true label, chosen because it is close to
    Gaussian across models; here it is the energy E (mean cross-entropy per masked token, a
    per-sample loss), which is already on a log-likelihood scale: it is minus the log of the
    geometric-mean token probability p̄, and for the small p̄ of a text log(p̄ / (1 − p̄)) ≈
    log p̄ = −E, so no further scaling is needed (and the energy is an average over tokens
    and patterns, close to Gaussian across models).

    The Gaussian is fitted as tensorflow_privacy's `compute_score_lira` fits it with
    ``median_or_mean="mean"`` (`mlmia.attacks.shared.gaussian_fit`; the paper's Algorithm 1
    takes the mean, the authors' code the median by default): μ_out is the mean of the
    sample's OUT energies. Parameter `variance`: ``global`` (default; its ``fix_variance``:
    one σ_out for all samples, the spread of each sample's OUT energies around its own mean
    over every row of the attack table, the paper's choice when there are few reference
    models) or ``per_sample`` (each sample's own standard deviation, ddof 0 as numpy's; at
    least two OUT references each). `min_sigma` (default 1e-3, in nats per token) floors σ
    so that references that agree exactly do not divide by zero. A sample with no OUT
    reference is an error. The reference-definition test (tests/test_attack_references.py)
    follows the paper's one-sided test with that fit. A member's energy sits below what
    models without it give: lower means "member"."""

    name = "lira_offline"
    label = "LiRA (offline)"
    inputs = {"target": ("energy",), "references": ("energy",)}
    lower_is_member = True
    aggregates = True
    parameters = {"variance": "global", "min_sigma": 1e-3}

    def check_params(self) -> None:
        check_lira_params(self.name, self.params)

    def reads_other_rows(self) -> bool:
        return self.params["variance"] == "global"  # σ pooled over the table's rows

    def references_lack(self, count: int, online: bool) -> str | None:
        return lira_references_lack(self.name, self.params, count, online, ("OUT",))

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        variance, floor = check_lira_params(self.name, self.params)
        outs, _ = reference_sides(table, self.name, need_in=False)
        mu, sigma = gaussian_fit(outs, variance, floor, self.name, "OUT", row_ids(table))
        return (table["target_energy"].to_numpy(dtype=float) - mu) / sigma
