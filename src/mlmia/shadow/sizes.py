"""The shadow protocol's settings checked against the subcorpora they split, before anything is
built or trained: the subcorpora exist and each is named once, Carol's probes fit in them, Bob's
held-out slices fit in his data, and a random group (`group_size` sentences of one side) fits in
every set it is drawn from (Alice's probes; Bob's train, valid and test pairs).

A subcorpus's size comes from its settings (`mlmia.world.subcorpora.Documents`: how many
documents, at most how many sentences each), not from a built corpus, so the checks refuse only
what cannot work whatever the documents hold: Carol's split (`carol_split`) takes at least
ceil(probes / min(probe_sentences, most)) documents per side, Bob's data is then at most
bob_share of the rest, and Bob's sets hold at most their documents times `most` sentences. Alice's
in-probes per side are exactly probes x shared subcorpora. Every refusal is one line naming the
config key (`<section>.<key>`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from mlmia.core.errors import UserError
from mlmia.shadow.split import (
    CLASSIFIER_FRACTIONS,
    CLASSIFIER_SPLITS,
    SLICE_MIN_GROUPS,
    run_sizes,
    slice_groups,
    slice_pairs,
)
from mlmia.world.subcorpora import Documents

PLURAL = {"subcorpus": "subcorpora"}


def _refuse(section: str, key: str, message: str) -> UserError:
    return UserError(f"config key {section}.{key}: {message}")


def check_names(
    settings: Mapping, documents: Mapping[str, Documents | None], section: str, known: str, label: str
) -> None:
    """Every subcorpus `shared`, `in_house` and `ood` name is one of `documents` (`known`: what they
    are, e.g. "a register of the world"; `label`: what they are called, e.g. "registers"), named
    once in the three lists."""
    seen: dict[str, str] = {}
    for key in ("shared", "in_house", "ood"):
        names = settings.get(key)
        listed = [names] if isinstance(names, str) else list(names or [])
        for i, name in enumerate(listed):
            where = key if isinstance(names, str) else f"{key}[{i}]"
            if name not in documents:
                raise _refuse(section, where, f"{name!r} is not {known} ({label}: {', '.join(documents)})")
            if name in seen:
                raise _refuse(
                    section, where, f"{name!r} is also in {section}.{seen[name]} (a subcorpus plays one part)"
                )
            seen[name] = key


def _probe_documents(probes: int, per_group: int, size: Documents) -> int:
    """The fewest documents Carol takes for `probes` probes of one side (at most `per_group` each)."""
    return math.ceil(probes / max(1, min(per_group, size.most)))


def check_sizes(settings: Mapping, documents: Mapping[str, Documents | None], section: str, what: str,
                sized: Mapping[str, str]) -> None:  # fmt: skip
    """Carol's probes, Bob's slices and the groups fit the subcorpora (`what`: "register" or
    "subcorpus"; `sized`: the config key and value each subcorpus's size comes from, for the
    messages). `settings`: the protocol's config section, every key given."""
    shared = list(settings["shared"])
    in_house = [settings["in_house"]] if isinstance(settings["in_house"], str) else list(settings["in_house"] or [])
    ood = list(settings["ood"] or [])
    probes, per_group = int(settings["probes"]), int(settings["probe_sentences"])
    try:
        pairs = slice_pairs(settings["shadows"], settings["slice_share"])
    except UserError as exc:
        key = "shadows" if "pairs (k+, k-)" in str(exc) else "slice_share"
        raise _refuse(section, key, str(exc).removeprefix("shadow_splits: ")) from None
    for key, names in (("shared", shared), ("in_house", in_house), ("ood", ood)):
        for name in names:
            size = documents[name]
            if size is not None and size.count == 0:
                index = key if key == "in_house" else f"{key}[{names.index(name)}]"
                raise _refuse(section, index, f"{name!r} has no documents ({sized[name]})")
    bob_rows = dict.fromkeys(CLASSIFIER_SPLITS, 0)
    for name in shared + ood:
        size = documents[name]
        if size is None:
            continue
        per_side = _probe_documents(probes, per_group, size)
        needed = 2 * per_side + 1 if name in shared else per_side
        if size.count < needed:
            parts = "out-probes, in-probes and one to train on" if name in shared else "out-of-domain probes"
            raise _refuse(
                section, "probes",
                f"{probes} probes per side (at most {per_group} per document, {what} {name!r} at most {size.most} "
                f"sentences per document) need {needed} documents of {what} {name!r} ({parts}); it has at most "
                f"{size.count} documents ({sized[name]})",
            )  # fmt: skip
        if name in shared:
            rows = _bob_rows(settings, pairs, size, size.count - 2 * per_side, section, name)
            for split in CLASSIFIER_SPLITS:
                bob_rows[split] += rows[split]
    group_size = int(settings["group_size"])
    alice = probes * len(shared)
    if group_size > alice:
        raise _refuse(
            section, "group_size",
            f"{group_size} is more than the {alice} in-probes of Alice's ({section}.probes {probes} x {len(shared)} "
            f"shared {PLURAL.get(what, what + 's')}); a group holds group_size sentences of one side",
        )  # fmt: skip
    if any(documents[name] is None for name in shared):
        return  # Bob's sets are as large as a subcorpus the settings do not size
    for split in CLASSIFIER_SPLITS:
        if group_size > bob_rows[split]:
            raise _refuse(
                section, "group_size",
                f"{group_size} is more than the at most {bob_rows[split]} sentences per side of Bob:{split} "
                f"({2 * pairs} held-out slices of his {', '.join(shared)} data); a group holds group_size sentences "
                "of one side",
            )  # fmt: skip


def _bob_rows(settings: Mapping, pairs: int, size: Documents, rest: int, section: str, name: str) -> dict[str, int]:
    """The most sentences per side each of Bob's classifier splits can draw from shared subcorpus
    `name`, whose documents beside the probes are at most `rest`; refused when no share of them
    gives Bob 2 x pairs slices of at least `SLICE_MIN_GROUPS` documents (`shadow_splits`)."""
    bob_share, slice_share = float(settings["bob_share"]), float(settings["slice_share"])
    slices = 2 * pairs
    most_bob = max(1, int(round(bob_share * rest)))
    best = dict.fromkeys(CLASSIFIER_SPLITS, 0)
    fits = False
    for groups in range(1, most_bob + 1):  # Bob's documents of `name`: at most most_bob
        per_slice = slice_groups(slice_share, groups)
        if per_slice * slices > groups or per_slice < SLICE_MIN_GROUPS:
            continue
        fits = True
        for split, runs in zip(CLASSIFIER_SPLITS, run_sizes(per_slice, CLASSIFIER_FRACTIONS)):
            best[split] = max(best[split], slices * runs * size.most)
    if not fits:
        raise _refuse(
            section, "slice_share",
            f"Bob's {name!r} data holds at most {most_bob} documents ({section}.bob_share {bob_share} of the at "
            f"most {rest} Alice trains on beside the probes), too few for {slices} held-out slices of "
            f"{SLICE_MIN_GROUPS} or more documents at slice_share {slice_share}; give Bob more data, fewer shadows or "
            "a larger slice_share",
        )  # fmt: skip
    return best
