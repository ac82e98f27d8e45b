"""Scored sample sets: exact counts per (role, source, length bucket) from a world's samples.

The counts are config, so the number of scored samples (and so the shard count) is known
before anything runs. Length buckets come from the scoring tokenizer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.logs import get_logger
from mlmia.models.tokenizer import content_tokens
from mlmia.terms.manifest import MANIFEST_COLUMNS, check_roles_disjoint, length_bucket

log = get_logger(__name__)


def count_for(n: int | dict, length: str) -> int:
    """A count is one number for every length bucket, or a mapping {short: n, long: m}."""
    return int(n.get(length, 0)) if isinstance(n, dict) else int(n)


def sample_count(counts: dict, lengths: list[str]) -> int:
    """How many samples a selection holds."""
    return sum(count_for(n, length) for by_source in counts.values() for n in by_source.values() for length in lengths)


def sources_with(counts: dict, role: str, length: str | None, lengths: list[str]) -> set[str]:
    """The sources `counts` selects samples of `role` from, in bucket `length` (None: any of `lengths`)."""
    buckets = lengths if length is None else [length]
    return {source for source, n in (counts.get(role) or {}).items() if any(count_for(n, b) > 0 for b in buckets)}


def select_samples(
    world: pd.DataFrame, tokenizer, counts: dict, lengths: list[str], seed: int, length_tokenizer=None
) -> pd.DataFrame:
    """Pick `counts[role][source]` plain samples per length bucket, seeded, in a stable order.

    One generator draws every (role, source, length) in the order of `counts`: a source
    added at the end (the configs' MIMIC population) leaves every earlier draw as it was.
    `n_tokens` are `tokenizer`'s; the length buckets are `length_tokenizer`'s where one is given
    (the world's tokenizer learnt without `tokenizer.min_patients`, so that the remedy scores
    the same sentences), else `tokenizer`'s."""
    plain = world[world["variant"] == "plain"].copy()
    plain["n_tokens"] = content_tokens(tokenizer, plain["text"])
    counted = plain["n_tokens"] if length_tokenizer is None else content_tokens(length_tokenizer, plain["text"])
    plain["length"] = [length_bucket(n) for n in counted]
    rng = np.random.default_rng(seed)
    parts = []
    for role, by_source in counts.items():
        for source, n in by_source.items():
            for length in lengths:
                wanted = count_for(n, length)
                pool = plain[(plain["role"] == role) & (plain["source"] == source) & (plain["length"] == length)]
                if len(pool) < wanted:
                    raise UserError(
                        f"config key samples.counts.{role}.{source}: {wanted} {length} samples asked for, "
                        f"the world has {len(pool)} (raise the corpus' patient counts or lower this)"
                    )
                parts.append(pool.iloc[np.sort(rng.choice(len(pool), wanted, replace=False))])
    selected = pd.concat(parts, ignore_index=True)
    check_roles_disjoint(selected, "world samples")
    log.info("selected %d samples: %s", len(selected), selected.groupby(["role", "source", "length"]).size().to_dict())
    return selected[MANIFEST_COLUMNS]


def named_variant(selected: pd.DataFrame, world: pd.DataFrame, tokenizer) -> pd.DataFrame:
    """The same sentences as Base-b saw them: members and held-in members carry the patient's
    name (the world's `named` rows), non-members and the population none. Length buckets stay
    those of the plain sentence, so Base and Base-b are compared on the same sentences."""
    named = world[world["variant"] == "named"].set_index("sample_id")
    out = selected.copy()
    trained = out["role"].isin(["member", "member_heldin"])
    named_ids = out.loc[trained, "sample_id"] + "-named"
    missing = ~named_ids.isin(named.index)
    if missing.any():
        raise UserError(
            f"world samples: no named variant of sample {shown_id(out.loc[trained, 'sample_id'][missing].iloc[0])}"
        )
    out.loc[trained, "sample_id"] = named_ids.to_numpy()
    out.loc[trained, "text"] = named.loc[named_ids, "text"].to_numpy()
    out["n_tokens"] = content_tokens(tokenizer, out["text"])
    return out
