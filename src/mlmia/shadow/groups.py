"""Group-level membership inference (Hisamoto, Post and Duh, TACL 2020, Section 6: Table 6 and Figure 7).

Instead of one sentence, the attack classifies a group of n sentences that are all in or
all out of the model's training data. A group's features are the histogram of its
sentences' BLEU over fixed bins (the fraction of the group in each bin) and the corpus BLEU
of the group (`corpus_bleu_from_stats`, equal to `sacrebleu.corpus_bleu` of its
reconstructions against their references).

- `sentence_groups` cuts the rows of each cell (e.g. one shadow model, one side, one
  classifier split) into groups of n: rows ordered by the keys of (seed, document, sentence),
  so the sentences of one document sit together and rarely straddle two groups; the last
  incomplete group of a cell is dropped.
- The paper's adjustment: Bob's shadow models and Alice's model differ in quality, so
  their BLEU distributions are shifted against each other. `adjustment_shift` is, per
  feature, the mean over Alice's probe groups (in and out together: Bob does not know which
  is which; Carol's design balances them) minus the mean over Bob's classifier-training
  groups (in and out together, balanced by `shadow_splits`); "adjusted" features are
  Alice's features minus that shift, then classified by the classifiers trained on Bob's raw
  groups. That these are the two means is our reading of the paper.
- `mixed_groups` (Figure 7) draws groups mixing in- and out-probes at a given percentage
  of in-sentences. A mixed group's truth is "in" when at least `in_threshold` (default
  one half) of its sentences are in: our choice; the paper's figure varies the in-share of
  groups it calls in, and `called_in` (the fraction of groups the classifier calls in) is
  reported beside the accuracy so other readings can be taken from the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.core.keys import stable_key
from mlmia.shadow.features import STAT_COLUMNS, corpus_bleu_from_stats

#: default bin edges of the sentence-BLEU histogram: 10 bins of width 10 over [0, 100], the last closed
BLEU_EDGES = tuple(float(x) for x in range(0, 101, 10))
#: default percentages of in-sentences of Figure 7
IN_PERCENTAGES = tuple(range(0, 101, 10))


def histogram_columns(edges: Sequence[float] = BLEU_EDGES) -> list[str]:
    """Names of the histogram features: `bleu_hist_<low>_<high>`."""
    return [f"bleu_hist_{edges[i]:g}_{edges[i + 1]:g}" for i in range(len(edges) - 1)]


def group_feature_columns(edges: Sequence[float] = BLEU_EDGES) -> list[str]:
    """The group classifier's features: the histogram fractions, then `corpus_bleu`."""
    return [*histogram_columns(edges), "corpus_bleu"]


def bleu_histogram(bleu: np.ndarray, edges: Sequence[float] = BLEU_EDGES) -> np.ndarray:
    """Fraction of the values in each bin [e_i, e_i+1) (the last bin closed: BLEU 100 counts
    in it); values are first clipped to [e_0, e_last], so each counts in exactly one bin."""
    bleu = np.asarray(bleu, dtype=float)
    if bleu.size == 0:
        return np.full(len(edges) - 1, np.nan)
    edges = np.asarray(edges, dtype=float)
    counts, _ = np.histogram(np.clip(bleu, edges[0], edges[-1]), bins=edges)
    return counts / bleu.size


