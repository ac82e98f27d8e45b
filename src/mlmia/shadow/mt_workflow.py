"""The shadow protocol on the translation target, as the workflow runs it (`snakemake shadow_mt`; no
Snakemake here: the scripts call these). The protocol is the MLM port's (`mlmia.shadow.workflow`):
Carol's split and Bob's shadow splits of the parallel corpus (`mlmia.world.parallel`) by document,
Alice's and Bob's encoder-decoders (`mlmia.models.seq2seq`) trained on their pairs, each queried with
the sources of the pairs it is attacked on (`mlmia.shadow.translation`), and the same tables.
"""

from __future__ import annotations

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.shadow import workflow

#: the columns of a model's training pairs
PAIR_COLUMNS = ["sample_id", "group_id", "text", "target"]


def split_and_pairs(corpus: pd.DataFrame, settings: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    """(Carol's split, Bob's labelled pairs, training pairs by model: "alice", "bob_<s>") of the
    parallel corpus: `mlmia.shadow.workflow.split_and_texts` on the sources, each training row
    with its target. The split keeps every column of the corpus (the targets among them)."""
    require_columns(corpus, ["sample_id", "group_id", "text", "target", "subcorpus"], "parallel corpus")
    split, pairs, texts = workflow.split_and_texts(corpus, settings)
    target = split.set_index("sample_id")["target"]
    training = {
        name: frame.assign(target=frame["sample_id"].map(target))[PAIR_COLUMNS] for name, frame in texts.items()
    }
    return split, pairs, training


def queried_pairs(split: pd.DataFrame, pairs: pd.DataFrame, model: str) -> pd.DataFrame:
    """The pairs a model is queried on (`sample_id`, `text`, `target`): Alice's model on every probe,
    shadow s on Bob's data (`mlmia.shadow.workflow.queried_samples`)."""
    samples = workflow.queried_samples(split, pairs, model)
    target = split.assign(sample_id=split["sample_id"].astype(str)).set_index("sample_id")["target"]
    out = samples.assign(target=samples["sample_id"].astype(str).map(target))
    if out["target"].isna().any():
        raise UserError(f"translation queries of {model}: {int(out['target'].isna().sum())} pairs have no target")
    return out[["sample_id", "text", "target"]]


# --------------------------------------------------------------------------- the tables


def tables(
    split: pd.DataFrame,
    pairs: pd.DataFrame,
    features: dict[str, pd.DataFrame],
    training: dict[str, pd.DataFrame],
    settings: dict,
) -> dict:
    """Tables 2-6, Figure 7's numbers and the findings: the protocol's entry point
    (`mlmia.shadow.workflow.tables`) on the translation features; `training` holds each shadow's
    training pairs (`split_and_pairs`), whose sources flag the OOV pairs of Table 5."""
    return workflow.tables(split, pairs, features, settings, training)
