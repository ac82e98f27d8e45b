"""The shadow protocol's steps as the workflow runs them: Carol's split and the training texts,
each model's fill-in features, and the tables (no Snakemake here: the scripts call these)."""

from __future__ import annotations

import pandas as pd

from mlmia.shadow.report import bob_feature_table, probe_feature_table, shadow_tables
from mlmia.shadow.split import ALICE_TRAIN_PARTS, carol_split, probe_table, shadow_splits, shadow_training_ids


def split_and_texts(corpus: pd.DataFrame, settings: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    """(Carol's split, Bob's labelled pairs, training texts by model: "alice", "bob_<s>")."""
    split = carol_split(
        corpus, settings["shared"], settings["in_house"], settings["ood"], settings["probes"], settings["bob_share"],
        settings["seed"],
    )  # fmt: skip
    bob = split[split["bob"].astype(bool)]
    pairs = shadow_splits(bob, settings["shadows"], settings["seed"])
    columns = ["sample_id", "group_id", "text"]
    texts = {"alice": split[split["part"].isin(ALICE_TRAIN_PARTS)][columns].reset_index(drop=True)}
    for shadow in range(settings["shadows"]):
        ids = set(shadow_training_ids(pairs, shadow))
        texts[f"bob_{shadow}"] = bob[bob["sample_id"].astype(str).isin(ids)][columns].reset_index(drop=True)
    return split, pairs, texts


def queried_samples(split: pd.DataFrame, pairs: pd.DataFrame, model: str) -> pd.DataFrame:
    """The sentences a model is queried on: Alice's model on every probe, shadow s on Bob's data."""
    if model == "alice":
        return probe_table(split)[["sample_id", "text"]]
    shadow = int(model.split("_", 1)[1])
    ids = set(pairs.loc[pairs["shadow"] == shadow, "sample_id"].astype(str))
    return split[split["sample_id"].astype(str).isin(ids)][["sample_id", "text"]]


def tables(split: pd.DataFrame, pairs: pd.DataFrame, features: dict[str, pd.DataFrame], settings: dict) -> dict:
    """Tables 2-6, Figure 7's numbers and the findings from the models' features."""
    bob = bob_feature_table(pairs, {int(m.split("_", 1)[1]): f for m, f in features.items() if m != "alice"})
    probes = probe_feature_table(split, features["alice"])
    return shadow_tables(
        bob, probes, settings["seed"], n_bootstrap=settings["bootstrap"], group_size=settings["group_size"]
    )
