"""The group-level attack evaluated (Hisamoto, Post and Duh, TACL 2020, Section 6: Table 6 and Figure 7).

Bob trains the five classifiers (`mlmia.shadow.classify`) on random groups of his
classifier-training rows (`mlmia.shadow.groups.random_groups`: `count` groups of `size`
sentences per side, in and out, one sentence per document). His shadows' rows are pooled: a
group holds sentences that are all "in" (or all "out") for the shadow model whose features they
carry. The shadows are replicas of one recipe trained on nearly the same data (all of Bob's but
one small slice), and one shadow's held-out slice is too small for groups of the paper's size.

The groups are then classified on Bob's own splits (Bob:train, Bob:valid, Bob:test: his
diagnostic, the paper's positive evidence) and on Alice's probes, pure groups only (all in-probes
or all out-probes), with raw features and adjusted by the paper's single mean shift
(`adjustment_shift`). Per set and classifier: accuracy, the group AUC (threshold-free: the
groups ranked by the classifier's score), and for Alice's groups Figure 7, the precision and
accuracy of calling the top N% of groups by score "in" (`top_share_calls`).

Intervals: a sentence can be in several groups and a document's sentences in several groups, so
groups are not independent; the unit of resampling is the document. Replicate b draws documents
as `mlmia.metrics.intervals.group_resamples` draws them (within in and out for Alice's probes,
all together for Bob's pairs, where a document is in for one shadow and out for the other),
every drawn copy of a document counting as a document of its own, and rebuilds the groups from
the drawn sentences (a generator seeded by (seed, b, set)); the shift is recomputed from the
replicate's probes. The classifiers stay as trained. Every classifier and measure of a set is
computed on the same replicates. The interval holds the variation of the documents and of the
random grouping, so a point estimate (one grouping) can lie outside it where a set has few
documents or few groups. Bob:train's numbers are the fit on the very groups the
classifiers trained on, printed without an interval (rebuilt groups would be new to them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.core.keys import stable_key
from mlmia.metrics.classification import weighted_auc
from mlmia.metrics.intervals import group_resamples, percentile_interval
from mlmia.shadow.classify import ACCURACY_COLUMNS, fit_classifiers, predict_matrix
from mlmia.shadow.features import STAT_COLUMNS
from mlmia.shadow.groups import (
    adjustment_shift,
    group_feature_columns,
    group_feature_matrix,
    random_groups,
    top_share_calls,
)

FIGURE_COLUMNS = [
    "classifier", "features", "top_percentage", "precision", "precision_ci_low", "precision_ci_high", "accuracy",
    "ci_low", "ci_high", "n", "n_groups",
]  # fmt: skip
ALICE_SETS = {"Alice (raw)": False, "Alice (adjusted)": True}


class _Pool:
    """The sentences of one evaluation set: BLEU, statistics, documents and truth, as arrays."""

    def __init__(self, frame: pd.DataFrame, where: str) -> None:
        require_columns(frame, ["group_id", "member", "bleu", *STAT_COLUMNS], where)
        self.bleu = frame["bleu"].to_numpy(dtype=float)
        self.stats = frame[STAT_COLUMNS].to_numpy(dtype=float)
        self.docs = frame["group_id"].astype(str).to_numpy()
        self.member = frame["member"].astype(bool).to_numpy()
        self.doc_code = pd.factorize(self.docs, sort=True)[0]

    def groups(self, size: int, count: int, rng_parts: list[int], take: np.ndarray | None = None, copy=None):
        """(row indices into the pool, groups x size; truth per group): `count` random groups per
        side. `take` (rows, repeated) and `copy` (which copy of its document each is) give a
        replicate's sentences."""
        take = np.arange(len(self.bleu)) if take is None else take
        docs = self.doc_code[take] if copy is None else self.doc_code[take] * (int(copy.max()) + 1) + copy
        indices, truth = [], []
        for side in (False, True):
            rows = np.flatnonzero(self.member[take] == side)
            rng = np.random.default_rng([*rng_parts, int(side)])
            picked = random_groups(docs[rows], size, count, rng)
            indices.append(take[rows][picked])
            truth.append(np.full(len(picked), side))
        return np.vstack(indices), np.concatenate(truth)

    def features(self, index: np.ndarray, edges, shift: float = 0.0) -> np.ndarray:
        return group_feature_matrix(self.bleu, self.stats, index, edges, shift)


