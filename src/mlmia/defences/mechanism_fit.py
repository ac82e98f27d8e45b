"""The mechanism fit of the white-box canaries: an ESTIMATE of epsilon from the privatised
gradient canaries' observations themselves, and a lower confidence limit, under the assumption
that the release is the subsampled Gaussian mechanism (`fit_mechanism`).

Why: the guesses of the one-run audit certify at most what counting right guesses can (0.30 of
epsilon at epsilon = 8 on the default DP targets), and the Gaussian analysis of the canaries'
scores (`mlmia.metrics.gaussian_audit`) under-reads a composition of few subsampled steps, whose
scores are far from normal (docs/dp.md). The white-box auditor sees more than scores: every
canary's normalised observation z_t = x_t B / C at every step (`gradient_canaries`). A canary
not included is N(0, s^2) at every step; an included one joins a step with probability q and then
adds a (the canary's clipped gradient: 1 for a trainer that clips to C), so that its observation
is (1 - q) N(0, s^2) + q N(a, s^2). One step of DP-SGD is then, for that unit, the Poisson-
subsampled Gaussian mechanism with noise multiplier s / a and rate q, and T steps of it compose
to the epsilon that the accountant of the claim computes for (s / a, q, T, delta): the estimate.
A trainer that does what it claims has a = 1, s = sigma and q its rate, and the estimate is the
accountant's epsilon up to sampling error; one without noise, with sigma / 10, without clipping
(a = 10) or with a rate the accountant was not told gives an estimate far above it.

The fit (method of moments): s^2 is the mean z^2 over the coordinates free of an inserted canary
(the sentinels and the canaries not included); over the included canaries' observations
m1 = mean z = q a and m2 = mean z^2 = q a^2 + s^2, so a = (m2 - s^2) / m1, q = m1^2 / (m2 - s^2),
rho = a / s. Under the assumption every (canary, step) observation is independent of every other
(independent joins, independent noise), so the delta method gives the standard errors of rho and
q from the sample moments (of z and z^2 on the included, of z^2 on the free coordinates). The
lower limit is the accountant's epsilon at (rho - k se_rho, q - k se_q), k the normal quantile at
1 - beta / 2 (Bonferroni over the two limits): epsilon grows with rho = 1 / (noise multiplier)
and with q, so it is below the mechanism's epsilon whenever both limits hold. The audit reports
the limit at its white-box family's beta and fails a target when the limit at the mechanism
checks' level (`dp_audit.check_level`, 1e-6) is above the accountant's epsilon: a check of the
mechanism, like the noise checks, with its own level, so that the families' shares of the
confidence stay as they were.

The assumption: Gaussian noise of one scale at every step (checked by the noise and the
noise-by-batch checks, `gradient_canaries.mechanism_checks`), joins at one rate, one amplitude.
The estimate is not a bound: it says which mechanism the observations fit and what the accountant
makes of it. Like the accountant, it speaks of the canaries' units only: a fault that treats data
units other than the canaries is not seen by it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

from mlmia.core.errors import UserError
from mlmia.defences.dp_sgd import accountant_epsilon
from mlmia.defences.gradient_canaries import free_coordinates, normalised

#: fewest observations on each side of the fit
MIN_OBSERVATIONS = 20


def _epsilon(accountant: str, sigma: float, rate: float, steps: int, delta: float) -> float:
    """The accountant's epsilon, without Opacus' note that the best Renyi order is the largest it
    tries, or the smallest (a fitted mechanism far leakier or far more private than a claim; the epsilon is still valid)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the (largest|smallest) alpha")
        return accountant_epsilon(accountant, sigma, rate, steps, delta)


def _moments(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.var(ddof=1)) if values.size > 1 else math.nan


