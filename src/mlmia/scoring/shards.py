"""Shards: contiguous slices of a sample table, so joined shards keep the sample order."""

from __future__ import annotations

import math

import pandas as pd


def shard_count(n_samples: int, shard_size: int) -> int:
    return max(1, math.ceil(n_samples / shard_size))


def shard_slice(samples: pd.DataFrame, shard: int, shards: int) -> pd.DataFrame:
    """Rows of shard `shard` out of `shards` (sizes differ by at most one)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} out of range for {shards} shards")
    start = (len(samples) * shard) // shards
    stop = (len(samples) * (shard + 1)) // shards
    return samples.iloc[start:stop]
