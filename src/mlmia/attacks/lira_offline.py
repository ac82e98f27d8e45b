"""Offline LiRA: the target's energy against the energies of reference models trained without the sample."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.core.errors import UserError

#: how σ is estimated: from each sample's own references, or one pooled over all samples
VARIANCES = ("per_sample", "global")


def _ids(table: pd.DataFrame) -> list:
    return table["sample_id"].tolist() if "sample_id" in table.columns else list(table.index)


def check_params(attack: str, params: dict) -> tuple[str, float]:
    """(variance, σ floor) of a LiRA attack's parameters, checked."""
    variance = params["variance"]
    if variance not in VARIANCES:
        raise UserError(f"config key attacks.{attack}.variance: use one of {', '.join(VARIANCES)}, got {variance!r}")
    try:
        floor = float(params["min_sigma"])
    except (TypeError, ValueError):
        floor = float("nan")
    if not floor > 0:
        raise UserError(
            f"config key attacks.{attack}.min_sigma: a positive number is needed, got {params['min_sigma']!r}"
        )
    return variance, floor


def reference_sides(table: pd.DataFrame, attack: str, need_in: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each row's reference energies split by membership: (OUT lists, IN lists). A row with no
    OUT reference (with `need_in`, no IN reference) is a UserError naming the sample."""
    outs, ins = [], []
    for sid, energies, member in zip(_ids(table), table["references_energy"].tolist(), table["references_in"].tolist()):
        energies = np.asarray(energies if energies is not None else [], dtype=float).reshape(-1)
        member = np.asarray(member if member is not None else [], dtype=bool).reshape(-1)
        if energies.size != member.size:
            raise UserError(f"attack {attack}: sample {sid}: references_energy and references_in differ in length")
        if not np.isfinite(energies).all():
            raise UserError(f"attack {attack}: sample {sid}: a reference energy is not a finite number")
        out, inside = energies[~member], energies[member]
        if out.size == 0:
            raise UserError(f"attack {attack}: sample {sid} has no OUT reference (every reference was trained on it)")
        if need_in and inside.size == 0:
            raise UserError(f"attack {attack}: sample {sid} has no IN reference (no reference was trained on it)")
        outs.append(out)
        ins.append(inside)
    return outs, ins


def gaussian_fit(
    groups: list[np.ndarray], variance: str, floor: float, attack: str, side: str, ids: list
) -> tuple[np.ndarray, np.ndarray]:
    """(μ, σ) per row of one side's reference energies: μ the row's mean; σ the row's sample
    standard deviation (``per_sample``, at least two references needed) or the pooled
    within-row standard deviation of all rows (``global``: sqrt(Σ_rows Σ (e − μ_row)² /
    Σ_rows (n_row − 1))); σ at least `floor`."""
    mu = np.array([g.mean() for g in groups], dtype=float)
    if variance == "per_sample":
        for sid, g in zip(ids, groups):
            if g.size < 2:
                raise UserError(
                    f"attack {attack}: sample {sid} has {g.size} {side} reference; variance per_sample needs "
                    "at least 2 (use variance: global)"
                )
        sigma = np.array([g.std(ddof=1) for g in groups], dtype=float)
    else:
        dof = sum(g.size - 1 for g in groups)
        if dof == 0:
            raise UserError(
                f"attack {attack}: no sample has two {side} references, so the global variance cannot be estimated "
                "(it needs more reference models)"
            )
        pooled = float(np.sqrt(sum(float(np.square(g - g.mean()).sum()) for g in groups) / dof))
        sigma = np.full(len(groups), pooled)
    return mu, np.maximum(sigma, floor)


class LiraOffline(Attack):
    """(E(s; θ) − μ_out(s)) / σ_out(s): how many standard deviations the target's energy of a
    sample lies from the energies of the reference models not trained on it (OUT:
    ``references_in`` False).

    Carlini, Chien, Nasr, Song, Terzis and Tramèr, "Membership Inference Attacks From First
    Principles", IEEE S&P 2022 (LiRA, offline variant): the OUT distribution of the
    per-sample statistic is fitted with a Gaussian N(μ_out, σ_out²) and the target's value is
    tested one-sided against it; the p-value is a monotone function of the z-score computed
    here, so the two rank samples alike. The paper's statistic is the logit φ(p) = log(p /
    (1 − p)) of the model's confidence p in the true label, chosen because it is close to
    Gaussian across models; here it is the energy E (mean cross-entropy per masked token, a
    per-sample loss), which is already on a log-likelihood scale: it is minus the log of the
    geometric-mean token probability p̄, and for the small p̄ of a text log(p̄ / (1 − p̄)) ≈
    log p̄ = −E, so no further scaling is needed (and the energy is an average over tokens
    and patterns, close to Gaussian across models).

    μ_out is the mean of the sample's OUT energies. Parameter `variance`: ``global``
    (default; one σ_out for all samples, pooled from each sample's OUT energies around its
    own mean, over every row of the attack table: the paper's choice when there are few
    reference models) or ``per_sample`` (each sample's own sample standard deviation; at
    least two OUT references each). `min_sigma` (default 1e-3, in nats per token) floors σ
    so that references that agree exactly do not divide by zero. A sample with no OUT
    reference is an error. A member's energy sits below what models without it give:
    lower means "member"."""

    name = "lira_offline"
    label = "LiRA (offline)"
    inputs = {"target": ("energy",), "references": ("energy",)}
    lower_is_member = True
    aggregates = True
    parameters = {"variance": "global", "min_sigma": 1e-3}

    def reads_other_rows(self) -> bool:
        return self.params["variance"] == "global"  # σ pooled over the table's rows

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        variance, floor = check_params(self.name, self.params)
        outs, _ = reference_sides(table, self.name, need_in=False)
        mu, sigma = gaussian_fit(outs, variance, floor, self.name, "OUT", _ids(table))
        return (table["target_energy"].to_numpy(dtype=float) - mu) / sigma
