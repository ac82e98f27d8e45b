"""The shadow protocol's steps as the workflow runs them: Carol's split and the training texts,
the sentences each model is queried on, and the protocol's tables (no Snakemake here: the scripts
call these). `tables` is the entry point any target runs the protocol through."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.shadow.classify import MODEL_SCORE_FEATURES
from mlmia.shadow.features import STAT_COLUMNS, shadow_oov_flags
from mlmia.shadow.report import bob_feature_table, probe_feature_table, shadow_tables
from mlmia.shadow.split import (
    ALICE_TRAIN_PARTS,
    carol_split,
    probe_table,
    shadow_splits,
    shadow_training_ids,
)

#: the columns a target's per-sentence feature table must hold for the protocol
PROTOCOL_COLUMNS = ["sample_id", *MODEL_SCORE_FEATURES, *STAT_COLUMNS]


def split_and_texts(
    corpus: pd.DataFrame, settings: Mapping
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    """(Carol's split, Bob's labelled pairs, training texts by model: "alice", "bob_<s>");
    `settings`: the protocol's config section (`shadow`, `shadow_mt`), every key given."""
    split = carol_split(
        corpus, settings["shared"], settings["in_house"], settings["ood"], settings["probes"], settings["bob_share"],
        settings["seed"], per_group=settings["probe_sentences"],
    )  # fmt: skip
    bob = split[split["bob"].astype(bool)]
    pairs = shadow_splits(bob, settings["shadows"], settings["slice_share"], settings["seed"])
    columns = ["sample_id", "group_id", "text"]
    texts = {"alice": split[split["part"].isin(ALICE_TRAIN_PARTS)][columns].reset_index(drop=True)}
    for shadow in range(settings["shadows"]):
        ids = set(shadow_training_ids(bob["sample_id"], pairs, shadow))
        texts[f"bob_{shadow}"] = bob[bob["sample_id"].astype(str).isin(ids)][columns].reset_index(drop=True)
    return split, pairs, texts


def queried_samples(split: pd.DataFrame, pairs: pd.DataFrame, model: str) -> pd.DataFrame:
    """The sentences a model is queried on: Alice's model on every probe, shadow s on its pair's slices."""
    if model == "alice":
        return probe_table(split)[["sample_id", "text"]]
    shadow = int(model.split("_", 1)[1])
    ids = set(pairs.loc[pairs["shadow"] == shadow, "sample_id"].astype(str))
    return split[split["sample_id"].astype(str).isin(ids)][["sample_id", "text"]]


def tables(
    split: pd.DataFrame,
    pairs: pd.DataFrame,
    features: Mapping[str, pd.DataFrame],
    settings: Mapping,
    training_texts: Mapping[str, pd.DataFrame],
) -> dict:
    """Hisamoto et al.'s protocol on one target: Tables 2-6, Figure 7's numbers, the adjustment
    shift and the findings (`mlmia.shadow.report.shadow_tables`). Any target (a masked language
    model's fill-in, a translation model) runs through here; it supplies:

    - `split`: Carol's split, one row per sentence (`carol_split`'s columns: `sample_id`,
      `group_id` (the document), `text` (what the target reads, used only for the OOV flags),
      `subcorpus`, `part`, `probe`, `bob`);
    - `pairs`: Bob's labelled pairs (`shadow_splits`'s columns: `sample_id`, `group_id`,
      `shadow`, `member`, `split`);
    - `features`: per model a per-sentence feature table, "alice" (every probe) and "bob_<s>" for
      each shadow s (the sentences of its pairs), each with `PROTOCOL_COLUMNS`: `sample_id`,
      sentence `bleu` and `precision_1..4` (Table 2), `model_score` (the model's score of its own
      output, Table 3) and the BLEU statistics `STAT_COLUMNS` (corpus BLEU of groups); other
      columns are ignored;
    - `training_texts`: per shadow "bob_<s>" its training sentences (a `text` column): the OOV
      flags of Table 5;
    - `settings`: the protocol's config section (`shadow`, `shadow_mt`), every key given: `seed`,
      `bootstrap`, `group_size`, `groups`, `bins`, `top_percentages`.
    """
    if "alice" not in features:
        raise UserError("shadow protocol: no features of Alice's model ('alice')")
    for name, frame in features.items():
        require_columns(frame, PROTOCOL_COLUMNS, f"shadow protocol: features of {name}")
    by_shadow = {int(m.split("_", 1)[1]): f for m, f in features.items() if m != "alice"}
    bob = bob_feature_table(pairs, by_shadow)
    texts = split.assign(sample_id=split["sample_id"].astype(str)).set_index("sample_id")["text"]
    shadow_texts = {}
    for shadow in sorted(by_shadow):
        if f"bob_{shadow}" not in training_texts:
            raise UserError(f"shadow protocol: no training text of shadow model {shadow} ('bob_{shadow}')")
        shadow_texts[shadow] = training_texts[f"bob_{shadow}"]["text"].astype(str).tolist()
    bob["oov"] = shadow_oov_flags(bob, texts, shadow_texts)
    probes = probe_feature_table(split, features["alice"])
    return shadow_tables(
        bob, probes, settings["seed"], n_bootstrap=settings["bootstrap"], group_size=settings["group_size"],
        groups=settings["groups"], bins=settings["bins"], percentages=settings["top_percentages"],
    )  # fmt: skip
