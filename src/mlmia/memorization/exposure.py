"""Canary exposure: how far a model singles out an inserted secret among all the secrets it
could have been. Pure functions on arrays.

Carlini, Liu, Erlingsson, Kos and Song, "The Secret Sharer: Evaluating and Testing Unintended
Memorization in Neural Networks", USENIX Security 2019: a canary s[r] with a secret r drawn
from a randomness space R is inserted in the training data; its exposure (Eq. 1) is
log2 |R| - log2 rank(s[r]), where rank 1 is the secret the model finds most likely. Here the
likelihood of a candidate is read from ONE masked forward pass (all secret positions masked
at once), so a candidate's log-probability is the sum of per-position terms and the rank can
be counted exactly without scoring every candidate (`exact_rank`). `skewnorm_exposure` is
the paper's extrapolation from a sample of candidates (Section 4.3).

Helali, Kleinbauer and Klakow, "Assessing Unintended Memorization in Neural Discriminative
Sequence Models", TSD 2020: d-exposure, the same idea for a tagger, where the "secret" is the
class a slot word was labelled with in training (`d_exposure`, `mean_d_exposure`).

Scores throughout are "higher = more likely": log-probabilities or pseudo-log-likelihoods,
never perplexities.
"""

from __future__ import annotations

import math

import numpy as np

from mlmia.core.errors import UserError

MAX_HALF_SPACE = 50_000_000  # candidates in the larger half of `exact_rank` (400 MB of float64)


def _partial_sums(rows: np.ndarray) -> np.ndarray:
    """Log-probabilities of every assignment of the positions in `rows`, added left to right
    (candidate index in row-major order: the first position varies slowest)."""
    sums = np.zeros(1)
    for row in rows:
        sums = (sums[:, None] + row[None, :]).ravel()
    return sums


def exact_rank(
    logp: np.ndarray, canary: tuple[int, ...] | np.ndarray, *, atol: float = 0.0, return_ties: bool = False
) -> int | tuple[int, int]:
    """The canary's rank among all |V|^d candidates of the secret space, counted exactly.

    Carlini et al., USENIX Security 2019 (their rank: the canary's index in the list of all
    possible secrets sorted by the model's likelihood, 1 for the most likely). `logp` has
    shape (d, |V|): logp[i, v] is the log-probability of symbol v at secret position i, from
    one forward pass with all d positions masked at once, so candidate c in V^d scores
    L(c) = sum_i logp[i, c_i] (rows need not be normalised: only differences matter).
    `canary` holds the d symbol indices of the inserted secret.

    Ties. Candidates whose score differs from the canary's by at most
    tol = atol + 4 d eps_mach sum_i max_v |logp[i, v]| are tied with it (the second term bounds
    the rounding of a d-term sum, so candidates tied in exact arithmetic are found whatever
    the order of summation; `atol` widens the band). Returned: rank = 1 + the number of
    candidates strictly more likely (L(c) > L(canary) + tol), i.e. the canary placed FIRST
    among its ties (the optimistic rank, which Eq. 1 turns into the largest exposure); with
    `return_ties`, also `ties`, the number of OTHER candidates tied with it, so that the
    pessimistic rank is rank + ties and the mid-rank rank + ties / 2.

    Method: meet in the middle. The positions are split into a first half of floor(d/2) and
    a second half of ceil(d/2); the partial sums of each half are enumerated (|V|^floor(d/2)
    and |V|^ceil(d/2) numbers), the second half is sorted, and for every first-half sum a the
    second-half sums b with a + b above (or within) the canary's band are counted by binary
    search (the first half is sorted too, which only makes the searches cache-friendly). This
    is exact (every pair (a, b) is one candidate) and costs O(|V|^ceil(d/2) log |V|^ceil(d/2))
    time and O(|V|^ceil(d/2)) memory instead of the |V|^d of enumeration: d = 12 digits
    (10^12 candidates) takes two arrays of 10^6 numbers, about 0.2 s. (A dynamic
    programme over positions would need the scores on a grid, and is exact only for
    integer-valued scores.)
    """
    logp = np.asarray(logp, dtype=float)
    if logp.ndim != 2 or logp.shape[0] < 1 or logp.shape[1] < 1:
        raise UserError(f"logp must have shape (d, |V|) with d, |V| >= 1, got shape {logp.shape}")
    if not np.all(np.isfinite(logp)):
        raise UserError("logp must be finite (log-probabilities of a softmax, no -inf or NaN)")
    d, size = logp.shape
    code = np.asarray(canary)
    if code.shape != (d,) or not np.issubdtype(code.dtype, np.integer):
        raise UserError(f"canary must be {d} integer symbol indices, got {canary!r}")
    if np.any(code < 0) or np.any(code >= size):
        raise UserError(f"canary symbols must lie in [0, {size}), got {canary!r}")
    if atol < 0 or not math.isfinite(atol):
        raise UserError(f"atol must be a finite number >= 0, got {atol!r}")
    half = d // 2
    if size ** (d - half) > MAX_HALF_SPACE:
        raise UserError(
            f"the secret space |V|^d = {size}^{d} is too large for exact ranking (half space over {MAX_HALF_SPACE})"
        )
    first = np.sort(_partial_sums(logp[:half]))  # sorted queries: cache-friendly binary searches
    second = np.sort(_partial_sums(logp[half:]))
    # the canary's score, added in the same order as the enumeration, so it is one of the pairs
    first_c = 0.0
    for i in range(half):
        first_c = first_c + logp[i, code[i]]
    second_c = 0.0
    for i in range(half, d):
        second_c = second_c + logp[i, code[i]]
    score = first_c + second_c
    tol = atol + 4.0 * d * np.finfo(float).eps * float(np.sum(np.max(np.abs(logp), axis=1)))
    n_second = len(second)
    more = n_second - np.searchsorted(second, (score + tol) - first, side="right")
    at_least = n_second - np.searchsorted(second, (score - tol) - first, side="left")
    n_more = int(np.sum(more, dtype=np.int64))
    ties = max(int(np.sum(at_least, dtype=np.int64)) - n_more - 1, 0)
    return (n_more + 1, ties) if return_ties else n_more + 1


