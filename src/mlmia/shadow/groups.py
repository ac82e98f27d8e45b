"""Groups of sentences and their features (Hisamoto, Post and Duh, TACL 2020, Section 6: Table 6 and Figure 7).

Instead of one sentence, the attack classifies a group of n sentences that are all in or all out
of the model's training data. A group's features are the histogram of its sentences' BLEU over
fixed bins (the fraction of the group in each bin) and the corpus BLEU of the group
(`corpus_bleu_matrix`, equal to `sacrebleu.corpus_bleu` of its outputs against their references).

- `random_groups` draws random groups of n sentences of a pool with one sentence per document:
  each group takes one random sentence from each of n random documents, so no document weighs
  more than one sentence in a group (the paper's groups are random sentences; documents of
  several sentences would otherwise make a group a few documents). Where a pool holds fewer than
  n documents, a group takes a second sentence of random documents, and so on (at most
  ceil(n / documents) of one document). Groups are drawn independently, so a sentence can be in
  several groups of a pool: the number of groups (`count`) does not depend on the pool's size,
  and the document bootstrap of `mlmia.shadow.group_eval` accounts for the overlap.
- The paper's adjustment: Bob's shadow models and Alice's model differ in quality, so their BLEU
  distributions are shifted against each other. `adjustment_shift` is one number, the mean
  sentence BLEU of Alice's probes (in and out together: Bob does not know which is which;
  Carol's design balances them) minus that of Bob's classifier-training rows (in and out
  together); Alice's sentence BLEUs and corpus BLEUs are moved down by it before the group
  features are taken (`group_feature_matrix(..., shift=...)`), then classified by the
  classifiers trained on Bob's raw groups.
- `top_share_calls` (Figure 7): rank pure groups by a classifier's score and call the top N% of
  them "in"; the precision and accuracy of those calls for each N.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mlmia.core.errors import UserError


def bleu_edges(bins: int) -> tuple[float, ...]:
    """`bins` equal bins over [0, 100]: their bin edges (`shadow.bins`: the paper's 100 bins for
    groups of 500 sentences hold 5 sentences a bin; 10 bins for groups of 50 hold as many)."""
    bins = int(bins)
    if bins < 1:
        raise UserError(f"the BLEU histogram needs at least 1 bin, got {bins}")
    return tuple(float(x) for x in np.linspace(0.0, 100.0, bins + 1))


def histogram_columns(edges: Sequence[float]) -> list[str]:
    """Names of the histogram features: `bleu_hist_<low>_<high>`."""
    return [f"bleu_hist_{edges[i]:g}_{edges[i + 1]:g}" for i in range(len(edges) - 1)]


def group_feature_columns(edges: Sequence[float]) -> list[str]:
    """The group classifier's features: the histogram fractions, then `corpus_bleu`."""
    return [*histogram_columns(edges), "corpus_bleu"]


