"""Empirical lower bounds on the epsilon of differential privacy from a membership decision:
pure functions on counts and arrays.

Every test that tells a training set D from a neighbour D' through an (eps, delta)-DP
mechanism has TPR <= e^eps FPR + delta and 1 - FPR <= e^eps (1 - TPR) + delta (Kairouz, Oh
and Viswanath, "The composition theorem for differential privacy", ICML 2015, Theorem 2.1);
an attack's counts, turned into confidence limits on its rates, therefore refute every eps
below a bound (Jagielski, Ullman and Oprea, "Auditing differentially private machine learning:
How private is private SGD?", NeurIPS 2020, Algorithm 2; Nasr, Song, Thakurta, Papernot and
Carlini, "Adversary instantiation: Lower bounds for differentially private machine
learning", IEEE S&P 2021). `one_run_audit` is the one-training-run audit of Steinke, Nasr and
Jagielski (NeurIPS 2023); `fdp_one_run_epsilon` the f-DP analysis of the same guesses
(Mahloujifar, Melis and Chaudhuri, ICML 2025), which keeps its power where the accountant's
delta times the number of canaries is not small.

Scores are member scores, higher meaning "member"; a unit is called a member when its score
is strictly above the threshold (as in `mlmia.metrics.classification`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from mlmia.core.errors import UserError
from mlmia.metrics.intervals import check_confidence, clopper_pearson


def _epsilon_from_counts(
    tp: np.ndarray, positives: np.ndarray, fp: np.ndarray, negatives: np.ndarray, delta: float, confidence: float
) -> np.ndarray:
    """`epsilon_lower_bound`, vectorised over arrays of counts."""
    level = 1.0 - (1.0 - confidence) / 2.0  # each of the two one-sided limits (Bonferroni)
    tpr_low, _ = clopper_pearson(tp, positives, level, sided="one")
    _, fpr_high = clopper_pearson(fp, negatives, level, sided="one")
    tpr_low, fpr_high = np.asarray(tpr_low), np.asarray(fpr_high)
    best = np.zeros(np.broadcast(tpr_low, fpr_high).shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for numerator, denominator in ((tpr_low - delta, fpr_high), (1.0 - fpr_high - delta, 1.0 - tpr_low)):
            usable = (numerator > 0) & (denominator > 0)
            form = np.where(usable, np.log(np.where(usable, numerator / denominator, 1.0)), 0.0)
            best = np.maximum(best, form)
    return best


def _check_delta(delta: float) -> None:
    if not 0 <= delta < 1:
        raise UserError(f"delta must lie in [0, 1), got {delta!r}")


def epsilon_lower_bound(tp: int, fn: int, fp: int, tn: int, delta: float, confidence: float = 0.95) -> float:
    """A lower bound on eps, valid with probability at least `confidence`, from the confusion
    counts of one membership test: eps_lb = max(log((TPR_low - delta) / FPR_high),
    log((1 - FPR_high - delta) / (1 - TPR_low)), 0).

    An (eps, delta)-DP mechanism makes every test satisfy TPR <= e^eps FPR + delta and
    1 - FPR <= e^eps (1 - TPR) + delta (Kairouz, Oh and Viswanath, ICML 2015, Theorem 2.1;
    the two forms are the test and its complement). Both forms are kept valid with a LOWER
    limit on the true-positive rate and an UPPER limit on the false-positive rate:
    TPR_low is the one-sided Clopper-Pearson lower limit of tp out of tp + fn members and
    FPR_high the one-sided upper limit of fp out of fp + tn non-members (`clopper_pearson`,
    sided="one"), each at level 1 - (1 - confidence) / 2, so that both hold at once with
    probability at least `confidence` (Bonferroni; no independence of the two samples is
    assumed), and then both forms are below the true eps. (The second form needs the same
    two limits: its numerator 1 - FPR is bounded below by 1 - FPR_high, its denominator
    1 - TPR above by 1 - TPR_low.) This is the bound of Jagielski et al., NeurIPS 2020,
    Algorithm 2, and Nasr et al., IEEE S&P 2021, with delta kept.

    Guards: a form whose numerator is <= 0 (delta at least as large as the rate) refutes
    nothing and is dropped; the denominators never vanish, since with at least one trial
    FPR_high > 0 and TPR_low < 1; the result is never below 0. An attack that calls members
    less often than non-members gets 0: negate its scores. The counts must come from
    independent trials of the test (for instance one trained model per trial), the
    assumption under which the Clopper-Pearson limits are exact.
    """
    counts = np.array([tp, fn, fp, tn])
    if not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
        raise UserError(f"tp, fn, fp, tn must be counts >= 0, got {tp!r}, {fn!r}, {fp!r}, {tn!r}")
    if tp + fn < 1 or fp + tn < 1:
        raise UserError("epsilon_lower_bound needs at least one member (tp + fn) and one non-member (fp + tn)")
    _check_delta(delta)
    check_confidence(confidence)
    return float(
        _epsilon_from_counts(np.int64(tp), np.int64(tp + fn), np.int64(fp), np.int64(fp + tn), delta, confidence)
    )


def threshold_then_bound(
    member_scores: np.ndarray,
    nonmember_scores: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """`epsilon_lower_bound` at a threshold chosen on data the bound does not use; returns
    (eps_lb, threshold).

    Members and non-members are each shuffled (numpy generator seeded with `seed`) and split
    in halves: the first floor(n / 2) of each for choosing, the rest for bounding. On the
    choosing half, every distinct score t is tried as a threshold ("member" when
    score > t) and the one with the largest `epsilon_lower_bound` (same delta and
    confidence) is kept, the smallest such t on ties. The bound is then computed from the
    bounding half's counts at that threshold alone. Because the threshold depends only on the
    choosing half, it is fixed for the bounding half, and the bound keeps its confidence;
    maximising over thresholds on the same data would not (a multiple-comparison bias, the
    reason Jagielski et al., NeurIPS 2020, and Nasr et al., IEEE S&P 2021, choose the
    threshold on separate trials).
    """
    members = np.asarray(member_scores, dtype=float).ravel()
    nonmembers = np.asarray(nonmember_scores, dtype=float).ravel()
    if len(members) < 2 or len(nonmembers) < 2:
        raise UserError("threshold_then_bound needs at least 2 members and 2 non-members (one per half)")
    if not (np.all(np.isfinite(members)) and np.all(np.isfinite(nonmembers))):
        raise UserError("threshold_then_bound needs finite scores")
    _check_delta(delta)
    check_confidence(confidence)
    rng = np.random.default_rng(seed)
    members, nonmembers = rng.permutation(members), rng.permutation(nonmembers)
    choose_m, bound_m = np.sort(members[: len(members) // 2]), members[len(members) // 2 :]
    choose_n, bound_n = np.sort(nonmembers[: len(nonmembers) // 2]), nonmembers[len(nonmembers) // 2 :]
    candidates = np.unique(np.concatenate([choose_m, choose_n]))
    tp = len(choose_m) - np.searchsorted(choose_m, candidates, side="right")
    fp = len(choose_n) - np.searchsorted(choose_n, candidates, side="right")
    values = _epsilon_from_counts(tp, np.int64(len(choose_m)), fp, np.int64(len(choose_n)), delta, confidence)
    threshold = float(candidates[int(np.argmax(values))])
    tp_b, fp_b = int(np.sum(bound_m > threshold)), int(np.sum(bound_n > threshold))
    eps = epsilon_lower_bound(tp_b, len(bound_m) - tp_b, fp_b, len(bound_n) - fp_b, delta, confidence)
    return eps, threshold


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float = 0.0) -> float:
    """The p-value of v or more correct guesses out of r, among m canaries, under (eps, delta)-DP:
    Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.

    With q = e^eps / (1 + e^eps) and W ~ Binomial(r, q),
    p = min(1, P(W >= v) + 2 m delta max_{i=1..v} P(v - i <= W < v) / i):
    for delta = 0 the binomial tail of their Theorem 3.1 (pure eps-DP: the number of correct
    guesses is stochastically dominated by Binomial(r, q)), for delta > 0 their approximate-DP
    bound (Section 5, Corollary 5.4 in arXiv:2305.08846), as computed by their Appendix D
    algorithm. Binomial terms are exact (scipy.stats.binom).
    """
    if not (0 <= v <= r <= m):
        raise UserError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if not (math.isfinite(eps) and eps >= 0):
        raise UserError(f"eps must be a finite number >= 0, got {eps!r}")
    _check_delta(delta)
    q = float(special.expit(eps))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, q))  # P(v - i <= W < v), i = 1..v
    alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * alpha, 1.0)


def one_run_epsilon(m: int, r: int, v: int, delta: float = 0.0, beta: float = 0.05) -> float:
    """The largest eps found refuted at level `beta` by v correct guesses out of r among m
    canaries (Steinke et al., NeurIPS 2023, Appendix D's bisection on `one_run_p_value`): a
    lower bound on the mechanism's eps with confidence 1 - beta.

    Returned: an eps_lb with one_run_p_value(eps_lb) < beta (0 when even eps = 0 is not
    refuted), found by doubling an upper bracket and bisecting to 1e-9. Any eps' with
    p(eps') < beta is a valid bound, monotone p or not: an (eps, delta)-DP mechanism is also
    (eps', delta)-DP for every eps' >= eps, so P(V >= v) <= min over eps' >= eps of p(eps', v)
    for every v, and the test "some eps' >= eps has p(eps', V) < beta" has level beta.
    """
    if not 0 < beta < 1:
        raise UserError(f"beta must lie in (0, 1), got {beta!r}")
    return _bisect_largest_refuted(lambda eps: one_run_p_value(m, r, v, eps, delta) < beta, "one_run_epsilon")


def one_run_audit(
    scores: np.ndarray,
    included: np.ndarray,
    k_plus: int,
    k_minus: int,
    delta: float = 0.0,
    beta: float = 0.05,
) -> float:
    """A lower bound on eps from one training run, Steinke, Nasr and Jagielski, "Privacy
    Auditing with One (1) Training Run", NeurIPS 2023 (Theorem 3.1 for delta = 0, the
    approximate-DP bound of their Section 5 otherwise; see `one_run_p_value`).

    m canaries were each included in training independently with probability 1/2
    (`included`, the true bits); `scores` are the auditor's scores from the trained model,
    higher meaning "in". The auditor guesses "in" for the `k_plus` highest scores, "out" for
    the `k_minus` lowest, and abstains on the rest (ties broken by position, which does not
    depend on the inclusion bits). With r = k_plus + k_minus guesses and v of them correct,
    returns `one_run_epsilon(m, r, v, delta, beta)`: with probability at least 1 - beta it is
    below the true eps. k_plus and k_minus must be fixed before seeing the results; trying
    several and keeping the best spends the confidence.
    """
    correct = one_run_correct(scores, included, k_plus, k_minus)
    return one_run_epsilon(len(np.ravel(scores)), k_plus + k_minus, correct, delta, beta)


def one_run_correct(scores: np.ndarray, included: np.ndarray, k_plus: int, k_minus: int) -> int:
    """The auditor's correct guesses: "in" for the `k_plus` highest scores, "out" for the
    `k_minus` lowest, abstaining on the rest (ties broken by position, which does not depend on
    the inclusion bits); v of `one_run_epsilon` and `fdp_one_run_epsilon`."""
    s = np.asarray(scores, dtype=float).ravel()
    bits = np.asarray(included).ravel()
    m = len(s)
    if m == 0 or len(bits) != m:
        raise UserError(f"scores and included must be non-empty and of the same length, got {m} and {len(bits)}")
    if not np.all(np.isfinite(s)):
        raise UserError("one_run_audit needs finite scores")
    if not np.all((bits == 0) | (bits == 1)):
        raise UserError("included must hold 0/1 (or boolean) inclusion bits")
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > m:
        raise UserError(f"need k_plus, k_minus >= 0 and k_plus + k_minus <= m = {m}, got {k_plus} and {k_minus}")
    bits = bits.astype(bool)
    order = np.argsort(-s, kind="stable")  # highest first, ties by position
    guessed_in = order[:k_plus]
    guessed_out = order[m - k_minus :] if k_minus else order[:0]
    return int(np.sum(bits[guessed_in])) + int(np.sum(~bits[guessed_out]))


# ---------------------------------------------------------------------------------- f-DP in one run


def _bisect_largest_refuted(refutes, what: str) -> float:
    """The largest parameter value x >= 0 with refutes(x) True, for a `refutes` that holds below
    some point and fails above it (0 when even x = 0 is not refuted): doubling, then bisection to
    1e-9. Any refuted x is a valid bound (see `one_run_epsilon`), so the result is one too."""
    if not refutes(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while refutes(high):
        low, high = high, 2.0 * high
        if high > 1e4:
            raise UserError(f"{what}: every parameter up to 1e4 is refuted (guesses inconsistent with any privacy)")
    while high - low > 1e-9:
        middle = (low + high) / 2.0
        if refutes(middle):
            low = middle
        else:
            high = middle
    return low


def eps_delta_inverse_blow_up(eps: float, delta: float):
    """The inverse blow-up of (eps, delta)-DP: y -> the least probability under one of two
    neighbouring inputs of an event that has probability y under the other,
    max(0, e^-eps (y - delta), 1 - delta - e^eps (1 - y)) (the trade-off function
    f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a)) of Kairouz, Oh and Viswanath, and
    Dong, Roth and Su, read at 1 - y)."""
    shrink, grow = math.exp(-eps), math.exp(min(eps, 700.0))

    def inverse(y: float) -> float:
        return max(0.0, shrink * (y - delta), 1.0 - delta - grow * (1.0 - y))

    return inverse


def fdp_one_run_refutes(inverse, m: int, r: int, v: int, beta: float) -> bool:
    """Whether v or more correct guesses out of r, among m canaries each included with probability
    1/2, refute at level `beta` every mechanism whose trade-off function has the inverse blow-up
    `inverse` (Mahloujifar, Melis and Chaudhuri, "Auditing f-differential privacy in one run",
    ICML 2025, their recursion for membership guesses with abstention).

    If such guesses had probability tau >= beta, the masses r_v = tau v / m (correct) and
    h_v = tau (r - v) / m (wrong) would, going down from i = v - 1 to 0 by
    h_i = max(h_(i+1), inverse(r_(i+1))) and r_i = r_(i+1) + i / (r - i) (h_i - h_(i+1)), end with
    r_0 + h_0 <= r / m; both grow with tau, so r_0 + h_0 > r / m at tau = beta shows that the
    probability is below beta. For pure eps-DP and all guesses right this is exactly
    P(Binomial(v, e^eps / (1 + e^eps)) = v), Steinke et al.'s bound (tests/test_privacy_bounds.py)."""
    if not (0 <= v <= r <= m) or r == 0:
        raise UserError(f"need 0 <= v <= r <= m and r >= 1, got v={v}, r={r}, m={m}")
    if v == 0:
        return False
    right = beta * v / m
    wrong = beta * (r - v) / m
    for i in range(v - 1, -1, -1):
        lifted = max(wrong, inverse(right))
        right += i / (r - i) * (lifted - wrong)
        wrong = lifted
    return right + wrong > r / m


def fdp_one_run_epsilon(m: int, r: int, v: int, delta: float = 0.0, beta: float = 0.05) -> float:
    """A lower bound on eps at `delta`, valid with probability 1 - `beta`, from v correct guesses
    out of r among m canaries (each included with probability 1/2): the largest eps whose
    (eps, delta)-DP trade-off curve the guesses refute (`fdp_one_run_refutes` with
    `eps_delta_inverse_blow_up`). Where m delta is not small (the accountant's delta = 1 /
    training lines, hundreds of canaries) Steinke et al.'s delta term, 2 m delta, leaves
    `one_run_epsilon` with nothing, while this bound stays close to its delta = 0 value."""
    _check_delta(delta)
    if not 0 < beta < 1:
        raise UserError(f"beta must lie in (0, 1), got {beta!r}")
    return _bisect_largest_refuted(
        lambda eps: fdp_one_run_refutes(eps_delta_inverse_blow_up(eps, delta), m, r, v, beta), "fdp_one_run_epsilon"
    )