def exposure(rank: int | np.ndarray, space_size: int | np.ndarray) -> float | np.ndarray:
    """Exposure, Carlini et al., USENIX Security 2019, Eq. 1: log2 |R| - log2 rank.

    `space_size` is |R| (|V|^d for d symbols from V), `rank` the canary's rank in it, 1 for
    the most likely secret (`exact_rank`). Exposure runs from 0 (the canary is the least
    likely secret) to log2 |R| (the most likely). Scalars give a float (Python integers of
    any size are exact, e.g. |R| = 10^30); arrays give an array.
    """
    if np.ndim(rank) == 0 and np.ndim(space_size) == 0:
        if not 1 <= rank <= space_size:
            raise UserError(f"need 1 <= rank <= space_size, got rank {rank} and space_size {space_size}")
        return math.log2(space_size) - math.log2(rank)
    r = np.asarray(rank, dtype=float)
    n = np.asarray(space_size, dtype=float)
    if np.any(~(r >= 1)) or np.any(~(r <= n)):
        raise UserError("need 1 <= rank <= space_size for every canary")
    return np.log2(n) - np.log2(r)


def _skewnorm_log_sf(x: float, shape: float, loc: float, scale: float) -> float:
    """log P(X >= x) for a skew-normal X, also where the tail underflows double precision:
    then log f(x) + log of the integral of f(x + u) / f(x) over u >= 0, in log space."""
    from scipy import integrate, stats  # here, not at the top: every Snakemake start imports this module

    log_sf = float(stats.skewnorm.logsf(x, shape, loc, scale))
    if math.isfinite(log_sf):
        return log_sf
    z = (x - loc) / scale

    def log_density(t: float) -> float:  # of the standard skew-normal, log(2 phi(t) Phi(shape t))
        return math.log(2.0) + float(stats.norm.logpdf(t)) + float(stats.norm.logcdf(shape * t))

    base = log_density(z)
    ratio, _ = integrate.quad(lambda u: math.exp(log_density(z + u) - base), 0.0, np.inf)
    return base + math.log(ratio)


