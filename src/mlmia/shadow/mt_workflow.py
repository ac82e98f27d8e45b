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
from mlmia.shadow.report import TITLES

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


# --------------------------------------------------------------------------- ADAPTER (issue 28)
# To be removed when the reworked protocol is merged: its Table 2 reads ("bleu", "precision_1" ..
# "precision_4") and its Table 3 adds "model_score", the columns `translation_features` writes.
# Today's protocol (`mlmia.shadow.classify.FEATURES`, `MODEL_SCORE_FEATURES`) reads the MLM fill-in's
# `top1_accuracy` and `energy` instead; here the translation's unigram precision (as a fraction)
# stands in for the first and minus its model score (a cross-entropy per output token, as the
# energy is) for the second, and the titles say so.
ADAPTED_TITLES = {
    "top-1 accuracy, energy": "1-gram precision, model score",
    "top-1 accuracy": "1-gram precision",
}


def adapted_features(features: pd.DataFrame) -> pd.DataFrame:
    """ADAPTER: a translation feature table with the MLM port's `top1_accuracy` and `energy` columns."""
    return features.assign(top1_accuracy=features["precision_1"] / 100.0, energy=-features["model_score"])


def adapted_markdown(text: str) -> str:
    """ADAPTER: the MLM port's titles of Tables 2-3 renamed for the translation features."""
    for key in ("table2", "table3"):
        title = TITLES[key]
        for old, new in ADAPTED_TITLES.items():
            title = title.replace(old, new)
        text = text.replace(TITLES[key], title)
    return text


# --------------------------------------------------------------------------- the tables


def tables(split: pd.DataFrame, pairs: pd.DataFrame, features: dict[str, pd.DataFrame], settings: dict) -> dict:
    """Tables 2-6, Figure 7's numbers and the findings: `mlmia.shadow.workflow.tables` on the
    translation features (through the adapter above)."""
    adapted = {name: adapted_features(frame) for name, frame in features.items()}
    result = workflow.tables(split, pairs, adapted, settings)
    for key in ("table2", "table3", "table4", "table5"):
        if key in result:
            result[key] = result[key].assign(
                features=result[key]["features"]
                .str.replace("top1_accuracy", "precision_1", regex=False)
                .str.replace("energy", "model_score", regex=False)
            )
    return result
