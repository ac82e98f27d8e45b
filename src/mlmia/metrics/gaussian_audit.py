"""The Gaussian analysis of a one-run audit: an ESTIMATE of epsilon, not a bound, from the scores
of the included and the excluded canaries; pure functions on arrays.

Gaussian differential privacy (Dong, Roth and Su, "Gaussian differential privacy", JRSS B 2022):
a mechanism is mu-GDP when telling two neighbouring inputs apart is no easier than telling
N(0, 1) from N(mu, 1). mu-GDP is (eps, delta(eps))-DP for every eps >= 0 with
(their Corollary 2.13)

    delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2),

decreasing in eps; `gdp_delta` computes it, `gdp_epsilon` solves it for eps at a given delta.

The one-run Gaussian analysis (Andrew, Kairouz, Oh, Oprea, McMahan and Suriyakumar, "One-shot
empirical privacy estimation for federated learning", ICLR 2024; in DP-SGD with random inclusion,
Agrawal et al. 2026): fit a normal distribution to the scores of the included canaries and one
to the scores of the excluded ones; if both are normal with a common variance s^2, the best test
of "included" is a threshold on the score and its trade-off is that of N(0, 1) against
N(mu, 1) with mu = (mean_in - mean_out) / s, the standardized mean difference; the mechanism is
then at least as leaky as mu-GDP on the canaries, and eps(mu) at the accountant's delta is the
estimate (`gaussian_one_run`). It rests on the Gaussian assumption and is not a lower bound: a
mechanism whose scores are not normal can give an estimate above or below its epsilon. For the
privacy-loss statistic of a composition of many steps (the likelihood-ratio score of the
accounted mechanism) the central limit theorem makes the in and out scores approach
N(+mu^2 / 2, mu^2) and N(-mu^2 / 2, mu^2) (Dong et al., Theorem 3.5), where the standardized
difference is mu itself.

The lower confidence limit on mu (`mu_lower_limit`): with n1 included and n0 excluded canaries,
normal with a common variance, Cohen's d = (mean_in - mean_out) / s_pooled satisfies
d sqrt(n1 n0 / (n1 + n0)) ~ noncentral t(n1 + n0 - 2, mu sqrt(n1 n0 / (n1 + n0))) exactly (the
numerator is N(mu sqrt(.), 1) in units of s / sqrt(.), the pooled variance an independent
chi-square over its degrees of freedom). The noncentral t's survival function at the observed t
increases in the noncentrality, so the noncentrality at which it equals beta is a lower
(1 - beta) confidence limit (the test "P(T >= t_obs) < beta" has level beta at every mu below it);
eps(mu_lb) is then a lower limit on eps(mu), eps being increasing in mu. Exact under the Gaussian
assumption, and only under it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from mlmia.core.errors import UserError
from mlmia.metrics.intervals import check_confidence

#: fewest canaries on each side (the variances and the normality check need a few)
MIN_SCORES = 3
#: fewest null scores for the normality check (D'Agostino-Pearson's kurtosis test needs 20)
MIN_NULL = 20


def _check_mu(mu: float) -> None:
    if not (isinstance(mu, int | float | np.floating) and mu >= 0 and not math.isnan(mu)):
        raise UserError(f"mu must be a number >= 0, got {mu!r}")


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth and Su 2022, Corollary 2.13; module docstring); the
    second term in logs (log Phi) so that e^eps never overflows."""
    _check_mu(mu)
    if not (math.isfinite(eps) and eps >= 0):
        raise UserError(f"eps must be a finite number >= 0, got {eps!r}")
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    first = special.ndtr(-eps / mu + mu / 2.0)
    second = math.exp(eps + special.log_ndtr(-eps / mu - mu / 2.0))
    return float(max(0.0, first - second))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The least eps >= 0 at which mu-GDP is (eps, delta)-DP: delta(eps) = delta solved by
    bracketing (0 when delta(0) <= delta; inf for mu = inf)."""
    _check_mu(mu)
    if not (isinstance(delta, int | float | np.floating) and 0 < delta < 1):
        raise UserError(f"delta must lie in (0, 1), got {delta!r}")
    if math.isinf(mu):
        return math.inf
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    high = max(1.0, mu * mu)
    while gdp_delta(high, mu) > delta:
        high *= 2.0
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, high, xtol=1e-10))


def _scores(values, what: str) -> np.ndarray:
    out = np.asarray(values, dtype=float)
    if out.ndim != 1:
        raise UserError(f"{what} must be a 1-D array of scores, got shape {out.shape}")
    if len(out) < MIN_SCORES:
        raise UserError(f"{what}: need at least {MIN_SCORES} scores, got {len(out)}")
    if not np.all(np.isfinite(out)):
        raise UserError(f"{what} must be finite")
    return out


def _spread(values: np.ndarray) -> bool:
    """Whether scores vary beyond rounding (skewness and normality are undefined otherwise)."""
    return bool(np.ptp(values) > 1e-9 * max(1.0, float(np.max(np.abs(values)))))


def _skew(values: np.ndarray) -> float:
    return float(stats.skew(values)) if _spread(values) else math.nan


def standardized_difference(included, excluded) -> float:
    """Cohen's d: (mean of `included` - mean of `excluded`) / pooled standard deviation (inf, or
    0 for equal means, when both samples are constant)."""
    a, b = _scores(included, "included"), _scores(excluded, "excluded")
    diff = float(a.mean() - b.mean())
    pooled = ((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2)
    if pooled <= 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(pooled)


def mu_lower_limit(d: float, n_in: int, n_out: int, beta: float) -> float:
    """A lower (1 - `beta`) confidence limit on mu >= 0 from Cohen's d of `n_in` and `n_out`
    normal scores with a common variance: the noncentral t inversion of the module docstring
    (0 when even mu = 0 is not refuted; inf for d = inf)."""
    if not (n_in >= 2 and n_out >= 2):
        raise UserError(f"mu_lower_limit needs at least 2 scores on each side, got {n_in} and {n_out}")
    if not 0 < beta < 1:
        raise UserError(f"beta must lie in (0, 1), got {beta!r}")
    if math.isnan(d):
        raise UserError("mu_lower_limit: d is not a number")
    if math.isinf(d):
        return math.inf if d > 0 else 0.0
    scale = math.sqrt(n_in * n_out / (n_in + n_out))
    df, t = n_in + n_out - 2, d * scale

    def excess(nc: float) -> float:
        return float(stats.nct.sf(t, df, nc)) - beta

    if excess(0.0) >= 0:
        return 0.0
    high = max(1.0, t)
    while excess(high) < 0:
        high *= 2.0
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-10)) / scale


def null_checks(excluded, null=None, level: float = 0.01) -> dict:
    """The Gaussian assumption checked where it can be, on scores with no canary in them: `null`
    (the same score of the canary-free coordinates; the excluded canaries when None):
    D'Agostino-Pearson's test of normality (scipy.stats.normaltest, on skewness and kurtosis),
    and where `null` is given, the two-sample Kolmogorov-Smirnov test of the excluded canaries'
    scores against it (the same distribution when nothing leaks into excluded canaries).
    Returned: null_scores, null_skew, normal_p, normal_passed (p >= `level`; NaN p and None
    when fewer than `MIN_NULL` scores or all equal), same_p (NaN without `null`)."""
    out_scores = _scores(excluded, "excluded")
    values = out_scores if null is None else np.asarray(null, dtype=float).ravel()
    if not np.all(np.isfinite(values)):
        raise UserError("null scores must be finite")
    normal_p, skew = math.nan, math.nan
    if len(values) >= MIN_NULL and _spread(values):
        normal_p = float(stats.normaltest(values).pvalue)
        skew = _skew(values)
    same_p = math.nan
    if null is not None and len(values):
        same_p = float(stats.ks_2samp(out_scores, values).pvalue)
    return {"null_scores": len(values), "null_skew": skew, "normal_p": normal_p,
            "normal_passed": None if math.isnan(normal_p) else bool(normal_p >= level), "same_p": same_p}  # fmt: skip


def gaussian_one_run(included, excluded, delta: float, beta: float = 0.05, null=None, level: float = 0.01) -> dict:
    """The Gaussian analysis of one-run canary scores (module docstring): `included` and
    `excluded`, the scores of the included and the excluded canaries (higher: included);
    `delta`, the accountant's; `beta`, 1 - the confidence of the lower limit; `null`, the same
    score of canary-free coordinates for the check (`null_checks`, at `level`).

    Returned (JSON-ready): gauss_mu (Cohen's d), gauss_mu_lb, gauss_estimate (eps(mu) at delta,
    an ESTIMATE under the Gaussian assumption), gauss_lcl (eps(mu_lb), its lower confidence
    limit under the same assumption), gauss_beta, the scores' skewness in and out and the ratio
    of their standard deviations (how far from the assumption the canaries are), and the null
    checks prefixed gauss_."""
    a, b = _scores(included, "included"), _scores(excluded, "excluded")
    check_confidence(1.0 - beta)
    d = standardized_difference(a, b)
    mu = max(0.0, d)
    mu_lb = mu_lower_limit(d, len(a), len(b), beta)
    sd_in, sd_out = float(a.std(ddof=1)), float(b.std(ddof=1))
    checks = null_checks(b, null, level)
    return {"gauss_mu": mu, "gauss_mu_lb": mu_lb, "gauss_estimate": gdp_epsilon(mu, delta),
            "gauss_lcl": gdp_epsilon(mu_lb, delta), "gauss_beta": beta,
            "gauss_skew_in": _skew(a), "gauss_skew_out": _skew(b),
            "gauss_sd_ratio": sd_in / sd_out if _spread(b) else math.inf,
            **{f"gauss_{key}": value for key, value in checks.items()}}  # fmt: skip
