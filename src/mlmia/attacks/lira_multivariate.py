"""Multivariate LiRA: the target's per-slot losses of a sample against multivariate Gaussians fitted
to the reference models' losses at the same slots (offline: OUT references; online: IN and OUT)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.linalg import solve_triangular
from scipy.optimize import nnls

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import (
    audited_rows,
    check_lira_params,
    lira_references_lack,
    reference_token_lists,
    row_ids,
    token_lists,
)
from mlmia.core.errors import UserError

#: how Σ is estimated (parameter `covariance`)
COVARIANCES = ("pooled", "isotropic", "diagonal", "shrinkage", "patterns")
#: the shrinkage intensity of `shrinkage` and `patterns` (parameter `shrinkage`)
SHRINKAGES = ("oas", "ledoit_wolf")
#: the least shrinkage intensity: with fewer references than slots the sample correlation is
#: singular, and an intensity of 0 (which Ledoit-Wolf's estimate can reach) would leave it so
MIN_INTENSITY = 1e-3
_LOG_2PI = math.log(2.0 * math.pi)


# ------------------------------------------------------------------ covariance estimators


def ledoit_wolf_intensity(y: np.ndarray) -> float:
    """Ledoit and Wolf's shrinkage intensity of the centred rows `y` (n x p) toward (tr S / p) I,
    S = yᵀy / n: ρ = min(b̄², d²) / d² with d² = ‖S − (tr S / p) I‖² and b̄² = (1/n²) Σ_k ‖y_k y_kᵀ
    − S‖² (Frobenius norms; Ledoit and Wolf, "A well-conditioned estimator for large-dimensional
    covariance matrices", J. Multivariate Analysis 88, 2004, Lemmas 3.2 to 3.4), computed from the
    n x n Gram matrix: Σ_k ‖y_k y_kᵀ − S‖² = Σ_k ‖y_k‖⁴ − n ‖S‖²."""
    n, p = y.shape
    if p == 1:
        return 0.0  # one slot: S is its own target
    gram = y @ y.T
    s_sq = float(np.sum(gram**2)) / n**2  # ‖S‖², as ‖yyᵀ‖ = ‖yᵀy‖
    trace = float(np.trace(gram)) / n
    d2 = s_sq - trace**2 / p
    b2 = min((float(np.sum(np.diag(gram) ** 2)) / n - s_sq) / n, d2)
    return 0.0 if d2 <= 0 or b2 <= 0 else b2 / d2


def oas_intensity(y: np.ndarray) -> float:
    """The oracle-approximating shrinkage intensity of the centred rows `y` (n x p) toward (tr S / p) I:
    min((tr S² + tr² S) / ((n + 1)(tr S² − tr² S / p)), 1), Chen, Wiesel, Eldar and Hero, "Shrinkage
    algorithms for MMSE covariance estimation", IEEE Trans. Signal Processing 58(10), 2010, eq. 23
    as scikit-learn's `oas` computes it (without the paper's 2/p terms, small where p is large)."""
    n, p = y.shape
    if p == 1:
        return 0.0
    gram = y @ y.T
    s_sq = float(np.sum(gram**2)) / n**2
    trace = float(np.trace(gram)) / n
    den = (n + 1) * (s_sq - trace**2 / p)
    return 1.0 if den <= 0 else min((s_sq + trace**2) / den, 1.0)


INTENSITIES = {"oas": oas_intensity, "ledoit_wolf": ledoit_wolf_intensity}


class Gaussian:
    """N(μ, Σ) with Σ = D R D: μ the references' mean vector, D = diag(σ) the per-slot standard
    deviations (ddof 0, at least the floor), R a correlation matrix (I for a diagonal Σ) kept as its
    Cholesky factor."""

    def __init__(self, mu: np.ndarray, sigma: np.ndarray, chol: np.ndarray | None = None) -> None:
        self.mu, self.sigma, self.chol = mu, sigma, chol

    @property
    def covariance(self) -> np.ndarray:
        r = np.eye(self.mu.size) if self.chol is None else self.chol @ self.chol.T
        return self.sigma[:, None] * r * self.sigma[None, :]

    def whitened(self, z: np.ndarray) -> np.ndarray:
        """L⁻¹ z for standardised residuals z = (s − μ) / σ (R = L Lᵀ)."""
        if self.chol is None:
            return z
        return solve_triangular(self.chol, z, lower=True)

    def log_density(self, s: np.ndarray) -> float:
        """log N(s; μ, Σ) = −½ ‖L⁻¹ z‖² − Σ log σ_j − Σ log L_jj − (p/2) log 2π."""
        z = (s - self.mu) / self.sigma
        w = self.whitened(z)
        log_det = float(np.sum(np.log(self.sigma)))
        if self.chol is not None:
            log_det += float(np.sum(np.log(np.diag(self.chol))))
        return -0.5 * float(w @ w) - log_det - 0.5 * s.size * _LOG_2PI


def diagonal_fit(x: np.ndarray, floor: float, sigma: float | None = None) -> Gaussian:
    """N(mean, diag(σ_j²)) of the reference rows `x` (n x p): σ_j each slot's own standard deviation
    (ddof 0), or `sigma` for every slot (the pooled one); at least `floor`."""
    spread = x.std(axis=0) if sigma is None else np.full(x.shape[1], sigma)
    return Gaussian(x.mean(axis=0), np.maximum(spread, floor))


def shrunk_fit(x: np.ndarray, floor: float, shrinkage: str) -> Gaussian:
    """N(mean, D R D) of the reference rows `x` (n x p): the slots standardised by their own standard
    deviations σ_j (ddof 0, at least `floor`), their sample covariance S shrunk toward the identity
    with the intensity ρ of `shrinkage` (at least `MIN_INTENSITY`): R = (1 − ρ) S + ρ I, its
    diagonal then set to 1. Where no σ_j is floored S_jj = 1 and tr S / p = 1, so R is scikit-learn's
    estimator of the standardised slots (target (tr S / p) I) and D R D the sample covariance shrunk
    toward its diagonal; a floored slot (references that agree) keeps Σ_jj = `floor`², and
    references that agree in every slot give Σ = `floor`² I."""
    mu = x.mean(axis=0)
    sigma = np.maximum(x.std(axis=0), floor)
    y = (x - mu) / sigma
    n, p = y.shape
    rho = max(INTENSITIES[shrinkage](y), MIN_INTENSITY)
    r = (1.0 - rho) * (y.T @ y / n)
    r[np.diag_indices(p)] = 1.0
    return Gaussian(mu, sigma, np.linalg.cholesky(r))


def pooled_sigma(groups: list[np.ndarray], attack: str, side: str) -> float:
    """One σ for every slot of every row (``pooled``, the multivariate counterpart of LiRA's
    `fix_variance`): sqrt(Σ_rows Σ_refs Σ_slots (x − μ_row,slot)² / Σ_rows n_row p_row) over one
    side's reference rows (n_row x p_row each); some row needs two references."""
    if not any(g.shape[0] > 1 for g in groups):
        raise UserError(
            f"attack {attack}: no sample has two {side} references, so the global variance cannot be estimated "
            "(it needs more reference models)"
        )
    residuals = sum(float(np.square(g - g.mean(axis=0)).sum()) for g in groups)
    return math.sqrt(residuals / sum(g.size for g in groups))


