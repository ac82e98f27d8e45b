"""Carol's split of the corpus, and Bob's shadow-model splits (Hisamoto, Post and Duh, TACL 2020, Section 3).

Carol, the referee of the paper's game, decides which sentences Alice (the model owner)
trains on, which sentences are probes, and which part of Alice's training data Bob (the
attacker) gets. Carried over to masked language models: the corpus is a table of sentences
(`sample_id`, `group_id`, `text`, `subcorpus`), a group being a document or patient.

Groups are the unit of every split here: all sentences of a group share one `part`, so a
document is never both trained on and held out, and never both Bob's and a probe's. Probes
are drawn one sentence per group by default (`per_group`), so the k probes of a subcorpus
come from k different documents and the in- and out-probe sets have exactly k sentences each
(balanced: chance accuracy is 0.5). The paper does not say how many probes one document may
give, nor what happens to a probe document's other sentences; these are our choices:

- the other sentences of an in-probe group are trained on by Alice (part `in_probe`, `probe`
  False) and are never Bob's; those of an out-probe or OOD-probe group are held out and never
  probed;
- the order of the groups of a subcorpus, and of the sentences of a group, is the order of
  SHA-256 keys of (seed, subcorpus, group_id) and (seed, sample_id): a group's fate depends on
  its id and the seed, not on the row order of the table.

Only ids, counts and subcorpus names appear in messages, never sentence text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import require_columns
from mlmia.core.keys import stable_key

#: the parts of `carol_split`, one per group
PARTS = ("alice_train", "in_probe", "out_probe", "ood_probe", "unused")
#: the parts Alice trains on (every sentence of them, probes or not)
ALICE_TRAIN_PARTS = ("alice_train", "in_probe")
#: the classifier splits of Bob's labelled pairs (`shadow_splits`), and the shares of each slice's groups they get
CLASSIFIER_SPLITS = ("train", "valid", "test")
CLASSIFIER_FRACTIONS = (0.6, 0.2, 0.2)
#: the fewest groups of a held-out slice: one for each classifier split
SLICE_MIN_GROUPS = len(CLASSIFIER_SPLITS)


def _names(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    names = [str(v) for v in value]
    if len(set(names)) != len(names):
        raise UserError(f"carol_split: {what} lists a subcorpus twice")
    return names


def _order(keys: Sequence[str], salt: str) -> list[int]:
    """Positions of `keys` sorted by the SHA-256 key of `salt/key` (ties, impossible in practice, by key)."""
    return sorted(range(len(keys)), key=lambda i: (stable_key(f"{salt}/{keys[i]}"), keys[i]))


def _check_corpus(corpus: pd.DataFrame, where: str) -> pd.DataFrame:
    require_columns(corpus, ["sample_id", "group_id", "text", "subcorpus"], where)
    out = corpus.copy()
    for column in ("sample_id", "group_id", "subcorpus"):
        out[column] = out[column].astype(str)
    dup = out["sample_id"].duplicated()
    if dup.any():
        raise UserError(f"{where}: duplicate sample_id {shown_id(out['sample_id'][dup].iloc[0])}")
    spans = out.groupby("group_id")["subcorpus"].nunique()
    if (spans > 1).any():
        group = spans[spans > 1].index[0]
        raise UserError(
            f"{where}: group {group!r} has sentences in {int(spans[group])} subcorpora; each group must belong to "
            "one subcorpus (prefix group ids with the subcorpus if they are independent)"
        )
    return out


def _probe_groups(
    frame: pd.DataFrame, groups: list[str], k: int, per_group: int, seed: int
) -> tuple[list[str], list[str]]:
    """(groups used, probe sample ids): groups taken in order, at most `per_group` sentences each
    (the first by sentence key), until k probes; ([], []) when the groups run out first."""
    taken, probes = [], []
    for group in groups:
        if len(probes) >= k:
            break
        ids = frame.loc[frame["group_id"] == group, "sample_id"].tolist()
        chosen = [ids[i] for i in _order(ids, f"{seed}/sentence")][: min(per_group, k - len(probes))]
        taken.append(group)
        probes.extend(chosen)
    return (taken, probes) if len(probes) == k else ([], [])


def carol_split(
    corpus: pd.DataFrame,
    shared: Sequence[str],
    in_house: str | Sequence[str] | None,
    ood: Sequence[str] | None,
    probes: int,
    bob_share: float,
    seed: int,
    *,
    per_group: int = 1,
) -> pd.DataFrame:
    """Carol's split (the paper's Section 3 and Figure 2, on sentences of registers instead of
    translation corpora): the corpus with three columns added, by group.

    - `part` (one per group): for each SHARED subcorpus, its groups in key order give first
      the out-probe groups (`out_probe`: never trained on), then the in-probe groups
      (`in_probe`: Alice trains on them), until each side has `probes` probe sentences; every
      other group is `alice_train`. Every group of the IN-HOUSE subcorpora is `alice_train`.
      For each OOD subcorpus, the first groups until `probes` probe sentences are `ood_probe`,
      the rest `unused`; subcorpora not named anywhere are `unused`. Alice trains on the
      parts in `ALICE_TRAIN_PARTS`.
    - `probe`: True for exactly `probes` sentences per shared subcorpus and side (in, out)
      and per OOD subcorpus, at most `per_group` from one group.
    - `bob`: Bob's data (the paper's B, a subset of Alice's training data without the
      probes): `round(bob_share * n)` of the n `alice_train` groups of each shared subcorpus
      (at least one), chosen in key order of (seed, "bob", group). In-house and in-probe
      groups are never Bob's.

    Deterministic in (corpus, arguments). A subcorpus with too few groups for its probes
    (and, when shared, one more group for training) is a one-line UserError.
    """
    corpus = _check_corpus(corpus, "carol_split: corpus")
    shared_names = _names(shared, "shared")
    house_names = _names(in_house, "in_house")
    ood_names = _names(ood, "ood")
    if not shared_names:
        raise UserError("carol_split: no shared subcorpus given")
    listed = shared_names + house_names + ood_names
    if len(set(listed)) != len(listed):
        twice = next(n for n in listed if listed.count(n) > 1)
        raise UserError(f"carol_split: subcorpus {twice!r} is named in more than one of shared, in_house, ood")
    present = set(corpus["subcorpus"])
    missing = [n for n in listed if n not in present]
    if missing:
        raise UserError(
            f"carol_split: subcorpus {missing[0]!r} is not in the corpus (has: {', '.join(sorted(present))})"
        )
    k, per_group = int(probes), int(per_group)
    if k < 1:
        raise UserError(f"carol_split: probes must be >= 1, got {probes}")
    if per_group < 1:
        raise UserError(f"carol_split: per_group must be >= 1, got {per_group}")
    share = float(bob_share)
    if not 0.0 < share <= 1.0:
        raise UserError(f"carol_split: bob_share must be in (0, 1], got {bob_share}")
    seed = int(seed)

    part_of: dict[str, str] = dict.fromkeys(corpus["group_id"], "unused")
    probe_ids: set[str] = set()
    bob_groups: set[str] = set()
    for name in shared_names:
        frame = corpus[corpus["subcorpus"] == name]
        groups = list(dict.fromkeys(frame["group_id"]))
        groups = [groups[i] for i in _order(groups, f"{seed}/{name}")]
        out_groups, out_ids = _probe_groups(frame, groups, k, per_group, seed)
        in_groups, in_ids = _probe_groups(frame, groups[len(out_groups) :], k, per_group, seed) if out_ids else ([], [])
        rest = groups[len(out_groups) + len(in_groups) :]
        if not in_ids or not rest:
            raise UserError(
                f"carol_split: shared subcorpus {name!r} has {len(groups)} groups ({len(frame)} sentences), too few for "
                f"{k} out-probes and {k} in-probes (at most {per_group} per group) plus a group for training"
            )
        part_of.update(dict.fromkeys(out_groups, "out_probe"))
        part_of.update(dict.fromkeys(in_groups, "in_probe"))
        part_of.update(dict.fromkeys(rest, "alice_train"))
        probe_ids.update(out_ids + in_ids)
        n_bob = max(1, int(round(share * len(rest))))
        bob_groups.update(rest[i] for i in _order(rest, f"{seed}/bob/{name}")[:n_bob])
    for name in house_names:
        part_of.update(dict.fromkeys(corpus.loc[corpus["subcorpus"] == name, "group_id"], "alice_train"))
    for name in ood_names:
        frame = corpus[corpus["subcorpus"] == name]
        groups = list(dict.fromkeys(frame["group_id"]))
        groups = [groups[i] for i in _order(groups, f"{seed}/{name}")]
        ood_groups, ood_ids = _probe_groups(frame, groups, k, per_group, seed)
        if not ood_ids:
            raise UserError(
                f"carol_split: OOD subcorpus {name!r} has {len(groups)} groups ({len(frame)} sentences), too few for "
                f"{k} probes (at most {per_group} per group)"
            )
        part_of.update(dict.fromkeys(ood_groups, "ood_probe"))
        probe_ids.update(ood_ids)

    out = corpus.copy()
    out["part"] = out["group_id"].map(part_of).astype(object)
    out["probe"] = out["sample_id"].isin(probe_ids)
    out["bob"] = out["group_id"].isin(bob_groups)
    return out


def probe_table(split: pd.DataFrame) -> pd.DataFrame:
    """The probes of a `carol_split` table with their truth: `member` True for in-probes, False
    for out- and OOD probes; `probe_set` "alice" (in- and out-probes) or "ood"."""
    probes = split[split["probe"].astype(bool)].copy()
    probes["member"] = probes["part"] == "in_probe"
    probes["probe_set"] = np.where(probes["part"] == "ood_probe", "ood", "alice")
    return probes.reset_index(drop=True)


def run_sizes(n: int, fractions: tuple[float, ...]) -> list[int]:
    """The sizes of `_cut`'s runs of `n` groups: floor(n f_i / sum f) (each at least one group),
    the last run taking the rest."""
    total = sum(fractions)
    sizes = [max(1, math.floor(n * f / total)) for f in fractions[:-1]]
    for i in range(len(sizes)):  # leave at least one group for every later run
        sizes[i] = min(sizes[i], n - sum(sizes[:i]) - (len(fractions) - 1 - i))
    return [*sizes, n - sum(sizes)]


def _cut(groups: list[str], fractions: tuple[float, ...]) -> list[list[str]]:
    """`groups` cut in order into len(fractions) consecutive runs of `run_sizes`."""
    bounds = np.cumsum([0, *run_sizes(len(groups), fractions)])
    return [groups[bounds[i] : bounds[i + 1]] for i in range(len(fractions))]


def slice_pairs(n_shadows: int, slice_share: float) -> int:
    """The pairs of Bob's shadow models (k+, k-), refused in one line unless `n_shadows` is even
    and >= 2 and the 2 x pairs slices of `slice_share` fit in Bob's data."""
    n_shadows = int(n_shadows)
    if n_shadows < 2 or n_shadows % 2:
        raise UserError(
            f"shadow_splits: shadows come in pairs (k+, k-); n_shadows must be even and >= 2, got {n_shadows}"
        )
    n_pairs = n_shadows // 2
    share = float(slice_share)
    if not 0 < share or 2 * n_pairs * share > 1 + 1e-9:
        raise UserError(
            f"shadow_splits: slice_share {slice_share} with {n_pairs} pairs of shadows: the {2 * n_pairs} slices must "
            "fit in Bob's data (0 < 2 x pairs x slice_share <= 1)"
        )
    return n_pairs


