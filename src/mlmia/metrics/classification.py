"""Metrics of a membership decision: pure functions on arrays.

`y_true` is 1 for a member and 0 for a non-member; `score` is a member score, higher meaning
"member" (an attack's `member_score`). Thresholds are in the same space: a unit is called a
member when its score is strictly above the threshold.
"""

from __future__ import annotations

import math

import numpy as np

from mlmia.core.errors import UserError


def check_scores(score, what: str = "scores") -> np.ndarray:
    """`score` as a 1-d float array of finite numbers; otherwise one clear error (a NaN that
    reaches a metric is a defect upstream, never a value to rank)."""
    s = np.asarray(score, dtype=float)
    if s.ndim != 1:
        raise UserError(f"metrics: {what} must be one-dimensional, got shape {s.shape}")
    bad = int(np.count_nonzero(~np.isfinite(s)))
    if bad:
        raise UserError(f"metrics: {what} hold {bad} value(s) that are not finite numbers (NaN or infinite)")
    return s


def check_binary(values, what: str = "labels") -> np.ndarray:
    """`values` as a 1-d boolean array: booleans, or 0 and 1 (1: member); otherwise one clear error."""
    y = np.asarray(values)
    if y.ndim != 1:
        raise UserError(f"metrics: {what} must be one-dimensional, got shape {y.shape}")
    if y.dtype != bool:
        if y.size and not np.isin(y, (0, 1)).all():
            raise UserError(f"metrics: {what} must be binary (1 member, 0 non-member, or booleans)")
        y = y.astype(bool)
    return y


def check_labels_and_scores(y_true, score) -> tuple[np.ndarray, np.ndarray]:
    """(labels as booleans, scores as floats), checked as scikit-learn checks a binary
    classifier's input (`check_consistent_length`, a binary `type_of_target`, finite values):
    the same length, labels 0/1 or booleans, finite scores."""
    y, s = check_binary(y_true), check_scores(score)
    if len(y) != len(s):
        raise UserError(f"metrics: inconsistent numbers of samples: {len(y)} labels and {len(s)} scores")
    return y, s


def roc(y_true: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """False- and true-positive rates at every distinct threshold, from (0, 0) to (1, 1).

    The receiver operating characteristic (Fawcett, "An introduction to ROC analysis",
    Pattern Recognition Letters 27, 2006, Algorithm 1): units sorted by decreasing score, one
    point per distinct score (tied units enter together). The same points as
    `sklearn.metrics.roc_curve(..., drop_intermediate=False)`, without the (0, 0) duplicate.
    """
    y, s = check_labels_and_scores(y_true, score)
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last_of_tie = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1] if len(s) else np.zeros(0, dtype=int)
    tp = np.cumsum(y)[last_of_tie]
    fp = np.cumsum(~y)[last_of_tie]
    positives, negatives = int(y.sum()), int((~y).sum())
    tpr = np.r_[0.0, tp / positives] if positives else np.r_[0.0, np.zeros(len(tp))]
    fpr = np.r_[0.0, fp / negatives] if negatives else np.r_[0.0, np.zeros(len(fp))]
    return fpr, tpr