def sentence_groups(frame: pd.DataFrame, size: int, seed: int, by: Sequence[str]) -> pd.DataFrame:
    """The rows of `frame` that fall in a complete group, with a column `probe_group` (a
    text id "<cell>/<j>"). Each cell of the columns `by` is cut separately: its rows ordered
    by (key(seed, group_id), key(seed, sample_id)), then cut into consecutive groups of
    `size`; the rest (fewer than `size` rows) is dropped."""
    size = int(size)
    if size < 1:
        raise UserError(f"group size must be >= 1, got {size}")
    require_columns(frame, ["sample_id", "group_id", *by], "sentence groups")
    if len(frame) == 0:
        return frame.assign(probe_group=pd.Series(dtype=object))
    work = frame.reset_index(drop=True)
    doc_key = work["group_id"].astype(str).map(lambda g: stable_key(f"{seed}/group/{g}"))
    sent_key = work["sample_id"].astype(str).map(lambda s: stable_key(f"{seed}/sentence/{s}"))
    cells = work.groupby(list(by), sort=True).indices if by else {(): np.arange(len(work))}
    chosen, labels = [], []
    for cell, rows in cells.items():
        cell = cell if isinstance(cell, tuple) else (cell,)
        rows = sorted(rows, key=lambda i: (doc_key[i], sent_key[i], i))
        name = "/".join(str(c) for c in cell) or "all"
        for j in range(len(rows) // size):
            chosen.extend(rows[j * size : (j + 1) * size])
            labels.extend([f"{name}/{j}"] * size)
    out = work.iloc[chosen].copy()
    out["probe_group"] = pd.Series(labels, index=out.index, dtype=object)
    return out.reset_index(drop=True)


def group_features(
    grouped: pd.DataFrame, edges: Sequence[float] = BLEU_EDGES, keep: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per `probe_group`: its size `n`, the columns `keep` (their first value in the
    group), the BLEU histogram (`histogram_columns`) and `corpus_bleu`."""
    require_columns(grouped, ["probe_group", "bleu", *STAT_COLUMNS, *keep], "group features")
    hist_cols = histogram_columns(edges)
    records = []
    for name, rows in grouped.groupby("probe_group", sort=False):
        record = {"probe_group": name, "n": len(rows)}
        record.update({c: rows[c].iloc[0] for c in keep})
        record.update(dict(zip(hist_cols, bleu_histogram(rows["bleu"].to_numpy(), edges))))
        record["corpus_bleu"] = corpus_bleu_from_stats(rows)
        records.append(record)
    return pd.DataFrame.from_records(records, columns=["probe_group", "n", *keep, *hist_cols, "corpus_bleu"])


def adjustment_shift(alice_groups: pd.DataFrame, bob_groups: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Per feature: mean over Alice's probe groups minus mean over Bob's (training) groups."""
    if len(alice_groups) == 0 or len(bob_groups) == 0:
        raise UserError("adjustment: no groups on one side (Alice's or Bob's)")
    return alice_groups[list(columns)].mean() - bob_groups[list(columns)].mean()


def adjust(groups: pd.DataFrame, shift: pd.Series) -> pd.DataFrame:
    """`groups` with each feature in `shift` minus the shift (Alice's features moved to Bob's scale)."""
    out = groups.copy()
    for column, value in shift.items():
        out[column] = out[column].astype(float) - float(value)
    return out


def mixed_groups(
    in_rows: pd.DataFrame,
    out_rows: pd.DataFrame,
    size: int,
    seed: int,
    percentages: Sequence[int] = IN_PERCENTAGES,
    max_groups: int = 100,
) -> pd.DataFrame:
    """Figure 7's groups: for each percentage p, groups of `size` sentences of which
    round(p/100 x size) (Python's round: half to even) are in-probes (`in_rows`) and the rest
    out-probes (`out_rows`).

    For each p, the in- and out-rows are permuted by `numpy.random.default_rng([seed, p])`
    and cut into consecutive chunks, so no sentence appears twice at one percentage; as many
    groups as both pools allow, at most `max_groups`. Returns the rows with `probe_group`,
    `in_percentage` (the nominal p) and `in_fraction` (the actual share)."""
    size = int(size)
    if size < 1:
        raise UserError(f"group size must be >= 1, got {size}")
    frames = []
    for p in percentages:
        p = int(p)
        if not 0 <= p <= 100:
            raise UserError(f"in-percentage must be in [0, 100], got {p}")
        n_in = int(round(p * size / 100))
        n_out = size - n_in
        fits = [len(in_rows) // n_in] if n_in else []
        fits += [len(out_rows) // n_out] if n_out else []
        n_groups = min([int(max_groups), *fits])
        if n_groups < 1:
            raise UserError(
                f"mixed groups at {p}% in: {len(in_rows)} in- and {len(out_rows)} out-probes cannot fill one group "
                f"of {size}"
            )
        rng = np.random.default_rng([int(seed), p])
        in_perm = rng.permutation(len(in_rows))
        out_perm = rng.permutation(len(out_rows))
        for j in range(n_groups):
            part = pd.concat(
                [
                    in_rows.iloc[in_perm[j * n_in : (j + 1) * n_in]],
                    out_rows.iloc[out_perm[j * n_out : (j + 1) * n_out]],
                ],
                ignore_index=True,
            )
            part["probe_group"] = f"{p}/{j}"
            part["in_percentage"] = p
            part["in_fraction"] = n_in / size
            frames.append(part)
    return pd.concat(frames, ignore_index=True)
