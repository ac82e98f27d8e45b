"""Canary exposure and d-exposure (mlmia.memorization.exposure) against brute-force
enumeration of the secret space, hand computations and scipy's skew-normal."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from scipy import stats

from mlmia.core.errors import UserError
from mlmia.memorization.exposure import d_exposure, exact_rank, exposure, mean_d_exposure, skewnorm_exposure


def brute_force(logp: np.ndarray, canary: tuple[int, ...], tol: float = 1e-9) -> tuple[int, int]:
    """(1 + #strictly more likely, #other candidates tied) by scoring every candidate."""
    d, size = logp.shape
    grid = np.array(list(itertools.product(range(size), repeat=d)))
    scores = logp[np.arange(d), grid].sum(axis=1)
    own = logp[np.arange(d), np.asarray(canary)].sum()
    return 1 + int(np.sum(scores > own + tol)), int(np.sum(np.abs(scores - own) <= tol)) - 1


def log_softmax(x: np.ndarray) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("d", [3, 5])
def test_exact_rank_matches_enumeration_on_random_logp(d):
    rng = np.random.default_rng(d)
    logp = log_softmax(rng.normal(scale=2.0, size=(d, 10)))
    for _ in range(20):
        canary = tuple(int(c) for c in rng.integers(0, 10, size=d))
        assert exact_rank(logp, canary, return_ties=True) == brute_force(logp, canary)


@pytest.mark.parametrize("d", [3, 5])
def test_exact_rank_counts_ties_like_enumeration(d):
    # scores on a lattice of multiples of 1/4 (exact in floating point): many candidates tie
    rng = np.random.default_rng(10 + d)
    logp = -0.25 * rng.integers(0, 6, size=(d, 10)).astype(float)
    seen_ties = 0
    for _ in range(30):
        canary = tuple(int(c) for c in rng.integers(0, 10, size=d))
        rank, ties = exact_rank(logp, canary, return_ties=True)
        assert (rank, ties) == brute_force(logp, canary)
        seen_ties += ties > 0
    assert seen_ties == 30  # the lattice makes every canary tie with others
    assert exact_rank(logp, canary) == rank  # without return_ties: the rank alone


def test_exact_rank_with_one_duplicated_symbol():
    # position 0 has symbols 3 and 7 equally likely: the canary with 3 ties exactly with its twin
    rng = np.random.default_rng(7)
    logp = log_softmax(rng.normal(size=(4, 10)))
    logp[0, 7] = logp[0, 3]
    canary = (3, 1, 4, 1)
    rank, ties = exact_rank(logp, canary, return_ties=True)
    assert ties == 1
    assert (rank, ties) == brute_force(logp, canary)
    assert exact_rank(logp, (7, 1, 4, 1), return_ties=True) == (rank, 1)


@pytest.mark.parametrize("d", [3, 5])
def test_most_and_least_likely_canaries(d):
    rng = np.random.default_rng(20 + d)
    logp = log_softmax(rng.normal(size=(d, 10)))
    assert exact_rank(logp, tuple(np.argmax(logp, axis=1))) == 1
    assert exact_rank(logp, tuple(np.argmin(logp, axis=1))) == 10**d


def test_exact_rank_d12_lexicographic_and_fast():
    # logp[i, v] = -v 10^(11 - i): candidates ordered by their 12-digit number, so the rank of
    # a canary is its number + 1 (integers below 2^53: exact)
    d = 12
    logp = -np.arange(10.0)[None, :] * 10.0 ** np.arange(d - 1, -1, -1)[:, None]
    canary = (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8)
    start = time.perf_counter()
    rank, ties = exact_rank(logp, canary, return_ties=True)
    elapsed = time.perf_counter() - start
    assert (rank, ties) == (314159265358 + 1, 0)
    assert elapsed < 1.5  # about 0.2 s here; "well under a second" with headroom for a busy machine


def test_exact_rank_d12_digit_sum_ties():
    # logp[i, v] = -v: a candidate's score is minus its digit sum. The number of 12-digit strings
    # with digit sum s is the coefficient of x^s in (1 + x + ... + x^9)^12.
    d = 12
    logp = -np.tile(np.arange(10.0), (d, 1))
    counts = np.array([1], dtype=np.int64)
    for _ in range(d):
        counts = np.convolve(counts, np.ones(10, dtype=np.int64))
    canary = (9, 0, 0, 2, 7, 1, 0, 0, 0, 3, 0, 1)  # digit sum 23
    rank, ties = exact_rank(logp, canary, return_ties=True)
    assert rank == 1 + int(counts[:23].sum())
    assert ties == int(counts[23]) - 1
    assert counts.sum() == 10**12


def test_exact_rank_rejects_bad_input():
    logp = np.zeros((3, 10))
    with pytest.raises(UserError):
        exact_rank(logp, (1, 2))
    with pytest.raises(UserError):
        exact_rank(logp, (1, 2, 10))
    bad = logp.copy()
    bad[0, 0] = np.nan
    with pytest.raises(UserError):
        exact_rank(bad, (1, 2, 3))


def test_exposure_by_hand():
    # rank 1 among 10^4: log2(10^4) = 4 log2(10) = 4 * 3.321928094887362 = 13.287712379549449
    assert exposure(1, 10**4) == pytest.approx(13.287712379549449, rel=1e-12)
    # rank 10 among 10^4: log2(10^3) = 9.965784284662087
    assert exposure(10, 10**4) == pytest.approx(9.965784284662087, rel=1e-12)
    assert exposure(10**4, 10**4) == 0.0
    # |R| = 2^100 (beyond float64's exact integers), rank 2^40: exactly 60 bits
    assert exposure(2**40, 2**100) == 60.0
    np.testing.assert_allclose(exposure(np.array([1, 2, 8]), 16), [4.0, 3.0, 1.0])
    with pytest.raises(UserError):
        exposure(0, 10)
    with pytest.raises(UserError):
        exposure(11, 10)


@pytest.mark.parametrize("bits", [1.0, 6.0, 12.0])
def test_skewnorm_exposure_recovers_known_tail(bits):
    # scores from a known skew-normal; a canary at the quantile with upper tail 2^-bits has true
    # exposure `bits` (scipy.stats.skewnorm.sf with the true parameters says so independently)
    shape, loc, scale = 4.0, -30.0, 5.0
    canary = float(stats.skewnorm.isf(2.0**-bits, shape, loc, scale))
    truth = -math.log2(stats.skewnorm.sf(canary, shape, loc, scale))
    assert truth == pytest.approx(bits, rel=1e-6)
    sample = stats.skewnorm.rvs(shape, loc, scale, size=5000, random_state=np.random.default_rng(1))
    estimate, (a, m, s) = skewnorm_exposure(canary, sample, return_fit=True)
    # 5000 samples: over 40 other seeds the error had standard deviation 0.015, 0.10 and 0.22
    # bits at 1, 6 and 12 bits (12 bits is at the sample's own 1/5000 = 2^-12.3 resolution);
    # the tolerance 0.05 + 0.07 bits is about 4 of those standard deviations
    assert estimate == pytest.approx(truth, abs=0.05 + 0.07 * bits)
    assert (
        a == pytest.approx(shape, rel=0.25) and m == pytest.approx(loc, abs=0.5) and s == pytest.approx(scale, rel=0.1)
    )


def test_skewnorm_exposure_far_tail_stays_finite():
    # a canary far above every sample: the tail underflows double precision and is integrated in
    # log space. For shape a > 0 the upper tail is 2 (1 - Phi(z)) to leading order
    # (Phi(a z) -> 1), i.e. log sf ~ log 2 + log(1 - Phi(z)).
    sample = stats.skewnorm.rvs(3.0, size=4000, random_state=np.random.default_rng(2))
    estimate, (a, m, s) = skewnorm_exposure(60.0, sample, return_fit=True)
    z = (60.0 - m) / s
    leading = -(math.log(2.0) + stats.norm.logsf(z)) / math.log(2.0)
    assert math.isfinite(estimate) and estimate > 1000
    assert estimate == pytest.approx(leading, rel=1e-3)


def test_skewnorm_exposure_orders_like_exact_ranks():
    # toy secret space: 6 positions x 10 symbols (10^6 candidates), scored by one "forward pass"
    rng = np.random.default_rng(3)
    d = 6
    logp = log_softmax(rng.normal(scale=1.5, size=(d, 10)))
    sampled = rng.integers(0, 10, size=(3000, d))
    sampled_scores = logp[np.arange(d), sampled].sum(axis=1)
    canaries = [tuple(int(c) for c in rng.integers(0, 10, size=d)) for _ in range(12)]
    canaries.append(tuple(int(c) for c in np.argmax(logp, axis=1)))
    ranks = np.array([exact_rank(logp, c) for c in canaries])
    extrapolated = np.array([skewnorm_exposure(logp[np.arange(d), list(c)].sum(), sampled_scores) for c in canaries])
    order = np.argsort(ranks)
    assert len(set(ranks.tolist())) == len(ranks)
    assert np.all(np.diff(extrapolated[order]) < 0)  # the higher the exact rank, the lower the estimate
    # and the estimate is near the exact exposure where the sample covers the rank
    exact = np.array([exposure(int(r), 10**d) for r in ranks])
    covered = exact < 8
    assert np.all(np.abs(extrapolated[covered] - exact[covered]) < 0.75)


def test_skewnorm_exposure_degenerate_inputs():
    with pytest.raises(UserError):
        skewnorm_exposure(0.0, [1.0, 2.0])
    with pytest.raises(UserError):
        skewnorm_exposure(0.0, np.full(100, -3.0))
    with pytest.raises(UserError):
        skewnorm_exposure(0.0, [1.0, np.nan, 2.0, 3.0])
    with pytest.raises(UserError):
        skewnorm_exposure(np.inf, [1.0, 2.0, 3.0, 4.0])
    # a canary far below every sample: the whole space is at least as likely, exposure ~ 0
    sample = np.random.default_rng(4).normal(size=1000)
    assert skewnorm_exposure(-50.0, sample) == pytest.approx(0.0, abs=1e-9)


# d-exposure: class C_i with |C_i| = 5, the inserted word w and 4 other candidate words.
CANDIDATE_CONFIDENCE = np.array([0.9, 0.6, 0.7, 0.3])
CANDIDATE_LABELLED = np.array([True, True, False, True])  # the 0.7 candidate is tagged otherwise


def test_d_exposure_inserted_word_first():
    # w at 0.95: nobody at or above it, rank 1 of 5 -> log2 5 = 2.321928094887362
    assert d_exposure(0.95, True, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == pytest.approx(2.321928094887362)


def test_d_exposure_inserted_word_in_the_middle():
    # w at 0.5: candidates 0.9 and 0.6 are labelled C_i and above it; 0.7 is mislabelled and
    # counts below; rank = 1 + 2 = 3 of 5 -> -log2(3/5) = log2(5/3) = 0.7369655941662062
    assert d_exposure(0.5, True, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == pytest.approx(0.7369655941662062)
    # had the 0.7 candidate been labelled C_i, rank 4 of 5 -> log2(5/4) = 0.32192809488736235
    assert d_exposure(0.5, True, CANDIDATE_CONFIDENCE, np.ones(4, bool)) == pytest.approx(0.32192809488736235)


def test_d_exposure_mislabelled_candidate_counts_below():
    # w at 0.65: only 0.9 is above among the labelled ones (0.7 is above but mislabelled);
    # rank 2 of 5 -> log2(5/2) = 1.3219280948873624
    assert d_exposure(0.65, True, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == pytest.approx(1.3219280948873624)


def test_d_exposure_ties_count_against_the_inserted_word():
    # w at exactly 0.6: the 0.6 candidate is "at least" as confident; rank 3 of 5
    assert d_exposure(0.6, True, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == pytest.approx(math.log2(5 / 3))


def test_d_exposure_inserted_word_mislabelled_is_zero():
    assert d_exposure(0.95, False, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == 0.0


def test_d_exposure_last_and_mean():
    # w below every labelled candidate: rank 4 of 5 (0.7 is mislabelled) -> log2(5/4)
    assert d_exposure(0.1, True, CANDIDATE_CONFIDENCE, CANDIDATE_LABELLED) == pytest.approx(math.log2(5 / 4))
    # w below all, all labelled: rank 5 of 5 -> 0
    assert d_exposure(0.1, True, CANDIDATE_CONFIDENCE, np.ones(4, bool)) == 0.0
    # mean over three classes: (log2 5 + 0 + 1) / 3
    assert mean_d_exposure([math.log2(5), 0.0, 1.0]) == pytest.approx((2.321928094887362 + 1.0) / 3)
    with pytest.raises(UserError):
        mean_d_exposure([])
    with pytest.raises(UserError):
        d_exposure(0.5, True, [0.1, 0.2], [True])