def bin_index(bleu: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Each value's bin [e_i, e_i+1) (the last bin closed: BLEU 100 counts in it); values are
    first clipped to [e_0, e_last], so each counts in exactly one bin."""
    edges = np.asarray(edges, dtype=float)
    clipped = np.clip(np.asarray(bleu, dtype=float), edges[0], edges[-1])
    return np.clip(np.searchsorted(edges, clipped, side="right") - 1, 0, len(edges) - 2)


def bleu_histogram(bleu: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Fraction of the values in each bin (`bin_index`)."""
    bleu = np.asarray(bleu, dtype=float)
    if bleu.size == 0:
        return np.full(len(edges) - 1, np.nan)
    return np.bincount(bin_index(bleu, edges), minlength=len(edges) - 1) / bleu.size


def corpus_bleu_matrix(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0-100) of each row of summed sufficient statistics (rows x 10, in the order
    of `mlmia.shadow.features.STAT_COLUMNS`: hyp_len, ref_len, match_1..4, total_1..4):
    `sacrebleu.metrics.BLEU.compute_bleu` with exp smoothing and no effective order (sacrebleu's
    corpus defaults), vectorised. Brevity penalty exp(1 - ref/hyp) when hyp < ref (0 for an empty
    hypothesis); 0 where nothing matches or an order has no n-gram; an order with no match has
    precision 100 / (2^k total), k the number of orders so far without a match."""
    stats = np.atleast_2d(np.asarray(stats, dtype=float))
    hyp, ref = stats[:, 0], stats[:, 1]
    correct, total = stats[:, 2:6], stats[:, 6:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(hyp < ref, np.where(hyp > 0, np.exp(1.0 - ref / np.where(hyp > 0, hyp, 1.0)), 0.0), 1.0)
        zero = correct == 0
        k = np.cumsum(zero, axis=1)
        safe_total = np.where(total > 0, total, 1.0)
        precision = np.where(zero, 100.0 / (2.0**k * safe_total), 100.0 * correct / safe_total)
        score = bp * np.exp(np.log(precision).mean(axis=1))
    dead = (total <= 0).any(axis=1) | ~(correct > 0).any(axis=1)
    return np.where(dead, 0.0, score)


def random_groups(docs: np.ndarray, size: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` x `size` row indices of a pool whose rows belong to documents `docs` (one code
    per row): each group one random sentence of each of `size` random documents (see the module
    docstring for fewer documents). An empty array (0 x size) when the pool holds fewer than
    `size` rows."""
    size, count = int(size), int(count)
    if size < 1 or count < 0:
        raise UserError(f"groups need a size >= 1 and a count >= 0, got {size} and {count}")
    docs = np.asarray(docs)
    n = len(docs)
    if n < size or count == 0:
        return np.zeros((0, size), dtype=np.int64)
    _, code = np.unique(docs, return_inverse=True)
    n_docs = int(code.max()) + 1
    by_doc = np.argsort(code, kind="stable")
    start = np.r_[0, np.cumsum(np.bincount(code, minlength=n_docs))[:-1]]
    # within each group: a random order of each document's sentences (rank), random documents first
    sentence_key = rng.random((count, n))
    order = np.argsort(code[None, :] + sentence_key, axis=1, kind="stable")
    rank = np.empty((count, n))
    rank_sorted = np.arange(n) - start[code[by_doc]]
    np.put_along_axis(rank, order, np.broadcast_to(rank_sorted, (count, n)), axis=1)
    doc_key = rng.random((count, n_docs))
    key = rank + np.take_along_axis(doc_key, np.broadcast_to(code, (count, n)), axis=1)
    return np.sort(np.argpartition(key, size - 1, axis=1)[:, :size], axis=1).astype(np.int64)


def group_feature_matrix(
    bleu: np.ndarray, stats: np.ndarray, groups: np.ndarray, edges: Sequence[float], shift: float = 0.0
) -> np.ndarray:
    """Groups x features (`group_feature_columns`): per group (a row of row indices into `bleu`
    and `stats`), the fraction of its sentence BLEUs (less `shift`) in each bin and its corpus
    BLEU (less `shift`)."""
    groups = np.asarray(groups, dtype=np.int64)
    n_bins = len(edges) - 1
    if len(groups) == 0:
        return np.zeros((0, n_bins + 1))
    bins = bin_index(np.asarray(bleu, dtype=float) - float(shift), edges)[groups]
    hist = np.zeros((len(groups), n_bins))
    np.add.at(hist, (np.repeat(np.arange(len(groups)), groups.shape[1]), bins.ravel()), 1.0)
    corpus = corpus_bleu_matrix(np.asarray(stats, dtype=float)[groups].sum(axis=1)) - float(shift)
    return np.column_stack([hist / groups.shape[1], corpus])


def adjustment_shift(alice_bleu: np.ndarray, bob_bleu: np.ndarray) -> float:
    """The paper's adjustment, one number: mean sentence BLEU of Alice's probes minus mean
    sentence BLEU of Bob's classifier-training rows."""
    alice_bleu, bob_bleu = np.asarray(alice_bleu, dtype=float), np.asarray(bob_bleu, dtype=float)
    if alice_bleu.size == 0 or bob_bleu.size == 0:
        raise UserError("adjustment: no sentences on one side (Alice's or Bob's)")
    return float(alice_bleu.mean() - bob_bleu.mean())


def top_share_calls(
    score: np.ndarray, truth: np.ndarray, percentages: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Figure 7: (precision, accuracy) per percentage N of calling the ceil(N/100 x groups)
    groups of highest score "in" and the rest "out" (ties in score broken by position: the
    earlier group first). Precision: the share of truly-in groups among those called in;
    accuracy: the share of all groups called right. NaN for every N when there are no groups."""
    score, truth = np.asarray(score, dtype=float), np.asarray(truth, dtype=bool)
    n = len(score)
    percentages = np.asarray(percentages, dtype=float)
    if n == 0:
        return np.full(len(percentages), np.nan), np.full(len(percentages), np.nan)
    ranked = truth[np.argsort(-score, kind="stable")]
    hits = np.r_[0, np.cumsum(ranked)]
    k = np.array([max(1, math.ceil(p * n / 100.0 - 1e-9)) for p in percentages])
    precision = hits[k] / k
    # right: the called-in that are in, plus the called-out that are out
    accuracy = (hits[k] + ((n - k) - (truth.sum() - hits[k]))) / n
    return precision, accuracy