def auc(y_true: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve: the probability that a random member scores above a random
    non-member, ties counting one half (the Mann-Whitney U statistic over n1 n0; Hanley and
    McNeil, Radiology 143, 1982). Equals `sklearn.metrics.roc_auc_score`."""
    fpr, tpr = roc(y_true, score)
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def weighted_auc(y_true: np.ndarray, score: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`auc` with each unit counted `weights` times (a bootstrap replicate's multiplicities), for
    every row of `weights` (replicates x units; one row gives one value): sum over members and
    non-members of w_i w_j [s_i > s_j] + 1/2 w_i w_j [s_i = s_j], over (sum of member weights)
    (sum of non-member weights): the AUC of the data with each unit repeated its weight times.
    NaN where a row weighs no member or no non-member."""
    y, s = check_labels_and_scores(y_true, score)
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    if w.shape[1] != len(s):
        raise UserError(f"metrics: {w.shape[1]} weights per row for {len(s)} scores")
    if len(s) == 0:
        return np.full(w.shape[0], np.nan)
    order = np.argsort(s, kind="mergesort")
    starts = np.r_[0, np.flatnonzero(np.diff(s[order])) + 1]
    pos = np.add.reduceat(w[:, order] * y[order], starts, axis=1)
    neg = np.add.reduceat(w[:, order] * ~y[order], starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    den = pos.sum(axis=1) * neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (pos * (below + 0.5 * neg)).sum(axis=1) / den, np.nan)


#: the slack of `resolvable`'s fpr_max n >= 1, so that 0.001 x 1000 counts as one false positive
#: whatever the float rounding (shared by `nonmembers_to_resolve`, its inverse)
_ONE_FALSE_POSITIVE = 1.0 - 1e-9


def resolvable(fpr_max: float, n_negatives: int) -> bool:
    """Whether a true-positive rate at false-positive rate `fpr_max` can be estimated from
    `n_negatives` non-members: only when at least one false positive is allowed, i.e.
    fpr_max >= 1 / n_negatives. Below that, the only admissible threshold lets no
    non-member through, whatever `fpr_max` is, and the number says nothing about it."""
    return n_negatives > 0 and fpr_max * n_negatives >= _ONE_FALSE_POSITIVE


def nonmembers_to_resolve(fpr_max: float) -> int:
    """The fewest non-members with which a TPR at `fpr_max` is `resolvable`: ceil(1 / fpr_max).

    Parameters
    ----------
    fpr_max : float
        The false-positive rate, in (0, 1].

    Returns
    -------
    int
        The smallest n with ``resolvable(fpr_max, n)``: 100 at 1% FPR, 1,000 at 0.1%.

    Raises
    ------
    ValueError
        If `fpr_max` is not a real number in (0, 1].
    """
    if isinstance(fpr_max, bool) or not isinstance(fpr_max, (int, float, np.integer, np.floating)):
        raise ValueError(f"fpr_max must be a real number in (0, 1], got {fpr_max!r}")
    if not (math.isfinite(fpr_max) and 0.0 < fpr_max <= 1.0):
        raise ValueError(f"fpr_max must be in (0, 1], got {fpr_max!r}")
    return max(1, math.ceil(_ONE_FALSE_POSITIVE / float(fpr_max)))


def tpr_at_fpr(y_true: np.ndarray, score: np.ndarray, fpr_max: float) -> float:
    """The largest true-positive rate over thresholds whose false-positive rate is at most
    `fpr_max` (Carlini et al., "Membership inference attacks from first principles", IEEE
    S&P 2022, Section III: TPR at low FPR). NaN where `fpr_max` is not `resolvable`."""
    y, score = check_labels_and_scores(y_true, score)
    if not resolvable(fpr_max, int((~y).sum())):
        return math.nan
    fpr, tpr = roc(y, score)
    return float(tpr[fpr <= fpr_max + 1e-12].max())


def precision_recall(y_true: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """Precision and recall of "member" (0 precision when nothing is called a member, as
    scikit-learn's `zero_division=0`)."""
    y, p = check_binary(y_true), check_binary(predicted, "predictions")
    if len(p) != len(y):
        raise UserError(f"metrics: inconsistent numbers of samples: {len(y)} labels and {len(p)} predictions")
    true_positives = int(np.sum(y & p))
    called = int(p.sum())
    members = int(y.sum())
    return (true_positives / called if called else 0.0), (true_positives / members if members else 0.0)


def population_threshold(population_score: np.ndarray, alpha: float) -> float:
    """The threshold at which at most a fraction `alpha` of the population is called a member:
    the smallest t with at most floor(alpha n) population scores strictly above it (the
    paper's alpha-quantile of the statistic over population samples, Section 3)."""
    ordered = np.sort(check_scores(population_score, "population scores"))[::-1]
    if not len(ordered):
        raise UserError("metrics: no population score to take a threshold from")
    return float(ordered[min(int(math.floor(alpha * len(ordered))), len(ordered) - 1)])


def published_threshold(nonmember_score: np.ndarray, alpha: float) -> float:
    """The authors' "population" threshold, taken on the non-members themselves. Their script
    sorts the statistic (lower = member) in descending order and takes element
    int(n (1 - alpha)) + 1 (clipped to the last); here the same element, found from member
    scores (the statistic negated) and returned as a member-score threshold."""
    ordered = np.sort(-check_scores(nonmember_score, "non-member scores"))[::-1]
    index = min(int(len(ordered) * (1 - alpha)) + 1, len(ordered) - 1)
    return float(-ordered[index])


def heldin_mean_threshold(heldin_score: np.ndarray) -> float:
    """The loss baseline's mu threshold: the mean over known training samples (held-in
    members), Yeom et al. 2018 (the paper's "threshold at mu")."""
    return float(np.mean(check_scores(heldin_score, "held-in member scores")))