def fit_mechanism(record: dict, accountant: str, delta: float, beta: float, check_level: float | None = None) -> dict:
    """The mechanism fit of a white-box record (`gradient_canaries.read_record`: observed,
    included, count, unit, divisor, steps) at the accountant's `delta` (module docstring): the
    fitted amplitude, noise and rate, the ESTIMATE of epsilon (`mech_estimate`) and its lower
    confidence limit at 1 - `beta` (`mech_lcl`); with `check_level`, also the lower limit at
    1 - check_level (`mech_check_lcl`), which the audit's failure rule reads as a mechanism check.
    No signal (m1 <= 0 or m2 <= s^2) estimates 0; no noise with a signal estimates inf."""
    if not 0 < beta < 1:
        raise UserError(f"mechanism fit: beta must lie in (0, 1), got {beta!r}")
    if not 0 < delta < 1:
        raise UserError(f"mechanism fit: delta must lie in (0, 1), got {delta!r}")
    z = normalised(record)
    inside = z[:, : int(record["count"])][:, np.asarray(record["included"]).astype(bool)].ravel()
    free = z[:, free_coordinates(record)].ravel()
    if inside.size < MIN_OBSERVATIONS or free.size < MIN_OBSERVATIONS:
        raise UserError(f"mechanism fit: needs at least {MIN_OBSERVATIONS} observations of included canaries and "
                        f"of free coordinates, got {inside.size} and {free.size}")  # fmt: skip
    steps = int(record["steps"])
    m1, var1 = _moments(inside)
    m2, var2 = _moments(inside**2)
    cov12 = float(np.cov(inside, inside**2)[0, 1])
    v, var_v = _moments(free**2)
    signal = m2 - v
    out = {"mech_amplitude": math.nan, "mech_noise": math.sqrt(v), "mech_rate": math.nan,
           "mech_noise_multiplier": math.nan, "mech_estimate": 0.0, "mech_lcl": 0.0, "mech_accountant": accountant}  # fmt: skip
    if check_level is not None:
        out["mech_check_lcl"] = 0.0
    if m1 <= 0 or signal <= 0:
        return out
    amplitude, rate = signal / m1, min(1.0, m1**2 / signal)
    out |= {"mech_amplitude": amplitude, "mech_rate": rate}
    if v == 0:
        unlimited = {"mech_noise_multiplier": 0.0, "mech_estimate": math.inf, "mech_lcl": math.inf}
        return out | unlimited | ({"mech_check_lcl": math.inf} if check_level is not None else {})
    s = math.sqrt(v)
    rho = signal / (m1 * s)
    # the delta method: gradients of rho and q in (m1, m2, v); (m1, m2) from the included, v from the free
    n_in, n_free = inside.size, free.size
    cov = np.array([[var1, cov12], [cov12, var2]]) / n_in
    grad_rho = np.array([-signal / (m1**2 * s), 1.0 / (m1 * s)])
    grad_rho_v = -1.0 / (m1 * s) - signal / (2.0 * m1 * s**3)
    grad_q = np.array([2.0 * m1 / signal, -(m1**2) / signal**2])
    grad_q_v = m1**2 / signal**2
    se_rho = math.sqrt(float(grad_rho @ cov @ grad_rho) + grad_rho_v**2 * var_v / n_free)
    se_q = math.sqrt(float(grad_q @ cov @ grad_q) + grad_q_v**2 * var_v / n_free)

    def lower_limit(level: float) -> float:
        k = float(stats.norm.ppf(1.0 - level / 2.0))
        rho_low, rate_low = rho - k * se_rho, min(1.0, m1**2 / signal - k * se_q)
        if rho_low <= 0 or rate_low <= 0:
            return 0.0
        return max(0.0, _epsilon(accountant, 1.0 / rho_low, rate_low, steps, delta))  # float noise near 0

    estimate = _epsilon(accountant, 1.0 / rho, rate, steps, delta)
    out |= {"mech_noise_multiplier": 1.0 / rho, "mech_estimate": estimate, "mech_lcl": lower_limit(beta),
            "mech_rho_se": se_rho, "mech_rate_se": se_q}  # fmt: skip
    if check_level is not None:
        out["mech_check_lcl"] = lower_limit(check_level)
    return out