# ------------------------------------------------------------------ the one-sided offline test


def one_sided_lrt(z: np.ndarray, gaussian: Gaussian) -> tuple[float, float]:
    """(T⁻, T⁺): the likelihood-ratio statistics of N(μ, Σ) against a mean shifted toward lower
    losses (T⁻: mean ≤ μ in every slot) and toward higher ones (T⁺), for standardised residuals
    z = (s − μ) / σ: T⁻ = zᵀR⁻¹z − min_{δ ≥ 0} (z + δ)ᵀR⁻¹(z + δ), T⁺ likewise with z − δ (Kudô, "A
    multivariate analogue of the one-sided test", Biometrika 50, 1963; Perlman, Ann. Math. Statist.
    40, 1969: the chi-bar-squared test). A non-negative least-squares problem in the whitened
    residual; for a diagonal Σ, T⁻ = Σ_{z_j < 0} z_j² and T⁺ = Σ_{z_j > 0} z_j²."""
    if gaussian.chol is None:
        return float(np.sum(np.square(np.minimum(z, 0.0)))), float(np.sum(np.square(np.maximum(z, 0.0))))
    a = solve_triangular(gaussian.chol, np.eye(z.size), lower=True)  # L⁻¹
    w = a @ z
    full = float(w @ w)
    lower = full - nnls(a, -w)[1] ** 2
    higher = full - nnls(a, w)[1] ** 2
    return max(lower, 0.0), max(higher, 0.0)


