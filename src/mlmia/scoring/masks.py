"""Masking patterns: a pure function of (seed, sample_id, pattern index).

The same sample gets the same masks under every model that tokenizes it the same way
(common random numbers for the likelihood ratio), whatever the shard count, the batch
size, the device or the order of the samples. Pattern ``j`` depends only on
``(seed, sample_id, n_tokens, j)`` and on the patterns before it, never on ``K``: the
patterns for ``K = 5`` are the first five of those for ``K = 10``.

Positions are 0-based indices into the sample's *content* tokens (special tokens and
padding excluded); the scorer maps them to sequence positions.

The id the patterns are keyed on is the sample's ``mask_id`` where its table has that column
(`mask_keys`), else its ``sample_id``. A neighbour text (`mlmia.scoring.neighbours`) carries its
sample's id there, so that with the same token count it is scored under exactly its sample's
patterns (common random numbers for the neighbourhood attack's difference); a table without the
column is scored as it always was.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.keys import stable_key

MASK_FRACTION = 0.15
#: how l is rounded: ceil(0.15 T) as the paper's text says, or floor as the authors' code did
MASK_COUNTS = ("ceil", "floor")
# Bounded redraws when a random pattern repeats an earlier one (only happens when
# C(T, l) is small, just above K).
_MAX_REDRAWS = 1000
#: the optional sample-table column the masking patterns are keyed on (absent or empty: the sample_id)
MASK_ID = "mask_id"


def n_masked(n_tokens: int, mask_count: str) -> int:
    """l = ceil(0.15 * T) (mask_count "ceil") or floor (mask_count "floor"), at least 1, in exact
    integer arithmetic."""
    n_tokens = int(n_tokens)
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
    if mask_count not in MASK_COUNTS:
        raise ValueError(f"mask_count must be one of {', '.join(MASK_COUNTS)}, got {mask_count!r}")
    scaled = 15 * n_tokens
    return max(1, -(-scaled // 100) if mask_count == "ceil" else scaled // 100)


def n_patterns(n_tokens: int, patterns: int, mask_count: str) -> int:
    """How many patterns a sample gets: min(K, C(T, l)), K = `patterns`."""
    return min(int(patterns), math.comb(n_tokens, n_masked(n_tokens, mask_count)))


def mask_patterns(seed: int, sample_id: str, n_tokens: int, patterns: int, mask_count: str) -> np.ndarray:
    """Masking patterns of one sample: int64 array of shape (K_eff, l), each row sorted; K =
    `patterns` (the config's scoring.patterns).

    If ``K >= C(T, l)`` every combination is returned once, in lexicographic order
    (K_eff = C(T, l)). Otherwise K_eff = K distinct patterns; pattern ``j`` is drawn by
    ``numpy.random.default_rng([seed, sha256(sample_id), j])`` (l positions without
    replacement), redrawn from the same generator while it repeats an earlier pattern.
    """
    seed, n_tokens, k = int(seed), int(n_tokens), int(patterns)
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if k < 1:
        raise ValueError(f"patterns must be >= 1, got {k}")
    n_mask = n_masked(n_tokens, mask_count)  # the paper's l
    total = math.comb(n_tokens, n_mask)
    if k >= total:
        out = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations(range(n_tokens), n_mask)),
            dtype=np.int64,
            count=total * n_mask,
        )
        return out.reshape(total, n_mask)
    key = stable_key(sample_id)
    out = np.empty((k, n_mask), dtype=np.int64)
    seen: set[tuple[int, ...]] = set()
    for j in range(k):
        rng = np.random.default_rng([seed, key, j])
        for _ in range(_MAX_REDRAWS):
            tup = tuple(sorted(rng.choice(n_tokens, size=n_mask, replace=False).tolist()))
            if tup not in seen:
                break
        else:  # pragma: no cover - C(T, l) > k makes a fresh pattern overwhelmingly likely
            raise RuntimeError(f"could not draw a distinct masking pattern for sample {shown_id(sample_id)}")
        seen.add(tup)
        out[j] = tup
    return out


def mask_keys(samples: pd.DataFrame) -> list[str]:
    """The id each sample's masking patterns are keyed on: its ``mask_id`` where the table has
    that column and the row a value there, else its ``sample_id``."""
    sids = samples["sample_id"].astype(str)
    if MASK_ID not in samples.columns:
        return sids.tolist()
    given = samples[MASK_ID]
    keys = given.where(given.notna(), sids).astype(str)
    empty = keys == ""
    if empty.any():
        raise UserError(f"samples: sample {shown_id(sids[empty].iloc[0])} has an empty {MASK_ID}")
    return keys.tolist()


def single_position_patterns(n_tokens: int) -> np.ndarray:
    """The normalized-energy patterns: every content position alone, shape (T, 1)."""
    return np.arange(int(n_tokens), dtype=np.int64).reshape(-1, 1)
