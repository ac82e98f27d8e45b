"""Which samples leak (Table 7): label each member "exposed" when the attack calls it a
member at the population threshold, then ask how well simple sample features predict
exposure with a logistic regression, on a train and a held-out test split.

Features (the paper's): A the number of digits, B the length in tokens, C the number of
non-alphanumeric characters, D the frequencies of the sample's 3 least frequent tokens in
the target's training set, and a general model's [CLS] embedding.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_score, recall_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mlmia.errors import UserError
from mlmia.logs import get_logger
from mlmia.metrics import population_threshold

FEATURE_SETS = {
    "digits": ["digits"],
    "length": ["length"],
    "non_alnum": ["non_alnum"],
    "rare_tokens": ["rare_1", "rare_2", "rare_3"],
    "all_simple": ["digits", "length", "non_alnum", "rare_1", "rare_2", "rare_3"],
    "cls_embedding": ["cls"],
}
log = get_logger("exposure")


def training_texts(table: pd.DataFrame, where: str) -> pd.Series:
    """The target's training text for token frequencies. A sample manifest stands in for a
    training set the user cannot give: its members and held-in members are training text."""
    if "text" not in table.columns:
        raise UserError(f"{where}: training text needs a `text` column (has: {', '.join(map(str, table.columns))})")
    if "role" in table.columns:
        table = table[table["role"].isin(["member", "member_heldin"])]
        log.info("token frequencies from the %d member samples of %s (no training text configured)", len(table), where)
    return table["text"].astype(str)


def token_frequencies(tokenizer, texts) -> Counter:
    counts: Counter = Counter()
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        counts.update(ids)
    return counts


def simple_features(texts: pd.Series, tokenizer, frequencies: Counter) -> pd.DataFrame:
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    rare = np.array([sorted(frequencies.get(t, 0) for t in set(row))[:3] + [0] * max(0, 3 - len(set(row))) for row in ids])
    return pd.DataFrame(
        {
            "digits": texts.str.count(r"\d").to_numpy(),
            "length": [len(row) for row in ids],
            "non_alnum": texts.str.count(r"[^A-Za-z0-9\s]").to_numpy(),
            # log scale: raw counts span several orders of magnitude
            "rare_1": np.log1p(rare[:, 0]),
            "rare_2": np.log1p(rare[:, 1]),
            "rare_3": np.log1p(rare[:, 2]),
        },
        index=texts.index,
    )


@torch.inference_mode()
def cls_embeddings(model, tokenizer, texts, batch_size: int = 64) -> np.ndarray:
    """Last-layer [CLS] vectors of a BERT-like model (an MLM's encoder)."""
    encoder = getattr(model, "base_model", model)
    encoder.eval()
    device = next(encoder.parameters()).device
    out = []
    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size], padding=True, truncation=True, return_tensors="pt").to(device)
        out.append(encoder(**batch).last_hidden_state[:, 0].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def exposed_labels(attack: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Members with an `exposed` flag: L strictly below the population alpha-threshold."""
    threshold = population_threshold(attack.loc[attack.role == "population", "stat"].to_numpy(), alpha)
    members = attack[attack.role == "member"].copy()
    members["exposed"] = members["stat"] < threshold
    return members


def exposure_metrics(
    members: pd.DataFrame, features: pd.DataFrame, cls: np.ndarray, alpha: float, test_size: float = 0.3, seed: int = 0
) -> pd.DataFrame:
    """Precision/recall (percent) of "exposed" for each feature set on train and test splits."""
    columns = ["metric", "method", "alpha", "fpr", "protocol", "level", "value", "ci_low", "ci_high", "split"]
    y = members["exposed"].to_numpy()
    if y.all() or not y.any() or min(y.sum(), (~y).sum()) < 2:
        # Too few of one class to split and fit: the cells stay empty rather than invented.
        log.warning("exposure: %d of %d members exposed at alpha %g: too few of one class, no classifier fitted",
                    int(y.sum()), len(y), alpha)
        return pd.DataFrame(
            [(metric, name, alpha, np.nan, "corrected", "sample", np.nan, np.nan, np.nan, split)
             for name in FEATURE_SETS for split in ("train", "test") for metric in ("precision", "recall")],
            columns=columns,
        )  # fmt: skip
    index = np.arange(len(members))
    train, test = train_test_split(index, test_size=test_size, random_state=seed, stratify=y)
    log.info("exposure: %d members, %.1f%% exposed; %d train / %d test", len(y), 100 * y.mean(), len(train), len(test))
    rows = []
    for name, feature_columns in FEATURE_SETS.items():
        x = cls if feature_columns == ["cls"] else features[feature_columns].to_numpy(dtype=float)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced"))
        model.fit(x[train], y[train])
        for split, idx in (("train", train), ("test", test)):
            predicted = model.predict(x[idx])
            for metric, fn in (("precision", precision_score), ("recall", recall_score)):
                value = 100.0 * fn(y[idx], predicted, zero_division=0)
                rows.append((metric, name, alpha, np.nan, "corrected", "sample", value, np.nan, np.nan, split))
    return pd.DataFrame(rows, columns=columns)