def root_difference(lower: float, higher: float) -> float:
    """√T⁺ − √T⁻: the evidence that the losses sit above the OUT Gaussian's mean less the evidence
    that they sit below it (lower means member); with one slot, T⁺ = max(z, 0)² and T⁻ = min(z, 0)²,
    it is the z-score z = (s − μ) / σ."""
    return math.sqrt(higher) - math.sqrt(lower)


# ------------------------------------------------------------------ reading the table


def lira_variance(covariance: str) -> str:
    """The univariate LiRA `variance` the estimator corresponds to (for the pool it needs): one σ
    over the rows ("global") or each sample's own ("per_sample")."""
    return "global" if covariance == "pooled" else "per_sample"


def check_params(attack: str, params: dict) -> tuple[str, str, float]:
    """(covariance, shrinkage, σ floor), checked, each refused in one line naming its key."""
    covariance, shrinkage = params["covariance"], params["shrinkage"]
    if covariance not in COVARIANCES:
        raise UserError(
            f"config key attacks.{attack}.covariance: use one of {', '.join(COVARIANCES)}, got {covariance!r}"
        )
    if shrinkage not in SHRINKAGES:
        raise UserError(f"config key attacks.{attack}.shrinkage: use one of {', '.join(SHRINKAGES)}, got {shrinkage!r}")
    _, floor = check_lira_params(attack, {"variance": lira_variance(covariance), "min_sigma": params["min_sigma"]})
    return covariance, shrinkage, floor


def slot_rows(table: pd.DataFrame, column: str, attack: str):
    """Each row's (id, target vector, reference rows (references x slots), IN flags), the losses −log p
    of `column` ("token_logp": every slot of every pattern; "per_pattern": each pattern's mean loss,
    already a loss). Every reference must list as many values as the target: one that does not
    tokenizes the sample otherwise, and its slot j is not the target's slot j
    (`shared.reference_token_lists` refuses it)."""
    sign = -1.0 if column == "token_logp" else 1.0
    targets = token_lists(table, f"target_{column}", attack)
    aligned = reference_token_lists(table, f"references_{column}", attack, targets)
    for sid, target, (matrix, member) in zip(row_ids(table), targets, aligned):
        yield sid, sign * target, sign * matrix, member


def sides(table: pd.DataFrame, column: str, attack: str, need_in: bool):
    """(ids, targets, OUT reference rows, IN reference rows) per row; a row with no OUT reference
    (with `need_in`, no IN one) is refused, naming the sample."""
    ids, targets, outs, ins = [], [], [], []
    for sid, target, matrix, member in slot_rows(table, column, attack):
        if not (~member).any():
            raise UserError(f"attack {attack}: sample {sid} has no OUT reference (every reference was trained on it)")
        if need_in and not member.any():
            raise UserError(f"attack {attack}: sample {sid} has no IN reference (no reference was trained on it)")
        ids.append(sid)
        targets.append(target)
        outs.append(matrix[~member])
        ins.append(matrix[member])
    return ids, targets, outs, ins


def fits(groups, ids, params: tuple[str, str, float], attack: str, side: str) -> list[Gaussian]:
    """One side's Gaussian per row, with the attack's estimator."""
    covariance, shrinkage, floor = params
    if covariance == "pooled":
        sigma = pooled_sigma(groups, attack, side)
        return [diagonal_fit(g, floor, sigma) for g in groups]
    for sid, g in zip(ids, groups):
        if g.shape[0] < 2:
            raise UserError(
                f"attack {attack}: sample {sid} has {g.shape[0]} {side} reference; a per-sample covariance needs at "
                "least 2 (use covariance: pooled)"
            )
    if covariance == "diagonal":
        return [diagonal_fit(g, floor) for g in groups]
    if covariance == "isotropic":  # one σ per sample, over its slots
        return [diagonal_fit(g, floor, float(np.sqrt(np.mean(np.square(g - g.mean(axis=0)))))) for g in groups]
    return [shrunk_fit(g, floor, shrinkage) for g in groups]


def column_of(covariance: str) -> str:
    return "per_pattern" if covariance == "patterns" else "token_logp"


# ------------------------------------------------------------------ the attacks