def skewnorm_exposure(
    canary_score: float, sampled_scores: np.ndarray, *, return_fit: bool = False
) -> float | tuple[float, tuple[float, float, float]]:
    """Exposure extrapolated from a sample of candidates, Carlini et al., USENIX Security 2019,
    Section 4.3 (exposure estimated by fitting a skew-normal to the scores of sampled
    candidates).

    `sampled_scores` are the scores of candidates drawn uniformly from the secret space R and
    `canary_score` the canary's, all "higher = more likely" (log-probability or
    pseudo-log-likelihood; the paper fits the log-perplexity, the negated score, which is the
    same family with the shape negated). A skew-normal is fitted by maximum likelihood
    (`scipy.stats.skewnorm.fit`, on the z-scored sample for a well-conditioned fit) and the
    estimate is exposure = -log2 P(S >= canary_score) under the fit: the fraction of the
    space at least as likely as the canary, rank / |R| in Eq. 1, read from the fitted tail.
    A canary more likely than all n samples (exposure above about log2 n) gets its number from
    the fitted tail alone; the tail is evaluated in log space, so it stays finite where the
    probability underflows double precision. Nothing caps the estimate at
    log2 |R|, the largest exact exposure. With `return_fit`, also the fitted
    (shape, loc, scale) on the scores' scale.

    Degenerate cases raise: fewer than 3 samples (3 parameters), non-finite scores, samples
    that are all equal (no spread to fit), or a fit that fails.
    """
    sample = np.asarray(sampled_scores, dtype=float).ravel()
    if len(sample) < 3:
        raise UserError(f"skewnorm_exposure needs at least 3 sampled scores, got {len(sample)}")
    if not np.all(np.isfinite(sample)) or not math.isfinite(canary_score):
        raise UserError("skewnorm_exposure needs finite scores (log-probabilities, higher = more likely)")
    mean, spread = float(np.mean(sample)), float(np.std(sample))
    if not spread > 0:
        raise UserError("the sampled scores are all equal: there is no distribution to fit")
    from scipy import stats

    try:
        shape, loc_z, scale_z = (float(v) for v in stats.skewnorm.fit((sample - mean) / spread))
    except (ValueError, RuntimeError, FloatingPointError) as error:
        raise UserError(f"the skew-normal fit failed: {error}") from error
    if not (math.isfinite(shape) and math.isfinite(loc_z) and math.isfinite(scale_z) and scale_z > 0):
        raise UserError("the skew-normal fit failed: non-finite parameters")
    log_sf = _skewnorm_log_sf((canary_score - mean) / spread, shape, loc_z, scale_z)
    value = max(-log_sf / math.log(2.0), 0.0)
    if return_fit:
        return value, (shape, mean + spread * loc_z, spread * scale_z)
    return value


def d_exposure(
    inserted_confidence: float,
    inserted_labelled: bool,
    candidate_confidence: np.ndarray,
    candidate_labelled: np.ndarray,
) -> float:
    """d-exposure of one inserted phrase, Helali, Kleinbauer and Klakow, TSD 2020, Eq. 2-3.

    A phrase whose slot word w was labelled in training with class C_i is inserted in the
    training data. The class's candidate set C_i holds the words labelled ONLY as C_i; each is
    put in w's slot of the same phrase and the model's confidence in C_i there is read.
    Inputs:

    - `inserted_confidence`: the model's confidence in C_i for w in its slot;
    - `inserted_labelled`: whether the model labels w there as C_i (its predicted class);
    - `candidate_confidence`: the confidence in C_i of every OTHER word of C_i in the slot
      (w itself excluded: it is counted once, through the two arguments above);
    - `candidate_labelled`: whether the model labels each of them as C_i.

    With |C_i| = len(candidate_confidence) + 1, the rank of w is
    rank = 1 + #{c : c labelled C_i and conf(c) >= conf(w)} (a tie counts against w; a
    candidate the model does not label C_i counts below w whatever its confidence), and
    d-exposure = -log2(rank / |C_i|) = log2 |C_i| - log2 rank, from 0 to log2 |C_i| (w the only
    word at or above its confidence). It is 0 when the model does not label w as C_i.
    """
    conf = np.asarray(candidate_confidence, dtype=float).ravel()
    labelled = np.asarray(candidate_labelled, dtype=bool).ravel()
    if conf.shape != labelled.shape:
        raise UserError(
            f"candidate_confidence and candidate_labelled differ in length ({len(conf)} and {len(labelled)})"
        )
    if not math.isfinite(inserted_confidence) or not np.all(np.isfinite(conf)):
        raise UserError("d_exposure needs finite confidences")
    if not inserted_labelled:
        return 0.0
    rank = 1 + int(np.sum(labelled & (conf >= inserted_confidence)))
    return math.log2(len(conf) + 1) - math.log2(rank)


def mean_d_exposure(per_class: np.ndarray) -> float:
    """The model's d-exposure, Helali et al., TSD 2020: the mean of the per-class d-exposures
    (`d_exposure`, one inserted phrase per chosen class) over the chosen classes."""
    values = np.asarray(per_class, dtype=float).ravel()
    if len(values) == 0:
        raise UserError("mean_d_exposure needs at least one class")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise UserError("per-class d-exposures must be finite and >= 0")
    return float(np.mean(values))
