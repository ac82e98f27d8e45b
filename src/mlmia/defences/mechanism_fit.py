"""The mechanism fit of the white-box canaries: a PARAMETER CHECK of the privatised gradient
canaries' observations against the mechanism the accountant was told (`fit_mechanism`), and a
lower confidence limit on epsilon resting on the model (`model_epsilon_lcl`).

The white-box auditor sees every canary's normalised observation z_t = x_t B / C at every step
(`gradient_canaries`). A coordinate free of an inserted canary (a sentinel, or a canary not
included) is N(0, s^2) at every step; an included canary joins a step with probability q and then
adds a (its clipped gradient: 1 for a trainer that clips to C), so that its observation is
(1 - q) N(0, s^2) + q N(a, s^2). For that unit one step of DP-SGD is the Poisson-subsampled
Gaussian mechanism with noise multiplier s / a (what the accountant's sigma means for a unit of
norm C) and rate q. A trainer that does what it claims has s / a = sigma and q its rate (and
a = 1, s = sigma); one without noise, with sigma / 10, without clipping (a = 10) or with a rate
the accountant was not told has not.

The fit (method of moments): v = s^2 is the mean z^2 over the free coordinates; over the
included canaries' observations m1 = mean z = q a and m2 = mean z^2 = q a^2 + s^2, so

    a = (m2 - v) / m1,   q = m1^2 / (m2 - v),   s / a = sqrt(v) m1 / (m2 - v).

Every (canary, step) observation is taken as independent of every other (independent joins,
independent noise), so the sample moments are about normal with the covariance of their samples
((m1, m2) from the included, v from the free coordinates, independent of each other). Each
parameter is a ratio N / D of smooth functions of the moments; its two-sided (1 - beta) interval
is Fieller's (Fieller, "Some problems in interval estimation", JRSS B 1954): the theta with
|N - theta D| <= k se(N - theta D), k the normal quantile at 1 - beta / 2 and se by the delta
method (the gradients of N - theta D in (m1, m2, v): (-theta, 1, -1) for a, (2 m1, -theta, theta)
for q, (s, -theta, m1 / (2 s) + theta) for s / a). It is the delta method applied to N - theta D
rather than to the ratio, and keeps its coverage where the denominator is noisy: on 400
simulated runs of the shipped recipe at epsilon 4 (q = 0.2, T = 100, 1,000 canaries, 64
sentinels) the ratio's delta-method upper limit of s / a missed the truth in 22 runs at a
nominal 10, Fieller's in 12. Where D is not resolved from 0 (D^2 <= k^2 var D) the set is
unbounded: the parameter is not identified, and the interval is [0, inf) (at epsilon 1, sigma
6.1, the second moment is too noisy to tell q from a: so it is for the rate and the noise
multiplier in most runs). The point estimates need m1 > 0 and m2 > v (else NaN: no signal).

The check: does the record fit the claimed mechanism (noise multiplier sigma and rate q, any
amplitude)? Under the claim a = s / sigma, so the two moments must satisfy

    m1 = (q / sigma) s                 (the mean shift per unit of noise: q / (s / a) = q / sigma)
    m2 = (1 + q / sigma^2) v           (the excess second moment: q / (s / a)^2 = q / sigma^2)

and these two hold exactly when (s / a, q) = (sigma, q) (for a, q > 0). Each is tested two-sided
by its z statistic (the delta method: the se of m1 - (q / sigma) sqrt(v) and of
m2 - (1 + q / sigma^2) v from the same covariances), the p-value is Bonferroni's over the two,
and the check fails below `level` (the audit's `dp_audit.check_level`). A statistic above 0
reads leakier than claimed (a larger q / noise multiplier: the noise multiplier below sigma, or
the rate above q), below 0 less signal than the claim implies: the canaries reach the
observations at a rate below q, or with less than their norm, and the audit itself is broken.
Why not a test of each parameter alone: neither is identified where the canaries add nothing
(a = 0 fits any rate and q = 0 any noise multiplier), so no valid test of the noise multiplier
alone, or of the rate alone, can catch canaries that never reach the observations, and at
epsilon 1 neither is identified at all; the claim, both together, is identified by the first
moment alone. The fit is not an estimate of epsilon: for a correct trainer the accountant's
epsilon at the fitted parameters is the claim's by construction, so it checks the parameters;
it measures no privacy loss.

The model-based lower limit (`model_epsilon_lcl`): epsilon falls with the noise multiplier and
rises with q, so the epsilon of the subsampled Gaussian at (the noise multiplier's upper limit,
the rate's lower limit) is below the mechanism's whenever both limits hold, which they do
together with probability at least 1 - beta (each misses on one side with beta / 2; Bonferroni).
It is computed with a TIGHT accountant, the PRV accountant (Gopi, Lee and Wutschitz, "Numerical
composition of differential privacy", NeurIPS 2021; Opacus' implementation), whose LOWER error
bound is taken, not its estimate; the RDP accountant would not do: its epsilon is an upper bound
on the mechanism's (7.99 at the shipped eps 8 target's sigma where PRV gives 7.0), so that RDP at
lower parameter limits is no lower limit. It is a lower confidence limit resting on the model:
Gaussian noise of one scale (the noise and the noise-by-batch checks,
`gradient_canaries.mechanism_checks`), joins at one rate, one amplitude, independent
observations. Like the accountant it speaks of the canaries' units only: a fault that treats data
units other than the canaries is not seen by it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

from mlmia.core.errors import UserError
from mlmia.defences.gradient_canaries import free_coordinates, normalised

#: fewest observations on each side of the fit
MIN_OBSERVATIONS = 20
#: the PRV accountant's additive error in epsilon and its error in delta as a share of delta (Opacus' defaults)
PRV_EPS_ERROR = 0.01
PRV_DELTA_SHARE = 1e-3
#: the smallest noise multiplier the PRV accountant is run at: below it, at it (a smaller limit, still valid as
#: epsilon falls with the noise multiplier; PRV's grid grows as 1 / sigma^2: 1.3 s at 0.5, 9 s at 0.2, q = 0.2, T = 100)
PRV_FLOOR = 0.5
#: the largest rate it is run at (a smaller rate: a smaller limit, still valid)
PRV_RATE_CAP = 0.999


def _fieller(num: float, grad_num: np.ndarray, den: float, grad_den: np.ndarray, cov: np.ndarray,
             k: float) -> tuple[float, float]:  # fmt: skip
    """Fieller's interval of num / den (module docstring), clipped at 0; [0, inf) where den is not
    resolved from 0."""
    var_num, cross, var_den = grad_num @ cov @ grad_num, grad_num @ cov @ grad_den, grad_den @ cov @ grad_den
    lead = den**2 - k**2 * var_den
    if lead <= 0:
        return 0.0, math.inf
    half = num * den - k**2 * cross
    root = math.sqrt(max(0.0, half**2 - lead * (num**2 - k**2 * var_num)))
    return max(0.0, (half - root) / lead), max(0.0, (half + root) / lead)


def _two_sided(value: float, se: float) -> tuple[float, float]:
    """The z statistic of `value` against 0 and its two-sided p-value (an exact 0 with no spread: z 0, p 1)."""
    if se == 0:
        return (0.0, 1.0) if value == 0 else (math.copysign(math.inf, value), 0.0)
    z = value / se
    return z, float(min(1.0, 2.0 * stats.norm.sf(abs(z))))


def _sample(record: dict, target: str) -> tuple[np.ndarray, np.ndarray]:
    """The included canaries' observations and the free coordinates', each flat."""
    z = normalised(record)
    count = int(record["count"])
    included = np.asarray(record["included"]).astype(bool)
    inside = z[:, :count][:, included].ravel()
    free = z[:, free_coordinates(record)].ravel()
    if not included.any() or inside.size == 0:
        raise UserError(f"mechanism fit: target {target!r}: no included canary in its white-box record ({count} "
                        f"canaries, {int(included.sum())} included, {z.shape[0]} steps): nothing that reaches the "
                        "observations to fit")  # fmt: skip
    if inside.size < MIN_OBSERVATIONS or free.size < MIN_OBSERVATIONS:
        raise UserError(f"mechanism fit: target {target!r}: needs at least {MIN_OBSERVATIONS} observations of "
                        f"included canaries and of free coordinates, got {inside.size} and {free.size}")  # fmt: skip
    return inside, free


def fit_mechanism(record: dict, beta: float, level: float, target: str = "") -> dict:
    """The parameter check of a white-box record (`gradient_canaries.read_record`: observed,
    included, count, unit, divisor, sigma, sample_rate) against its claim (sigma, sample_rate),
    module docstring. Returns, each fitted parameter with its two-sided (1 - `beta`) Fieller
    interval (`_low`, `_high`; NaN estimate: no signal; [0, inf): not identified):

    - mech_noise_multiplier: s / a, against mech_claimed_noise_multiplier (sigma);
    - mech_rate: q, against mech_claimed_rate; mech_amplitude: a, against 1; mech_noise: s;
    - mech_mean_z, mech_excess_z: the two moment conditions' z statistics; mech_p_value (Bonferroni
      over the two), mech_level (`level`), mech_passed (p >= level), mech_side ("above": leakier
      than claimed, "below": less signal than claimed, the audit broken; "" where nothing is tested).

    A claim of no noise (sigma 0: no DP) is not tested (p NaN, passed). A record without an
    included canary, or with fewer than `MIN_OBSERVATIONS` on either side, is refused."""
    if not 0 < beta < 1:
        raise UserError(f"mechanism fit: beta must lie in (0, 1), got {beta!r}")
    if not 0 < level < 1:
        raise UserError(f"mechanism fit: level must lie in (0, 1), got {level!r}")
    sigma, rate = float(record["sigma"]), float(record["sample_rate"])
    if not (math.isfinite(sigma) and sigma >= 0 and 0 < rate <= 1):
        raise UserError(f"mechanism fit: target {target!r}: the claim needs sigma >= 0 and a rate in (0, 1], got "
                        f"sigma {sigma!r} and rate {rate!r}")  # fmt: skip
    inside, free = _sample(record, target)
    m1, m2, v = float(inside.mean()), float(np.mean(inside**2)), float(np.mean(free**2))
    cov = np.zeros((3, 3))  # of the moments (m1, m2, v)
    cov[:2, :2] = np.cov(inside, inside**2) / inside.size
    cov[2, 2] = float(np.var(free**2, ddof=1)) / free.size
    s, signal = math.sqrt(v), m2 - v
    k = float(stats.norm.ppf(1.0 - beta / 2.0))
    d_signal = np.array([0.0, 1.0, -1.0])
    found = m1 > 0 and signal > 0
    amplitude = _fieller(signal, d_signal, m1, np.array([1.0, 0.0, 0.0]), cov, k)
    fitted_rate = _fieller(m1**2, np.array([2.0 * m1, 0.0, 0.0]), signal, d_signal, cov, k)
    if v > 0:
        multiplier = _fieller(s * m1, np.array([s, 0.0, m1 / (2.0 * s)]), signal, d_signal, cov, k)
    else:  # no noise: the noise multiplier is 0 exactly
        multiplier = (0.0, 0.0)
    out = {"mech_noise": s,
           "mech_noise_multiplier": s * m1 / signal if found else math.nan,
           "mech_noise_multiplier_low": multiplier[0], "mech_noise_multiplier_high": multiplier[1],
           "mech_claimed_noise_multiplier": sigma,
           "mech_rate": m1**2 / signal if found else math.nan,
           "mech_rate_low": fitted_rate[0], "mech_rate_high": fitted_rate[1], "mech_claimed_rate": rate,
           "mech_amplitude": signal / m1 if found else math.nan,
           "mech_amplitude_low": amplitude[0], "mech_amplitude_high": amplitude[1],
           "mech_observations": int(inside.size), "mech_level": float(level)}  # fmt: skip
    if sigma == 0:  # no DP: no claim to check
        return out | {"mech_mean_z": math.nan, "mech_excess_z": math.nan, "mech_p_value": math.nan,
                      "mech_passed": True, "mech_side": ""}  # fmt: skip
    shift, excess = rate / sigma, 1.0 + rate / sigma**2
    var_s = cov[2, 2] / (4.0 * v) if v > 0 else 0.0  # the delta method: d sqrt(v) / dv = 1 / (2 s)
    mean_z, mean_p = _two_sided(m1 - shift * s, math.sqrt(cov[0, 0] + shift**2 * var_s))
    excess_z, excess_p = _two_sided(m2 - excess * v, math.sqrt(cov[1, 1] + excess**2 * cov[2, 2]))
    p_value = min(1.0, 2.0 * min(mean_p, excess_p))
    side = mean_z if mean_p <= excess_p else excess_z
    return out | {"mech_mean_z": mean_z, "mech_excess_z": excess_z, "mech_p_value": p_value,
                  "mech_passed": bool(p_value >= level), "mech_side": "above" if side > 0 else "below"}  # fmt: skip


def _prv_lower(noise_multiplier: float, rate: float, steps: int, delta: float) -> float:
    """The PRV accountant's lower error bound on the epsilon at `delta` of `steps` compositions of
    the Poisson-subsampled Gaussian (Opacus' `PRVAccountant`, its domain and mesh; its estimate
    and upper bound are not used)."""
    from opacus.accountants.analysis.prv import (
        Domain,
        PoissonSubsampledGaussianPRV,
        TruncatedPrivacyRandomVariable,
        compose_heterogeneous,
        compute_safe_domain_size,
        discretize,
    )

    prv = PoissonSubsampledGaussianPRV(rate, noise_multiplier)
    delta_error = delta * PRV_DELTA_SHARE
    with warnings.catch_warnings():  # the RDP bound that sizes the domain may find its best order at an end
        warnings.filterwarnings("ignore", message="Optimal order is the (largest|smallest) alpha")
        size = compute_safe_domain_size([prv], [steps], eps_error=PRV_EPS_ERROR, delta_error=delta_error)
    mesh = PRV_EPS_ERROR / math.sqrt(steps * math.log(12.0 / delta_error) / 2.0)
    domain = Domain.create_aligned(-size, size, mesh)
    discrete = discretize(TruncatedPrivacyRandomVariable(prv, domain.t_min, domain.t_max), domain)
    lower, _, _ = compose_heterogeneous([discrete], [steps]).compute_epsilon(delta, delta_error, PRV_EPS_ERROR)
    return float(lower)


def model_epsilon_lcl(fit: dict, steps: int, delta: float) -> float:
    """A lower confidence limit on the canaries' epsilon at `delta` resting on the model (module
    docstring), at confidence 1 - beta of `fit` (`fit_mechanism`): the PRV accountant's lower
    bound for `steps` steps of the subsampled Gaussian at (mech_noise_multiplier_high,
    mech_rate_low). 0 where the rate's limit is 0 or the noise multiplier's unbounded; with no
    noise (limit 0) inf when delta is below the chance 1 - (1 - q)^T that the canary joins at
    all, else 0; NaN where the accountant fails."""
    if not 0 < delta < 1:
        raise UserError(f"mechanism fit: delta must lie in (0, 1), got {delta!r}")
    if int(steps) != steps or steps < 0:
        raise UserError(f"mechanism fit: steps must be a whole number >= 0, got {steps!r}")
    multiplier, rate = float(fit["mech_noise_multiplier_high"]), min(float(fit["mech_rate_low"]), PRV_RATE_CAP)
    if math.isnan(multiplier) or math.isnan(rate):
        return math.nan
    if steps == 0 or rate <= 0 or math.isinf(multiplier):
        return 0.0
    if multiplier == 0:
        return math.inf if delta < 1.0 - (1.0 - rate) ** steps else 0.0
    try:
        return max(0.0, _prv_lower(max(multiplier, PRV_FLOOR), rate, int(steps), delta))
    except (RuntimeError, ValueError, MemoryError):
        return math.nan


def _interval(row: dict, key: str) -> str:
    value, low, high = row[key], row[f"{key}_low"], row[f"{key}_high"]
    shown = "n.a. (no signal)" if math.isnan(value) else f"{value:.4g}"
    return f"{shown} [{low:.4g}, {high:.4g}]"


def describe_fit(row: dict) -> str:
    """The fit against the claim in one phrase (failure messages): each fitted parameter with its
    interval against the claimed value."""
    return (f"noise multiplier {_interval(row, 'mech_noise_multiplier')} against sigma "
            f"{row['mech_claimed_noise_multiplier']:.4g}, rate {_interval(row, 'mech_rate')} against q "
            f"{row['mech_claimed_rate']:.4g}, amplitude {_interval(row, 'mech_amplitude')} against 1")  # fmt: skip


def fit_failure(row: dict) -> str:
    """Why a fit that failed its check fails (`fit_mechanism`'s mech_side): leakier than claimed,
    naming the parameter whose interval excludes the claim, or less signal than the claim implies."""
    if row["mech_side"] == "below":
        return ("the canaries reach the observations at a rate below q, or with less than their norm: the audit "
                "itself is broken")  # fmt: skip
    which = [phrase for phrase, off in (
        ("noise multiplier below sigma", row["mech_noise_multiplier_high"] < row["mech_claimed_noise_multiplier"]),
        ("rate above q", row["mech_rate_low"] > row["mech_claimed_rate"])) if off]  # fmt: skip
    return "leakier than claimed: " + (" and ".join(which) or "more signal per unit of noise than sigma and q allow")
