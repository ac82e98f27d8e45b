"""The Gaussian analysis of the one-run audit (mlmia.metrics.gaussian_audit) and its place in the
white-box audit: closed forms of mu-GDP, coverage of the lower limit on an exactly Gaussian
mechanism, simulated DP-SGD canaries of the default targets' claim, a faulty mechanism caught."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from mlmia.core.errors import UserError
from mlmia.defences.audit import audit_target, gaussian_audit
from mlmia.defences.gradient_canaries import canary_scores, simulated_record
from mlmia.metrics.gaussian_audit import gaussian_one_run, gdp_delta, gdp_epsilon, mu_lower_limit

# the default targets' claim: sigma for eps 8 at q = 1/7, T = 35, delta = 1 / 6446 (an earlier recipe's, docs/dp_canary_design.md)
SIGMA, Q, STEPS, DELTA = 0.845, 1 / 7, 35, 1 / 6446
SETTINGS = {"confidence": 0.95, "check_level": 1e-6, "gradient_canaries": {"guess_share": 0.2,
            "score": "likelihood_ratio"}}  # fmt: skip


def delta_by_integral(eps: float, mu: float) -> float:
    """delta(eps) of telling N(0, 1) from N(mu, 1), from its definition: the largest
    P1(S) - e^eps P0(S), i.e. the integral of max(0, phi(x - mu) - e^eps phi(x)) (the set where the
    likelihood ratio exceeds e^eps is x > eps / mu + mu / 2), by quadrature."""
    start = eps / mu + mu / 2
    value, _ = integrate.quad(lambda x: stats.norm.pdf(x - mu) - math.exp(eps) * stats.norm.pdf(x), start, np.inf)
    return value


def epsilon_by_integral(mu: float, delta: float) -> float:
    return optimize.brentq(lambda e: delta_by_integral(e, mu) - delta, 0.0, 100.0)


def test_gdp_delta_and_epsilon_match_the_definition():
    # at eps = 0: delta = P1(x > mu/2) - P0(x > mu/2) = 2 Phi(mu / 2) - 1; mu = 1: 2 x 0.691462 - 1
    assert gdp_delta(0.0, 1.0) == pytest.approx(0.382925, abs=1e-6)
    for mu, eps in [(0.5, 0.3), (1.0, 1.0), (2.0, 4.0), (3.4, 15.0)]:
        assert gdp_delta(eps, mu) == pytest.approx(delta_by_integral(eps, mu), rel=1e-6, abs=1e-12)
    for mu, delta in [(0.5, 1e-5), (1.0, 1e-5), (1.5, DELTA)]:
        assert gdp_epsilon(mu, delta) == pytest.approx(epsilon_by_integral(mu, delta), rel=1e-6)
    assert gdp_epsilon(0.0, 1e-5) == 0.0 and gdp_epsilon(0.01, 0.5) == 0.0  # delta(0) = 0.004 < 0.5
    assert gdp_epsilon(math.inf, 1e-5) == math.inf


def test_the_estimate_recovers_a_gaussian_mechanism_and_the_lower_limit_covers():
    """Scores N(0, 1) (out) and N(mu, 1) (in): the mechanism is exactly mu-GDP on the canaries."""
    mu, delta, beta = 1.0, 1e-5, 0.05
    truth = epsilon_by_integral(mu, delta)
    rng = np.random.default_rng(11)
    n = 2000  # per side; sd of Cohen's d ~ sqrt(2 / n + mu^2 / (4 n)) (Hedges and Olkin)
    se = math.sqrt(2 / n + mu**2 / (4 * n))
    found = gaussian_one_run(rng.normal(mu, 1, n), rng.normal(0, 1, n), delta, beta)
    tolerance = epsilon_by_integral(mu + 4 * se, delta) - truth
    assert abs(found["gauss_estimate"] - truth) < tolerance
    assert found["gauss_mu"] == pytest.approx(mu, abs=4 * se) and found["gauss_lcl"] < found["gauss_estimate"]
    assert found["gauss_normal_passed"] is not False or found["gauss_normal_p"] > 1e-4  # out scores are normal
    # coverage: the lower limit lies above the truth in at most beta of the runs (exact under normality)
    reps, misses, n = 300, 0, 100
    for _ in range(reps):
        found = gaussian_one_run(rng.normal(mu, 1, n), rng.normal(0, 1, n), delta, beta)
        misses += found["gauss_lcl"] > truth
    assert int(stats.binom.ppf(0.001, reps, beta)) <= misses <= int(stats.binom.ppf(0.999, reps, beta))


def test_mu_lower_limit_is_the_noncentral_t_limit():
    # n = 50 per side, d = 1: t = 1 x 5 = 5 on 98 degrees of freedom; the limit's noncentrality leaves
    # 5% of the noncentral t above 5, so mu_lb = nc / 5
    low = mu_lower_limit(1.0, 50, 50, 0.05)
    assert stats.nct.sf(5.0, 98, low * 5) == pytest.approx(0.05, abs=1e-8)
    # a large-sample normal approximation, d - 1.645 sd(d) with sd(d) = sqrt(2 / 50 + 1 / 200), is close
    assert low == pytest.approx(1 - 1.645 * math.sqrt(2 / 50 + 1 / 200), abs=0.02)
    assert mu_lower_limit(0.0, 50, 50, 0.05) == 0.0 and mu_lower_limit(math.inf, 5, 5, 0.05) == math.inf


def _default_run(rng, noise_scale=1.0, count=8000):
    record = simulated_record(SIGMA, Q, STEPS, count, rng, sentinels=64, noise_scale=noise_scale)
    scores = canary_scores(record, score="likelihood_ratio")
    bits = record["included"]
    return record, gaussian_one_run(scores[bits], scores[~bits], DELTA, 0.05 / 3)


def test_a_correct_mechanism_of_the_default_claim_stays_below_the_accountant():
    """Simulated DP-SGD canaries of the claim of dp_eps8 (sigma 0.845, q = 1/7, T = 35, 8,000
    canaries): the lower limit is above the accountant's eps (RDP, opacus) in fewer than 5% of runs."""
    from mlmia.defences.dp_sgd import accountant_epsilon

    claimed = accountant_epsilon("rdp", SIGMA, Q, STEPS, DELTA)
    rng = np.random.default_rng(5)
    runs = [_default_run(rng)[1] for _ in range(20)]
    trips = sum(run["gauss_lcl"] > claimed for run in runs)
    assert trips == 0  # fewer than 5% of 20 runs
    estimates = np.array([run["gauss_estimate"] for run in runs])
    assert 0 < estimates.mean() < claimed