def slice_groups(share: float, groups: int) -> int:
    """The groups of each held-out slice when Bob's data of a subcorpus holds `groups` groups."""
    return max(1, int(round(float(share) * groups)))


def shadow_model_settings(settings: dict, who: str, *, seed: int) -> dict:
    """A model's training settings in the protocol, `who` "alice" or "bob_<s>": Alice's as given;
    Bob's shadow s with its own seed, `seed` (the settings' own, resolved by the caller) + s, as
    independently trained models have.
    (One seed for every shadow let one fail alike in all: on the default world, the translation
    target's shadow 1 did not fit its own training pairs under seed 0, 7.8 BLEU on them, and fit
    them under seed 1, 82.1.)"""
    shadow = 0 if who == "alice" else int(who.removeprefix("bob_"))
    if shadow == 0:  # unchanged, so that a run's existing models stay up to date
        return dict(settings)
    return {**settings, "seed": int(seed) + shadow}


def slice_name(pair: int, sign: str) -> str:
    """The name of a held-out slice: "<pair>+" or "<pair>-" (the paper's Figure 4)."""
    return f"{int(pair)}{sign}"


def shadow_splits(
    bob_data: pd.DataFrame,
    n_shadows: int,
    slice_share: float,
    seed: int,
    *,
    fractions: tuple[float, float, float] = CLASSIFIER_FRACTIONS,
) -> pd.DataFrame:
    """Bob's shadow models, held-out slices and classifier splits (the paper's Section 3.2 and
    Figure 4): the shadow models come in pairs (k+, k-) that train on all of Bob's data but one
    small slice each, the slice the other of the pair trains on.

    - Slices: for each subcorpus of Bob's data (all together without a `subcorpus` column) the
      groups (documents), in key order of (seed, "slice", group), are dealt round-robin to
      2 x pairs slices "0+", "0-", "1+", ... until each holds max(1, round(slice_share x groups))
      groups; the rest of Bob's data is in no slice. Shadow 2k ("k+") trains on Bob's data
      without slice "k-", shadow 2k+1 ("k-") without slice "k+": each slice is "in" for one
      shadow of its pair and "out" for the other, and both shadows of a pair, like every other
      shadow, train on nearly all of Bob's data, as Alice trains on all of hers.
    - Labelled pairs (the rows returned): for each shadow, the sentences of its pair's two
      slices, `member` True for the slice it trains on; balanced up to the slices' sizes.
    - Classifier split: each slice's groups, in key order of (seed, "classifier", group), are cut
      by `fractions` into "train", "valid" and "test" (each at least one group), so every split
      holds in- and out-rows of every shadow, and no document of Bob:valid or Bob:test was seen
      by the classifier in training. The paper does not say how Bob splits his labelled data;
      by document within each slice is our choice.

    Returns one row per (shadow, sentence of its pair's slices): `sample_id`, `group_id`,
    `shadow` (0 .. n_shadows - 1), `pair`, `slice` (the sentence's slice), `member`, `split`.
    `shadow_training_ids` gives a shadow's training sentences.
    """
    require_columns(bob_data, ["sample_id", "group_id"], "shadow_splits: Bob's data")
    n_pairs = slice_pairs(n_shadows, slice_share)
    n_shadows, share = 2 * n_pairs, float(slice_share)
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or min(fractions) <= 0:
        raise UserError("shadow_splits: fractions must be three positive numbers (train, valid, test)")
    data = bob_data.copy()
    data["sample_id"] = data["sample_id"].astype(str)
    data["group_id"] = data["group_id"].astype(str)
    if data["sample_id"].duplicated().any():
        raise UserError(
            f"shadow_splits: duplicate sample_id {shown_id(data['sample_id'][data['sample_id'].duplicated()].iloc[0])}"
        )
    seed = int(seed)
    names = [slice_name(k, sign) for k in range(n_pairs) for sign in "+-"]
    strata = data.groupby("subcorpus")["group_id"] if "subcorpus" in data.columns else [("all", data["group_id"])]
    slice_of: dict[str, str] = {}
    for stratum, column in strata:
        groups = list(dict.fromkeys(column))
        per_slice = slice_groups(share, len(groups))
        if per_slice * len(names) > len(groups) or per_slice < SLICE_MIN_GROUPS:
            raise UserError(
                f"shadow_splits: Bob's {stratum!r} data has {len(groups)} groups, too few for {len(names)} slices of "
                f"{per_slice} (each slice needs 3 groups for the classifier's train, valid and test splits); give Bob "
                "more data, fewer shadows or a larger slice_share"
            )
        ordered = [groups[i] for i in _order(groups, f"{seed}/slice")]
        for i, group in enumerate(ordered[: per_slice * len(names)]):
            slice_of[group] = names[i % len(names)]
    split_of: dict[str, str] = {}
    for name in names:
        groups = [g for g, s in slice_of.items() if s == name]
        runs = _cut([groups[i] for i in _order(groups, f"{seed}/classifier")], fractions)
        for label, run in zip(CLASSIFIER_SPLITS, runs):
            split_of.update(dict.fromkeys(run, label))
    labelled = data[data["group_id"].isin(slice_of)]
    frames = []
    for shadow in range(n_shadows):
        pair, sign = divmod(shadow, 2)
        own = slice_name(pair, "+-"[sign])
        rows = labelled[labelled["group_id"].map(slice_of).isin([slice_name(pair, "+"), slice_name(pair, "-")])]
        frames.append(
            pd.DataFrame(
                {
                    "sample_id": rows["sample_id"].to_numpy(),
                    "group_id": rows["group_id"].to_numpy(),
                    "shadow": np.full(len(rows), shadow, dtype=np.int64),
                    "pair": np.full(len(rows), pair, dtype=np.int64),
                    "slice": rows["group_id"].map(slice_of).to_numpy(),
                    "member": (rows["group_id"].map(slice_of) == own).to_numpy(),
                    "split": rows["group_id"].map(split_of).to_numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def shadow_training_ids(bob_ids, pairs: pd.DataFrame, shadow: int) -> list[str]:
    """Sample ids shadow model `shadow` trains on: Bob's (`bob_ids`, in their order) but its
    held-out slice (its `member` False rows of `shadow_splits`)."""
    rows = pairs[pairs["shadow"] == int(shadow)]
    held_out = set(rows.loc[~rows["member"].astype(bool), "sample_id"].astype(str))
    return [str(i) for i in bob_ids if str(i) not in held_out]
