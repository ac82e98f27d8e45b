"""Which samples leak (Table 7): label each member "exposed" when an attack calls it a
member at the population threshold, then ask how well simple sample features predict
exposure with a logistic regression, on a train split and a held-out test split of the
member patients (StratifiedGroupKFold: a patient's samples are never on both sides).

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
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.metrics.classification import population_threshold

FEATURE_SETS = {
    "digits": ["digits"],
    "length": ["length"],
    "non_alnum": ["non_alnum"],
    "rare_tokens": ["rare_1", "rare_2", "rare_3"],
    "all_simple": ["digits", "length", "non_alnum", "rare_1", "rare_2", "rare_3"],
    "cls_embedding": ["cls"],
}
log = get_logger(__name__)


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
    rare = np.array(
        [sorted(frequencies.get(t, 0) for t in set(row))[:3] + [0] * max(0, 3 - len(set(row))) for row in ids]
    )
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
        batch = tokenizer(texts[start : start + batch_size], padding=True, truncation=True, return_tensors="pt").to(
            device
        )
        out.append(encoder(**batch).last_hidden_state[:, 0].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def exposed_labels(attack_table: pd.DataFrame, alpha: float, attack: str) -> pd.DataFrame:
    """Members with an `exposed` flag: the attack calls them members at the population
    alpha-threshold (at most alpha of the population called a member)."""
    chosen = get_attack(attack)
    score = chosen.member_score(attack_table)
    threshold = population_threshold(score[(attack_table.role == "population").to_numpy()], alpha)
    is_member = (attack_table.role == "member").to_numpy()
    members = attack_table[is_member].copy()
    members["exposed"] = score[is_member] > threshold
    return members


def patient_split(y: np.ndarray, groups: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) row indices, no patient on both sides: the first fold of a
    `StratifiedGroupKFold` with round(1 / test_size) folds (shuffled by `seed`) is the test."""
    folds = max(2, int(round(1.0 / test_size)))
    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    train, test = next(splitter.split(np.zeros(len(y)), y, groups))
    return train, test


def exposure_metrics(
    members: pd.DataFrame,
    features: pd.DataFrame,
    cls: np.ndarray,
    alpha: float,
    *,
    test_size: float,
    seed: int,
) -> pd.DataFrame:
    """Precision/recall (percent) of "exposed" for each feature set on train and test splits."""
    columns = [
        "metric",
        "features",
        "alpha",
        "fpr",
        "protocol",
        "level",
        "value",
        "ci_low",
        "ci_high",
        "resolvable",
        "split",
    ]
    y = members["exposed"].to_numpy()
    groups = members["group_id"].astype(str).to_numpy()
    folds = max(2, int(round(1.0 / test_size)))
    exposed_patients = len(set(groups[y]))
    if y.all() or not y.any() or min(exposed_patients, len(set(groups[~y]))) < folds:
        # Too few of one class to split and fit: the cells stay empty rather than invented.
        log.warning(
            "exposure: %d of %d members exposed at alpha %g: too few of one class, no classifier fitted",
            int(y.sum()),
            len(y),
            alpha,
        )
        return pd.DataFrame(
            [(metric, name, alpha, np.nan, "corrected", "sample", np.nan, np.nan, np.nan, True, split)
             for name in FEATURE_SETS for split in ("train", "test") for metric in ("precision", "recall")],
            columns=columns,
        )  # fmt: skip
    train, test = patient_split(y, groups, test_size, seed)
    log.info(
        "exposure: %d member samples of %d patients, %.1f%% exposed; %d train / %d test samples, no patient in both",
        len(y),
        len(set(groups)),
        100 * y.mean(),
        len(train),
        len(test),
    )
    rows = []
    for name, feature_columns in FEATURE_SETS.items():
        x = cls if feature_columns == ["cls"] else features[feature_columns].to_numpy(dtype=float)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced"))
        model.fit(x[train], y[train])
        for split, idx in (("train", train), ("test", test)):
            predicted = model.predict(x[idx])
            for metric, fn in (("precision", precision_score), ("recall", recall_score)):
                value = 100.0 * fn(y[idx], predicted, zero_division=0)
                rows.append((metric, name, alpha, np.nan, "corrected", "sample", value, np.nan, np.nan, True, split))
    return pd.DataFrame(rows, columns=columns)