def test_a_faulty_mechanism_is_far_above_the_claim_and_fails_the_audit():
    """No noise: z_t = b_t, so the likelihood-ratio score is a + (b - a) K, K ~ Binomial(T, q) for an
    included canary and 0 for an excluded one; Cohen's d = T q / sqrt(T q (1 - q) / 2) =
    sqrt(2 T q / (1 - q)) = sqrt(35 / 3) = 3.416, i.e. eps 17.4 at the claim's delta, where the
    accountant claims 8. Noise sigma / 10 is as far above."""
    mu = math.sqrt(2 * STEPS * Q / (1 - Q))
    rng = np.random.default_rng(7)
    for scale in (0.0, 0.1):
        record, found = _default_run(rng, scale)
        assert found["gauss_lcl"] > 2 * 8.02 and found["gauss_estimate"] > found["gauss_lcl"]
        if scale == 0:
            assert found["gauss_mu"] == pytest.approx(mu, rel=0.05)
            assert found["gauss_estimate"] == pytest.approx(epsilon_by_integral(mu, DELTA), rel=0.1)
        record |= {"data_batch": np.full(STEPS, 1000), "units": 7000}
        info = {"dp": {"epsilon": 8.0, "delta": DELTA}}
        audit = audit_target("t", info, SETTINGS, whitebox=record)
        assert any(f.startswith("the white-box Gaussian lower limit eps >= ") for f in audit["failures"]), scale
        white = audit["canary_audits"][0]
        assert white["gauss_fails"] and white["gauss_sim_trips"] == 0 and white["gauss_sim_reps"] == 60
    # the tables print the estimate labelled as one, beside the f-DP bound, each with its ratio to eps
    from mlmia.defences.report import bounds_markdown, bounds_table, one_run_table

    table = bounds_table([audit])
    assert table["whitebox_gauss_lcl_ratio"].iloc[0] == pytest.approx(white["gauss_lcl"] / 8.0)
    assert table["whitebox_lb"].iloc[0] == white["fdp_lb"]  # the f-DP bound's column is unchanged
    assert "white-box estimate (Gaussian assumption) (/ε)" in bounds_markdown(table, 0.01, 0.95)
    row = one_run_table([audit]).iloc[0]
    assert row["gauss_estimate_ratio"] == pytest.approx(white["gauss_estimate"] / 8.0) and row["gauss_fails"]


def test_a_correct_mechanism_does_not_fail_on_the_gaussian_limit():
    rng = np.random.default_rng(9)
    record = simulated_record(SIGMA, Q, STEPS, 2000, rng, sentinels=64)
    found = gaussian_audit(
        record, canary_scores(record, score="likelihood_ratio"), "likelihood_ratio", 8.02, DELTA, 0.05 / 3
    )
    assert not found["gauss_fails"] and found["gauss_sim_reps"] == 0 and found["gauss_null_scores"] == 64
    assert 0 <= found["gauss_same_p"] <= 1 and found["gauss_sd_ratio"] > 1  # included canaries spread more


def test_bad_input_is_refused():
    ok = np.arange(10.0)
    for args in [(ok[:2], ok), (ok, ok[:2]), (ok.reshape(2, 5), ok), (np.r_[ok, np.nan], ok)]:
        with pytest.raises(UserError):
            gaussian_one_run(*args, 1e-5)
    for delta in (0.0, 1.0, -1e-5):
        with pytest.raises(UserError):
            gaussian_one_run(ok, ok, delta)
    for beta in (0.0, 1.0):
        with pytest.raises(UserError):
            gaussian_one_run(ok, ok, 1e-5, beta)
    with pytest.raises(UserError):
        gdp_epsilon(-1.0, 1e-5)
    with pytest.raises(UserError):
        mu_lower_limit(1.0, 1, 5, 0.05)
