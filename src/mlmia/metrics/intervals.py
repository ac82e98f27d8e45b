"""Interval methods: every confidence interval the studies print is computed here.

- `percentile_interval`: the percentile bootstrap interval of replicate values (Efron and
  Tibshirani, "An introduction to the bootstrap", 1993, Section 13.3). The metrics' patient
  bootstrap (`mlmia.metrics.bootstrap`), the paired differences of two cells on the same
  replicates (tables' Δ, the findings) and the DP audit's utility take their intervals so.
- `group_bootstrap`: a mean of 0/1 rows (an accuracy) with the percentile interval of a bootstrap
  over groups of rows, the groups drawn as the patient bootstrap draws patients (the shadow
  study's documents and probe groups).
- `seed_interval`: the mean of per-seed values with its Student-t interval (n - 1 degrees of
  freedom; d-exposure over model seeds).
- `clopper_pearson`: exact binomial limits of a success probability (the DP lower bounds on ε).
- `patients_to_separate`: how many patients an interval that holds a null value (an AUC's 0.5)
  would need to exclude it, were the estimate to stay (the audit cards).

Each is a pure function of its arguments; the level is 0.95 unless given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.metrics.bootstrap import multiplicities

LEVEL = 0.95
SIDES = ("one", "two")


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile bootstrap interval (Efron and Tibshirani 1993, Section 13.3); NaN values
    (replicates where the metric is undefined) are left out, and all-NaN gives (NaN, NaN)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def patients_to_separate(
    estimate: float, interval: tuple[float, float], patients: int, null: float = 0.5
) -> int | None:
    """About how many patients would make an interval exclude `null`, were the estimate to stay:
    patients x (half-width / |estimate - null|)^2, rounded up.

    An approximation: a bootstrap interval's half-width shrinks like 1 / sqrt(n) in the number of
    patients resampled, so n' patients give half-width h sqrt(n / n'), which equals the distance
    |estimate - null| at the returned n'. The estimate itself moves with more data, and a
    percentile interval need not be symmetric (its half-width here is (high - low) / 2).

    Parameters
    ----------
    estimate : float
        The point estimate (an AUC), finite.
    interval : tuple of float
        Its interval (low, high), finite, low <= high.
    patients : int
        The patients the interval was resampled from, >= 1.
    null : float, default 0.5
        The value to exclude (an AUC's chance level).

    Returns
    -------
    int or None
        The patients, or None when the estimate equals `null`: no number of patients separates an
        estimate that sits at it.

    Raises
    ------
    ValueError
        If a number is not finite, low > high, or `patients` is not a positive integer.
    """
    if isinstance(patients, bool) or not isinstance(patients, (int, np.integer)) or patients < 1:
        raise ValueError(f"patients must be a positive integer, got {patients!r}")
    try:
        low, high = (float(v) for v in interval)
        estimate, null = float(estimate), float(null)
    except (TypeError, ValueError):
        raise ValueError(f"estimate, null and the interval's two limits must be numbers, got {estimate!r}, "
                         f"{null!r}, {interval!r}") from None  # fmt: skip
    if not all(math.isfinite(v) for v in (estimate, null, low, high)):
        raise ValueError(f"estimate, null and the interval must be finite, got {estimate}, {null}, ({low}, {high})")
    if low > high:
        raise ValueError(f"the interval's low limit {low} is above its high limit {high}")
    distance = abs(estimate - null)
    if distance == 0.0:
        return None
    half_width = (high - low) / 2.0
    # the slack keeps float noise (0.1 / 0.05 = 2.0000000000000004) from adding a patient
    return math.ceil(patients * (half_width / distance) ** 2 - 1e-9)


def group_bootstrap(
    correct: np.ndarray,
    groups: Sequence[str],
    labels: Sequence[bool] | None,
    seed: int,
    n_bootstrap: int,
    level: float = LEVEL,
    stratum: str = "",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(accuracy, ci_low, ci_high) per column of `correct` (rows x classifiers, 0/1): the
    mean over rows, and the percentile interval of the mean over `n_bootstrap` group
    resamples, every column on the same resamples (paired).

    A drawn group brings all its rows (the cluster bootstrap; Davison and Hinkley, "Bootstrap
    methods and their application", 1997, Section 3.8). When `labels` are given and no group
    holds both labels (in- and out-probe documents are disjoint), groups are drawn within each
    label, so every replicate keeps the in/out balance; otherwise (no labels, or a group of both)
    all groups are drawn together. Replicate b draws the groups of a stratum with
    `multiplicities(n_groups, seed, b, (stratum, label))` (`(stratum,)` unstratified), the
    draws of the project's `PatientResampler`, the groups in sorted order; a replicate's
    accuracy is sum(m_g * correct_g) / sum(m_g * size_g)."""
    correct = np.asarray(correct, dtype=float)
    if correct.ndim == 1:
        correct = correct[:, None]
    groups = np.asarray([str(g) for g in groups], dtype=object)
    n, n_cls = correct.shape
    if n == 0:
        nan = np.full(n_cls, np.nan)
        return nan, nan.copy(), nan.copy()
    point = correct.mean(axis=0)
    if labels is None:
        labels = np.zeros(n, dtype=bool)
        stratify = False
    else:
        labels = np.asarray(labels, dtype=bool)
        both = pd.DataFrame({"g": groups, "y": labels}).groupby("g")["y"].nunique()
        stratify = bool((both <= 1).all())
    keys = labels if stratify else np.zeros(n, dtype=bool)
    parts = []  # per stratum: (key, group sums of correct (G x C), group sizes (G,))
    for key in sorted(set(keys.tolist())):
        rows = keys == key
        frame = pd.DataFrame(correct[rows], columns=range(n_cls))
        frame["_g"] = groups[rows]
        sums = frame.groupby("_g", sort=True)
        parts.append((key, sums[list(range(n_cls))].sum().to_numpy(), sums.size().to_numpy(dtype=float)))
    values = np.empty((int(n_bootstrap), n_cls))
    for b in range(int(n_bootstrap)):
        num, den = np.zeros(n_cls), 0.0
        for key, group_sums, sizes in parts:
            m = multiplicities(len(sizes), seed, b, (stratum, "in" if key else "out") if stratify else (stratum,))
            num += m @ group_sums
            den += m @ sizes
        values[b] = num / den
    low = np.empty(n_cls)
    high = np.empty(n_cls)
    for c in range(n_cls):
        low[c], high[c] = percentile_interval(values[:, c], level)
    return point, low, high


def group_resamples(
    groups: Sequence[str], labels: Sequence[bool] | None, seed: int, n_bootstrap: int, stratum: str = ""
) -> tuple[list[str], np.ndarray]:
    """The draws of `group_bootstrap` as data: (the distinct groups, multiplicities: n_bootstrap x
    groups), for a statistic that is not a mean of rows (an AUC; a statistic of groups of
    sentences rebuilt from the drawn documents). Stratified as `group_bootstrap` stratifies: within
    each label when no group holds both labels, else all groups together; the groups of a stratum
    in sorted order, drawn by `multiplicities`. Row weights of replicate b:
    `multiplicities[b, index of the row's group]`."""
    groups = np.asarray([str(g) for g in groups], dtype=object)
    if labels is None:
        stratify, labels = False, np.zeros(len(groups), dtype=bool)
    else:
        labels = np.asarray(labels, dtype=bool)
        both = pd.DataFrame({"g": groups, "y": labels}).groupby("g")["y"].nunique()
        stratify = bool((both <= 1).all())
    keys = labels if stratify else np.zeros(len(groups), dtype=bool)
    names: list[str] = []
    blocks = []
    for key in sorted(set(keys.tolist())):
        members = sorted(set(groups[keys == key].tolist()))
        draw = (stratum, "in" if key else "out") if stratify else (stratum,)
        blocks.append(np.array([multiplicities(len(members), seed, b, draw) for b in range(int(n_bootstrap))]))
        names += members
    counts = np.hstack(blocks) if blocks else np.zeros((int(n_bootstrap), 0))
    return names, counts.reshape(int(n_bootstrap), len(names)).astype(float)


def row_weights(groups: Sequence[str], names: list[str], counts: np.ndarray) -> np.ndarray:
    """Replicates x rows: each row weighted by its group's multiplicity (`group_resamples`)."""
    index = {name: i for i, name in enumerate(names)}
    return counts[:, [index[str(g)] for g in groups]]


def seed_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval (n - 1 degrees of freedom) of per-seed values; the
    interval is (nan, nan) with fewer than 2 values."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return np.nan, np.nan, np.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, np.nan, np.nan
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def check_confidence(confidence: float) -> None:
    """A confidence level must lie strictly between 0 and 1."""
    if not 0 < confidence < 1:
        raise UserError(f"confidence must lie in (0, 1), got {confidence!r}")


def clopper_pearson(
    successes: int | np.ndarray, trials: int | np.ndarray, confidence: float = LEVEL, sided: str = "two"
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Exact binomial confidence limits for a success probability, Clopper and Pearson, "The
    use of confidence or fiducial limits illustrated in the case of the binomial",
    Biometrika 26, 1934: the limits are Beta quantiles,
    low(a) = Beta^-1(a; k, n - k + 1) (0 when k = 0) and
    high(a) = Beta^-1(1 - a; k + 1, n - k) (1 when k = n), for k successes in n trials.

    `sided="two"`: a = (1 - confidence) / 2 on each side, so that [low, high] covers the
    probability with probability at least `confidence` (scipy.stats.binomtest's "exact"
    interval). `sided="one"`: a = 1 - confidence on each side, so that low alone is a
    one-sided lower limit at level `confidence` (P(p < low) <= 1 - confidence) and high alone
    a one-sided upper limit at that level; the pair is then only a (2 confidence - 1) interval.
    Arrays (broadcast) give arrays, scalars floats.
    """
    from scipy import stats

    check_confidence(confidence)
    if sided not in SIDES:
        raise UserError(f"sided must be one of {', '.join(SIDES)}, got {sided!r}")
    k = np.asarray(successes)
    n = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise UserError("clopper_pearson needs integer counts")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise UserError("clopper_pearson needs 0 <= successes <= trials and trials >= 1")
    tail = (1.0 - confidence) / 2.0 if sided == "two" else 1.0 - confidence
    k, n = np.broadcast_arrays(k.astype(float), n.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, stats.beta.ppf(tail, np.maximum(k, 1.0), n - k + 1.0), 0.0)
        high = np.where(k < n, stats.beta.ppf(1.0 - tail, k + 1.0, np.maximum(n - k, 1.0)), 1.0)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high