def _replicate_rows(pool: _Pool, multiplicity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, copy number) of a replicate: each row repeated as often as its document is drawn."""
    reps = multiplicity[pool.doc_code].astype(np.int64)
    take = np.repeat(np.arange(len(reps)), reps)
    copy = np.arange(len(take)) - np.repeat(np.cumsum(reps) - reps, reps)
    return take, copy


def _measures(pred: np.ndarray, score: np.ndarray, truth: np.ndarray, percentages) -> dict:
    """Per classifier: accuracy, AUC, and the top-N% precision and accuracy (arrays)."""
    n_cls = pred.shape[1]
    both = truth.any() and (~truth).any()
    out = {"accuracy": np.full(n_cls, np.nan), "auc": np.full(n_cls, np.nan)}
    out["top_precision"] = np.full((n_cls, len(percentages)), np.nan)
    out["top_accuracy"] = np.full((n_cls, len(percentages)), np.nan)
    if len(truth) == 0:
        return out
    for c in range(n_cls):
        out["accuracy"][c] = float((pred[:, c] == truth).mean())
        out["auc"][c] = float(weighted_auc(truth, score[:, c], np.ones(len(truth)))[0]) if both else np.nan
        out["top_precision"][c], out["top_accuracy"][c] = top_share_calls(score[:, c], truth, percentages)
    return out


def group_study(
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    seed: int,
    n_bootstrap: int,
    size: int,
    count: int,
    edges: Sequence[float],
    percentages: Sequence[float],
) -> tuple[pd.DataFrame, pd.DataFrame, dict, float]:
    """Table 6 and Figure 7: (table rows with `ACCURACY_COLUMNS`, where `n` counts groups and
    `n_groups` documents; Figure 7's rows, `FIGURE_COLUMNS`; the group classifiers; the shift).

    `bob`: Bob's feature table (`split`, `member`, `group_id`, `bleu` and the BLEU statistics);
    `probes`: Alice's probes with the same columns and `probe_set` ("alice" rows are used)."""
    size, count, seed = int(size), int(count), int(seed)
    columns = group_feature_columns(edges)
    require_columns(bob, ["split"], "Table 6: Bob's pairs")
    require_columns(probes, ["probe_set"], "Table 6: probes")
    pools = {f"Bob:{s}": _Pool(bob[bob["split"] == s], f"Table 6: Bob:{s}") for s in ("train", "valid", "test")}
    alice = _Pool(probes[probes["probe_set"] == "alice"], "Table 6: Alice's probes")
    train = pools["Bob:train"]
    index, truth = train.groups(size, count, [seed, stable_key("Bob:train")])
    if truth.all() or not truth.any():
        raise UserError(
            f"Table 6: Bob's classifier-training rows make no group of {size} on one side (in or out); give Bob more "
            "data or a smaller group size"
        )
    frame = pd.DataFrame(train.features(index, edges), columns=columns).assign(member=truth)
    classifiers = fit_classifiers(frame, columns, seed)
    bob_mean = float(train.bleu.mean())
    shift = adjustment_shift(alice.bleu, train.bleu)
    names = list(classifiers)
    sets = [*pools, *ALICE_SETS]

    def evaluate(take_of: dict, copy_of: dict, rng_extra: list[int], alice_shift: float, names=sets) -> dict:
        built = {}
        for name in names:  # the sets' groups, then one classification of all of them (a call per classifier)
            pool = alice if name in ALICE_SETS else pools[name]
            key = "Alice" if name in ALICE_SETS else name
            if key not in built:
                built[key] = pool.groups(
                    size, count, [seed, *rng_extra, stable_key(key)], take_of.get(key), copy_of.get(key)
                )
        xs = []
        for name in names:
            pool, key = (alice, "Alice") if name in ALICE_SETS else (pools[name], name)
            xs.append(pool.features(built[key][0], edges, alice_shift if ALICE_SETS.get(name) else 0.0))
        pred, score = predict_matrix(classifiers, np.vstack(xs))
        bounds = np.cumsum([0, *(len(x) for x in xs)])
        out = {}
        for i, name in enumerate(names):
            truth = built["Alice" if name in ALICE_SETS else name][1]
            at = slice(bounds[i], bounds[i + 1])
            out[name] = _measures(pred[at], score[at], truth, percentages) | {"n": len(truth)}
        return out

    point = evaluate({}, {}, [], shift)
    resampled = [(key, pool) for key, pool in [*pools.items(), ("Alice", alice)] if key != "Bob:train"]
    draws = {}
    for key, pool in resampled:
        labels = pool.member if key == "Alice" else None  # Bob's documents are in for one shadow, out for another
        doc_names, counts = group_resamples(pool.docs, labels, seed, n_bootstrap, f"groups/{key}")
        order = np.searchsorted(
            np.array(sorted(set(pool.docs.tolist())), dtype=object), np.array(doc_names, dtype=object)
        )
        by_code = np.zeros_like(counts)
        by_code[:, order] = counts  # multiplicities in the order of the pool's document codes
        draws[key] = by_code
    replicates = []
    for b in range(int(n_bootstrap)):
        take_of, copy_of = {}, {}
        for key, pool in resampled:
            take_of[key], copy_of[key] = _replicate_rows(pool, draws[key][b])
        alice_take = take_of["Alice"]
        b_shift = float(alice.bleu[alice_take].mean() - bob_mean) if len(alice_take) else shift
        replicates.append(evaluate(take_of, copy_of, [b, stable_key("replicate")], b_shift, sets[1:]))

    def interval(name: str, measure: str, at: tuple) -> tuple[float, float]:
        if name == "Bob:train":  # the groups the classifiers trained on: a fit, not an estimate to resample
            return np.nan, np.nan
        return percentile_interval(np.array([r[name][measure][at] for r in replicates]))

    rows, figure = [], []
    for name in sets:
        pool = alice if name in ALICE_SETS else pools[name]
        for c, cls in enumerate(names):
            low, high = interval(name, "accuracy", (c,))
            a_low, a_high = interval(name, "auc", (c,))
            rows.append(
                {
                    "classifier": cls, "evaluation": name, "accuracy": point[name]["accuracy"][c], "ci_low": low,
                    "ci_high": high, "auc": point[name]["auc"][c], "auc_ci_low": a_low, "auc_ci_high": a_high,
                    "n": point[name]["n"], "n_groups": len(set(pool.docs.tolist())),
                }
            )  # fmt: skip
            if name not in ALICE_SETS:
                continue
            for j, p in enumerate(percentages):
                p_low, p_high = interval(name, "top_precision", (c, j))
                t_low, t_high = interval(name, "top_accuracy", (c, j))
                figure.append(
                    {
                        "classifier": cls, "features": "adjusted" if ALICE_SETS[name] else "raw",
                        "top_percentage": float(p), "precision": point[name]["top_precision"][c, j],
                        "precision_ci_low": p_low, "precision_ci_high": p_high,
                        "accuracy": point[name]["top_accuracy"][c, j], "ci_low": t_low, "ci_high": t_high,
                        "n": point[name]["n"], "n_groups": len(set(pool.docs.tolist())),
                    }
                )  # fmt: skip
    table = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    order = {c: i for i, c in enumerate(names)}
    table = table.sort_values("classifier", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return table, pd.DataFrame(figure, columns=FIGURE_COLUMNS), classifiers, shift