_ESTIMATORS = """Σ is estimated from the references' loss vectors (parameter `covariance`):
    ``pooled`` (σ² I with one σ pooled over every slot of every row, each around its own mean,
    the multivariate counterpart of LiRA's ``fix_variance``: the statistic is a Euclidean
    distance), ``isotropic`` (σ² I with one σ per sample, its references' spread around their
    slot means over all its slots), ``diagonal`` (each slot's own variance), ``shrinkage`` (the
    sample covariance of the slots standardised by their own σ_j, shrunk toward the identity, so
    Σ shrunk toward its diagonal, with the intensity of `shrinkage`: ``oas``, Chen et al. 2010,
    or ``ledoit_wolf``, Ledoit and Wolf 2004, as scikit-learn computes them, at least
    `MIN_INTENSITY`) or ``patterns`` (the slots first averaged within each masking pattern, the
    score table's ``per_pattern``, then that shrunk covariance of the K means). Means and
    variances are numpy's (ddof 0), as univariate LiRA's; `min_sigma` (default 1e-3 nats) floors
    every σ. The defaults are the strongest on the default world's zoo experiments
    (bench/lira_multivariate.py; AUC on zoo_long_mimic, zoo_long_i2b2, zoo_short_mimic and
    zoo_short_i2b2): offline ``isotropic``, 0.872, 0.951, 0.741 and 0.958 (`lira_offline` 0.847,
    0.945, 0.722, 0.959); online ``pooled``, 0.842, 0.941, 0.702 and 0.935 (`lira_online` 0.836,
    0.944, 0.732, 0.951). The per-slot and shrunk covariances, estimated from 4 references a side,
    are near chance online (0.53 to 0.60)."""

_DEPARTURES = """Where it departs from the authors (Rossi, Aerni, Zhang and Tramèr, who model the
    per-token losses of an autoregressive LLM with many shadow models; their code was not found
    and the part of the paper that could be read gives the statistic, not their covariance
    estimators, so the estimators here are this module's own): (1) a slot is a masked position of
    one masking pattern, not a token of the sequence; the K patterns mask positions drawn
    independently, so a position recurs (about 1.5 times at K = 10) and its slots are strongly
    correlated, which a full Σ models and a diagonal one counts twice; (2) the pool has 8
    references (online 4 IN and 4 OUT per audited sample) against up to about 90 slots, so a
    per-sample covariance has rank 3 to 7 and is shrunk, aggregated or pooled; (3) S holds −log p
    of the true token at each masked position (−``token_logp``), whose mean is the energy that
    univariate LiRA reads."""


class _MultivariateLira(Attack):
    """What both variants share (no name: not an attack of its own): the inputs, the parameters'
    checks and the pool each estimator needs."""

    inputs = {"target": ("token_logp", "per_pattern"), "references": ("token_logp", "per_pattern")}
    aggregates = True
    #: the sides of the pool whose Gaussians the statistic fits
    fitted_sides: ClassVar[tuple[str, ...]] = ("OUT",)

    def check_params(self) -> None:
        check_params(self.name, self.params)

    def reads_other_rows(self) -> bool:
        return self.params["covariance"] == "pooled"  # σ pooled over the table's rows

    def references_lack(self, count: int, online: bool) -> str | None:
        lira = {"variance": lira_variance(self.params["covariance"]), "min_sigma": self.params["min_sigma"]}
        return lira_references_lack(self.name, lira, count, online, self.fitted_sides)


