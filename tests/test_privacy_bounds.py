"""Empirical lower bounds on epsilon (mlmia.metrics.privacy_bounds): hand computations, scipy's
exact binomial intervals, and simulated mechanisms with a known epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from mlmia.core.errors import UserError
from mlmia.metrics.intervals import clopper_pearson
from mlmia.metrics.privacy_bounds import (
    eps_delta_inverse_blow_up,
    epsilon_lower_bound,
    fdp_one_run_epsilon,
    fdp_one_run_refutes,
    one_run_audit,
    one_run_epsilon,
    one_run_p_value,
    threshold_then_bound,
)

REPETITIONS = 200
# Each repetition's bound exceeds the true eps with probability at most 5% if the code is right,
# so the number of misses is at most Binomial(200, 0.05) (mean 10, sd 3.1). We allow up to its
# 99.9% quantile: a correct implementation fails this with probability below 0.1%, a bound that
# missed 10% of the time (mean 20 misses) would fail about half the time, 15% almost always.
MAX_MISSES = int(stats.binom.ppf(0.999, REPETITIONS, 0.05))


def rr_probability(eps: float) -> float:
    """Randomized response: a member answers "in" with probability e^eps / (1 + e^eps)."""
    return math.exp(eps) / (1.0 + math.exp(eps))


# ---------------------------------------------------------------- Clopper-Pearson


def test_clopper_pearson_matches_scipy_exact_interval():
    for k, n in [(0, 10), (3, 10), (10, 10), (500, 1000), (7, 2000)]:
        two = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert clopper_pearson(k, n, 0.95, sided="two") == pytest.approx((two.low, two.high), abs=1e-12)
        lower = stats.binomtest(k, n, alternative="greater").proportion_ci(confidence_level=0.9, method="exact")
        upper = stats.binomtest(k, n, alternative="less").proportion_ci(confidence_level=0.9, method="exact")
        assert clopper_pearson(k, n, 0.9, sided="one") == pytest.approx((lower.low, upper.high), abs=1e-12)


def test_clopper_pearson_by_hand_and_arrays():
    # 0 successes in 10: the one-sided 95% upper limit solves (1 - p)^10 = 0.05,
    # p = 1 - 0.05^(1/10) = 1 - exp(ln(0.05) / 10) = 1 - 0.741134 = 0.258866
    low, high = clopper_pearson(0, 10, 0.95, sided="one")
    assert low == 0.0 and high == pytest.approx(0.2588655508, abs=1e-9)
    # 10 of 10: the lower limit solves p^10 = 0.05, p = 0.741134
    assert clopper_pearson(10, 10, 0.95, sided="one") == pytest.approx((0.7411344491, 1.0), abs=1e-9)
    lows, highs = clopper_pearson(np.array([0, 10]), np.array([10, 10]), 0.95, sided="one")
    np.testing.assert_allclose(lows, [0.0, 0.7411344491], atol=1e-9)
    np.testing.assert_allclose(highs, [0.2588655508, 1.0], atol=1e-9)
    with pytest.raises(UserError):
        clopper_pearson(11, 10)
    with pytest.raises(UserError):
        clopper_pearson(1, 10, 1.0)


# ---------------------------------------------------------------- epsilon_lower_bound


def test_epsilon_lower_bound_by_hand():
    # 1000 members, 1000 non-members, TP = 500, FP = 10, delta = 0, 95% overall: each one-sided
    # limit at 97.5%. TPR_low ~ 0.5 - 1.96 sqrt(0.25 / 1000) = 0.469 (exact 0.46855),
    # FPR_high ~ 0.0183 for 10/1000. Form 1: ln(0.46855 / 0.018313) = ln(25.586) = 3.2420;
    # form 2: ln((1 - 0.018313) / (1 - 0.46855)) = ln(1.8472) = 0.6137. The bound is form 1.
    tpr_low = stats.beta.ppf(0.025, 500, 1000 - 500 + 1)
    fpr_high = stats.beta.ppf(0.975, 10 + 1, 1000 - 10)
    assert tpr_low == pytest.approx(0.46855, abs=1e-5) and fpr_high == pytest.approx(0.018313, abs=1e-6)
    form1 = math.log(tpr_low / fpr_high)
    form2 = math.log((1 - fpr_high) / (1 - tpr_low))
    assert form1 == pytest.approx(3.2420, abs=1e-4) and form2 == pytest.approx(0.6137, abs=1e-4)
    assert epsilon_lower_bound(500, 500, 10, 990, delta=0.0) == pytest.approx(form1, rel=1e-10)
    # delta = 0.01 comes off form 1's numerator: ln((0.46855 - 0.01) / 0.018313) = 3.2205
    assert epsilon_lower_bound(500, 500, 10, 990, delta=0.01) == pytest.approx(
        math.log((tpr_low - 0.01) / fpr_high), rel=1e-10
    )
    # the mirror-image attack (TP = 990, FP = 500) is bounded by form 2 with the same numbers:
    # 1 - FPR_high(500/1000) = TPR_low(500/1000) and 1 - TPR_low(990/1000) = FPR_high(10/1000)
    assert epsilon_lower_bound(990, 10, 500, 500, delta=0.0) == pytest.approx(form1, rel=1e-9)


def test_epsilon_lower_bound_no_evidence_and_guards():
    assert epsilon_lower_bound(500, 500, 500, 500, delta=0.0) == 0.0  # chance: nothing refuted
    assert epsilon_lower_bound(10, 990, 500, 500, delta=0.0) == 0.0  # worse than chance: 0
    # delta above TPR_low kills form 1; form 2 is ln((1 - FPR_high - 0.6) / (1 - TPR_low)) < 0: 0
    assert epsilon_lower_bound(500, 500, 10, 990, delta=0.6) == 0.0
    with pytest.raises(UserError):
        epsilon_lower_bound(0, 0, 10, 990, delta=0.0)
    with pytest.raises(UserError):
        epsilon_lower_bound(500, 500, 10, 990, delta=1.0)
    with pytest.raises(UserError):
        epsilon_lower_bound(500, -1, 10, 990, delta=0.0)


def test_epsilon_lower_bound_monotone():
    by_tp = [epsilon_lower_bound(tp, 1000 - tp, 20, 980, 0.0) for tp in range(100, 1001, 50)]
    assert np.all(np.diff(by_tp) > 0)
    by_fp = [epsilon_lower_bound(600, 400, fp, 1000 - fp, 0.0) for fp in range(0, 300, 20)]
    assert np.all(np.diff(by_fp) < 0)
    by_confidence = [epsilon_lower_bound(600, 400, 20, 980, 0.0, c) for c in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)]
    assert np.all(np.diff(by_confidence) < 0)
    by_delta = [epsilon_lower_bound(600, 400, 20, 980, d) for d in (0.0, 1e-5, 1e-3, 1e-2, 0.1)]
    assert np.all(np.diff(by_delta) < 0)
    # the same rates on more trials: tighter limits, a larger bound
    by_size = [epsilon_lower_bound(6 * n, 4 * n, n // 5, 10 * n - n // 5, 0.0) for n in (50, 100, 1000, 10000)]
    assert np.all(np.diff(by_size) > 0)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_epsilon_lower_bound_on_randomized_response(eps):
    # members say "in" with probability q = e^eps / (1 + e^eps), non-members with 1 - q: exactly
    # eps-DP, and both DP inequalities are tight (TPR / FPR = (1 - FPR) / (1 - TPR) = e^eps)
    q = rr_probability(eps)
    rng = np.random.default_rng(int(100 * eps))
    for n in (1000, 100_000):
        bounds = []
        for _ in range(REPETITIONS):
            tp, fp = int(rng.binomial(n, q)), int(rng.binomial(n, 1 - q))
            bounds.append(epsilon_lower_bound(tp, n - tp, fp, n - fp, delta=0.0))
        bounds = np.array(bounds)
        assert np.sum(bounds > eps) <= MAX_MISSES
        if n == 100_000:
            # expected about ln((q - 1.96 s) / (1 - q + 1.96 s)), s = sqrt(q (1 - q) / n): 0.986 at
            # eps = 1, i.e. within a few hundredths of the truth
            assert np.mean(bounds) > eps - 0.05


# ---------------------------------------------------------------- threshold_then_bound


def test_threshold_then_bound_perfect_separation_by_hand():
    # members all score 1, non-members 0; the choosing half picks t = 0 (all its members above,
    # no non-member), and the bounding half of 500 + 500 has TP = 500, FP = 0. One-sided 97.5%
    # limits: TPR_low = 0.025^(1/500) = exp(-3.688879 / 500) = exp(-0.0073778) = 0.9926494,
    # FPR_high = 1 - that = 0.0073506; both forms give ln(0.9926494 / 0.0073506) = ln(135.04) = 4.9056.
    eps, threshold = threshold_then_bound(np.ones(1000), np.zeros(1000), delta=0.0, confidence=0.95, seed=3)
    low = 0.025 ** (1 / 500)
    assert threshold == 0.0
    assert eps == pytest.approx(math.log(low / (1 - low)), rel=1e-9)
    assert eps == pytest.approx(4.9056, abs=1e-4)


def test_threshold_then_bound_is_seeded():
    rng = np.random.default_rng(5)
    members, nonmembers = rng.normal(1.0, size=300), rng.normal(size=300)
    assert threshold_then_bound(members, nonmembers, 0.0, seed=1) == threshold_then_bound(
        members, nonmembers, 0.0, seed=1
    )
    with pytest.raises(UserError):
        threshold_then_bound([1.0], [0.0, 1.0], 0.0)


def test_threshold_then_bound_on_laplace_mechanism():
    # score = membership bit + Laplace(1 / eps): eps-DP in the bit (sensitivity 1), and the best
    # threshold test reaches TPR / FPR = e^eps in the tails. The bound, with its threshold
    # chosen on the other half, stays below eps.
    eps = 1.0
    rng = np.random.default_rng(6)
    bounds = []
    for repetition in range(REPETITIONS):
        members = 1.0 + rng.laplace(scale=1 / eps, size=2000)
        nonmembers = rng.laplace(scale=1 / eps, size=2000)
        bounds.append(threshold_then_bound(members, nonmembers, delta=0.0, seed=repetition)[0])
    bounds = np.array(bounds)
    assert np.sum(bounds > eps) <= MAX_MISSES
    assert np.mean(bounds) > 0.5  # and it has power: the audit finds most of eps


# ---------------------------------------------------------------- one-run audit


def test_one_run_p_value_by_hand():
    # eps = ln 3: q = 3 / 4. P(Bin(3, 3/4) >= 3) = 27/64.
    assert one_run_p_value(10, 3, 3, math.log(3)) == pytest.approx(27 / 64, rel=1e-12)
    # P(Bin(4, 3/4) >= 3) = 4 (3/4)^3 (1/4) + (3/4)^4 = 108/256 + 81/256 = 189/256
    assert one_run_p_value(10, 4, 3, math.log(3)) == pytest.approx(189 / 256, rel=1e-12)
    # with delta = 0.01, m = 10, r = v = 2: tail P(W >= 2) = 9/16; alpha = max(P(W = 1) / 1,
    # P(W <= 1) / 2) = max(6/16, 7/32) = 3/8; p = 9/16 + 2 * 10 * 0.01 * 3/8 = 0.6375
    assert one_run_p_value(10, 2, 2, math.log(3), delta=0.01) == pytest.approx(0.6375, rel=1e-12)
    assert one_run_p_value(10, 0, 0, 1.0) == 1.0  # no guesses: nothing refuted


def test_one_run_epsilon_closed_forms():
    # all 10 guesses right, delta = 0: p(eps) = q^10 < 0.05 iff q < 0.05^(1/10) = 0.741134,
    # eps_lb = ln(0.741134 / 0.258866) = 1.051873
    assert one_run_epsilon(100, 10, 10, beta=0.05) == pytest.approx(1.051873, abs=1e-6)
    # 9 of 10 right: p(eps) = 10 q^9 (1 - q) + q^10 = q^9 (10 - 9 q); solve = 0.05 independently
    q = optimize.brentq(lambda x: x**9 * (10 - 9 * x) - 0.05, 0.5, 1.0, xtol=1e-14)
    assert one_run_epsilon(100, 10, 9, beta=0.05) == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    # 5 of 10 (chance) refutes nothing
    assert one_run_epsilon(100, 10, 5) == 0.0


def test_one_run_audit_counts_guesses():
    # 12 canaries by decreasing score; "in" for the top 5, "out" for the bottom 5, abstain on 2.
    # Top 5 bits 1,1,1,1,1 (5 right), bottom 5 bits 0,0,1,0,0 (4 right): v = 9 of r = 10.
    scores = np.arange(12.0)[::-1]
    included = np.array([1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 0])
    q = optimize.brentq(lambda x: x**9 * (10 - 9 * x) - 0.05, 0.5, 1.0, xtol=1e-14)
    assert one_run_audit(scores, included, 5, 5) == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    # guessing everything: the two abstained canaries (bits 0, 1) join as a wrong "in" and a wrong
    # "out": v = 9 of r = 12, P(Bin(12, 1/2) >= 9) = (220 + 66 + 12 + 1) / 4096 = 0.073 >= 0.05
    assert one_run_p_value(12, 12, 9, 0.0) == pytest.approx(299 / 4096, rel=1e-12)
    assert one_run_audit(scores, included, 6, 6) == 0.0
    with pytest.raises(UserError):
        one_run_audit(scores, included, 7, 6)
    with pytest.raises(UserError):
        one_run_audit(scores, included[:-1], 5, 5)


def test_one_run_bound_monotone():
    by_correct = [one_run_epsilon(1000, 200, v) for v in range(120, 201, 10)]
    assert np.all(np.diff(by_correct) > 0)
    by_delta = [one_run_epsilon(1000, 200, 180, delta=d) for d in (0.0, 1e-6, 1e-5, 1e-4)]
    assert np.all(np.diff(by_delta) < 0)


def test_one_run_audit_on_randomized_response_canaries():
    # m = 1000 canaries, each in with probability 1/2; the trained "model" releases one
    # randomized-response bit per canary (eps-DP in each canary's inclusion). The auditor
    # guesses "in" on 100 released 1s and "out" on 100 released 0s: v ~ Binomial(200, q), the
    # tight case of Theorem 3.1.
    eps, m = 1.0, 1000
    q = rr_probability(eps)
    rng = np.random.default_rng(7)
    bounds = []
    for _ in range(REPETITIONS):
        included = rng.random(m) < 0.5
        released = np.where(rng.random(m) < q, included, ~included)
        bounds.append(one_run_audit(released.astype(float), included, 100, 100, beta=0.05))
    bounds = np.array(bounds)
    assert np.sum(bounds > eps) <= MAX_MISSES
    assert np.mean(bounds) > 0.5


# ---------------------------------------------------------------- f-DP in one run (Mahloujifar et al.)


def test_fdp_recursion_by_hand():
    # pure eps-DP, v = r = 2 guesses, both right. With p = e^eps / (1 + e^eps) and e = e^-eps the
    # recursion reads h_2 = 0, r_2 = 2 tau / m; h_1 = e r_2, r_1 = r_2 + h_1 = r_2 (1 + e);
    # h_0 = e r_1, r_0 = r_1; r_0 + h_0 = (2 tau / m) (1 + e)^2 <= 2 / m iff tau <= p^2: the
    # binomial tail P(Bin(2, p) = 2) of Steinke et al., so both analyses refute exactly below p^2.
    eps, m = math.log(3), 50
    p = 3 / 4
    inverse = eps_delta_inverse_blow_up(eps, 0.0)
    assert fdp_one_run_refutes(inverse, m, 2, 2, beta=p**2 + 1e-9) and not fdp_one_run_refutes(inverse, m, 2, 2, p**2)
    # with delta: h_1 = e (r_2 - delta), r_1 = r_2 + h_1, h_0 = e (r_1 - delta): the largest
    # consistent tau is p^2 (1 + (m delta / 2) e (2 + e)), by the same algebra
    delta = 1e-3
    inverse = eps_delta_inverse_blow_up(eps, delta)
    e = 1 / 3
    tau = p**2 * (1 + m * delta / 2 * e * (2 + e))
    assert fdp_one_run_refutes(inverse, m, 2, 2, tau + 1e-9) and not fdp_one_run_refutes(inverse, m, 2, 2, tau - 1e-9)
    # one guess, right: never refuted at any level below p (randomized response gets it right with p)
    assert not fdp_one_run_refutes(eps_delta_inverse_blow_up(eps, 0.0), m, 1, 1, p - 1e-9)
    # the inverse blow-up of (eps, delta): e^-eps (y - delta) for small y, 1 - delta - e^eps (1 - y) near 1
    assert inverse(0.5) == pytest.approx((0.5 - delta) / 3) and inverse(0.9999) == pytest.approx(1 - delta - 3e-4)
    assert inverse(delta / 2) == 0.0
    with pytest.raises(UserError):
        fdp_one_run_refutes(inverse, 10, 3, 4, 0.05)


def test_fdp_bound_agrees_with_steinke_without_delta_and_keeps_its_power_with_it():
    # all guesses right, delta = 0: the same closed form as Steinke et al. (q^10 = 0.05)
    assert fdp_one_run_epsilon(100, 10, 10, beta=0.05) == pytest.approx(1.051873, abs=1e-6)
    # some wrong, delta = 0: the two analyses within a few hundredths of each other
    for m, r, v in [(500, 100, 95), (1000, 200, 180), (500, 100, 90)]:
        assert fdp_one_run_epsilon(m, r, v) == pytest.approx(one_run_epsilon(m, r, v), abs=0.03)
    # delta = 1 / 291 (the CI world's) with 500 canaries: Steinke et al.'s 2 m delta term leaves
    # nothing, the f-DP bound keeps most of its delta = 0 value
    assert one_run_epsilon(500, 100, 100, delta=1 / 291) == 0.0
    assert fdp_one_run_epsilon(500, 100, 100, delta=1 / 291) > 3.2
    by_correct = [fdp_one_run_epsilon(500, 100, v, 1e-3) for v in range(60, 101, 10)]
    assert np.all(np.diff(by_correct) > 0)
    by_delta = [fdp_one_run_epsilon(500, 100, 95, d) for d in (0.0, 1e-4, 1e-3, 1e-2)]
    assert np.all(np.diff(by_delta) < 0)
    assert fdp_one_run_epsilon(500, 100, 50) == 0.0  # chance refutes nothing


def _guess(scores, included, k):
    order = np.argsort(-scores, kind="stable")
    return int(included[order[:k]].sum()) + int((~included[order[len(scores) - k :]]).sum())


def test_fdp_bound_on_the_worst_eps_delta_mechanism():
    # The mechanism whose trade-off curve is exactly (eps, delta)-DP's: with probability delta it
    # reveals the canary's bit, else randomized response with eps. 1000 canaries, 100 + 100
    # guesses; the bound stays below eps in at least 95% of repetitions (up to MAX_MISSES) and
    # finds most of it, where Steinke et al.'s (same guesses, same delta) finds much less.
    eps, delta, m = 1.0, 1e-3, 1000
    rng = np.random.default_rng(11)
    fdp, steinke = [], []
    for _ in range(REPETITIONS):
        included = rng.random(m) < 0.5
        revealed = rng.random(m) < delta
        released = np.where(rng.random(m) < rr_probability(eps), included, ~included).astype(float)
        released = np.where(revealed, np.where(included, 2.0, -1.0), released) + 1e-3 * rng.random(m)
        v = _guess(released, included, 100)
        fdp.append(fdp_one_run_epsilon(m, 200, v, delta))
        steinke.append(one_run_epsilon(m, 200, v, delta))
    fdp, steinke = np.array(fdp), np.array(steinke)
    assert np.sum(fdp > eps) <= MAX_MISSES
    assert np.mean(fdp) > 0.55 and np.mean(fdp) > np.mean(steinke) + 0.2


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact eps at delta of the Gaussian mechanism with sensitivity / sigma = mu (Balle and
    Wang, ICML 2018, Theorem 8; mu-GDP, Dong, Roth and Su 2022, Corollary 2.13):
    Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2) = delta."""

    def excess(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    return optimize.brentq(excess, 0.0, 100.0, xtol=1e-10)


def test_gaussian_mechanism_epsilon():
    # mu = 1 is the Gaussian mechanism with sigma = 1: Opacus' PRV accountant of one unsampled step
    # gives 4.387 at delta 1e-5 (its discretisation errs upward)
    assert gaussian_epsilon(1.0, 1e-5) == pytest.approx(4.387, abs=0.02)


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_fdp_bound_on_the_gaussian_mechanism(mu):
    # each canary's score is mu b + N(0, 1): exactly mu-GDP in its bit b, so (eps(delta), delta)-DP
    # for the eps of `gaussian_epsilon`. The bound at delta stays below it and is positive.
    delta, m = 1e-5, 1000
    truth = gaussian_epsilon(mu, delta)
    rng = np.random.default_rng(int(10 * mu))
    bounds = []
    for _ in range(REPETITIONS // 2):
        included = rng.random(m) < 0.5
        scores = mu * included + rng.normal(size=m)
        bounds.append(fdp_one_run_epsilon(m, 200, _guess(scores, included, 100), delta))
    bounds = np.array(bounds)
    assert np.sum(bounds > truth) <= int(stats.binom.ppf(0.999, len(bounds), 0.05))
    assert np.mean(bounds) > (1.2 if mu == 1.0 else 3.0)