class LiraMultivariateOffline(_MultivariateLira):
    __doc__ = f"""√T⁺ − √T⁻: how far the target's per-slot loss vector S of a sample lies above,
    less how far below, the Gaussian N(μ_out, Σ_out) of the loss vectors of the reference models
    not trained on it (OUT: ``references_in`` False), each a one-sided likelihood-ratio statistic:
    T⁻ = (S − μ)ᵀΣ⁻¹(S − μ) − min_{{m ≤ μ}} (S − m)ᵀΣ⁻¹(S − m) (losses below what OUT models give;
    T⁺ likewise above).

    Multivariate LiRA: Rossi, Aerni, Zhang and Tramèr, "Membership Inference Attacks on Sequence
    Models", DLSP 2025 (arXiv 2506.05126), extend LiRA (Carlini et al., IEEE S&P 2022) from a
    sample's summed loss to its vector of per-element losses, S = (−log p(x_1), ..., −log p(x_d));
    here the slots of all K masking patterns in pattern order (−`target_token_logp`; slot j of
    every reference's list is the same masked position, `mlmia.scoring.masks`). Offline LiRA is
    one-sided: a member's loss is low, not merely unusual, so the OUT Gaussian's log density,
    which a high loss lowers as much as a low one, is not the statistic (on zoo_long_i2b2, whose
    non-members' losses lie far above the OUT references', it ranks them as members: AUC 0.20).
    T⁻ is the chi-bar-squared likelihood-ratio test against means at most μ_out in every slot
    (Kudô, Biometrika 50, 1963), a non-negative least-squares problem (for a diagonal Σ,
    T⁻ = Σ_{{z_j < 0}} z_j² with z = (S − μ) / σ); T⁻ alone also counts a sample far above μ_out
    in most slots as evidence of lower losses where Σ correlates the slots, so √T⁺ is subtracted
    (on zoo_long_i2b2, −√T⁻ alone: AUC 0.78 with the per-slot Σ, 0.39 shrunk (OAS); √T⁺ − √T⁻:
    0.84 and 0.83). This is the module's choice: the authors' offline variant is not in the part
    of the paper that could be read. With one slot, √T⁺ − √T⁻ is the z-score (S − μ_out) /
    σ_out of `lira_offline` (`variance: per_sample`; with `covariance: pooled`, its default
    `variance: global`; tests/test_lira_multivariate.py). A signal in a few slots enters T⁻ whole
    where the summed loss dilutes it over all d. Default `covariance: isotropic`.

    {_ESTIMATORS}

    {_DEPARTURES} Lower means "member"."""

    name = "lira_multivariate_offline"
    label = "multivariate LiRA (offline)"
    lower_is_member = True
    parameters = {"covariance": "isotropic", "shrinkage": "oas", "min_sigma": 1e-3}

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        params = check_params(self.name, self.params)
        ids, targets, outs, _ = sides(table, column_of(params[0]), self.name, need_in=False)
        gaussians = fits(outs, ids, params, self.name, "OUT")
        out = np.empty(len(targets))
        for i, (s, g) in enumerate(zip(targets, gaussians)):
            out[i] = root_difference(*one_sided_lrt((s - g.mu) / g.sigma, g))
        return out


class LiraMultivariateOnline(_MultivariateLira):
    __doc__ = f"""log N(S; μ_in, Σ_in) − log N(S; μ_out, Σ_out): the log-likelihood ratio of the
    target's per-slot loss vector S of a sample under multivariate Gaussians fitted to the loss
    vectors of the reference models trained on it (IN: ``references_in`` True) and of those not
    (OUT).

    Multivariate LiRA: Rossi, Aerni, Zhang and Tramèr, "Membership Inference Attacks on Sequence
    Models", DLSP 2025 (arXiv 2506.05126): LiRA (Carlini et al., IEEE S&P 2022, online variant)
    on the vector of per-element losses instead of their sum, A(f, x) = N(S(f; x) | μ_in, Σ_in) /
    N(S(f; x) | μ_out, Σ_out); S = −`target_token_logp`, the slots of all K masking patterns in
    pattern order (slot j of every reference's list is the same masked position,
    `mlmia.scoring.masks`). The summed loss is S projected on the all-ones direction; the vector
    keeps a signal that sits in a few slots, which the sum dilutes. With one slot the statistic is
    `lira_online`'s (`variance: per_sample`; with `covariance: pooled`, its default `variance:
    global`; tests/test_lira_multivariate.py). Every member and non-member needs at least two IN
    and two OUT references (one each, and some row with two, with ``pooled``); held-in
    and population rows (never trained on by a reference) get no statistic (NaN; `scored_roles`).
    Default `covariance: pooled`.

    {_ESTIMATORS}

    {_DEPARTURES} Higher means "member"."""

    name = "lira_multivariate_online"
    label = "multivariate LiRA (online)"
    lower_is_member = False
    scored_roles = ("member", "nonmember")
    fitted_sides = ("IN", "OUT")
    parameters = {"covariance": "pooled", "shrinkage": "oas", "min_sigma": 1e-3}

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        audited = audited_rows(table)
        out = np.full(len(table), np.nan)
        if not audited.any():
            return out
        params = check_params(self.name, self.params)
        ids, targets, outs, ins = sides(table[audited], column_of(params[0]), self.name, need_in=True)
        fit_in = fits(ins, ids, params, self.name, "IN")
        fit_out = fits(outs, ids, params, self.name, "OUT")
        out[audited] = [gi.log_density(s) - go.log_density(s) for s, gi, go in zip(targets, fit_in, fit_out)]
        return out
