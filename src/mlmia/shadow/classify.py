"""The attack classifiers and their accuracy with a group bootstrap (Hisamoto, Post and Duh, TACL 2020,
Section 4 and Tables 2-3).

The paper trains five scikit-learn classifiers on Bob's labelled (sentence, shadow model)
pairs: Perceptron, Decision Tree, Naive Bayes, k-NN and a multi-layer perceptron. The
paper gives no hyper-parameters; ours are scikit-learn's defaults (GaussianNB for "Naive
Bayes", k = 5 neighbours, one hidden layer of 100 units for the MLP with at most 500
epochs), each behind a StandardScaler fitted on the training rows and seeded with `seed`
where the model has a seed. Features (`FEATURES`): sentence BLEU and top-1 accuracy of the
fill-in query (the paper: BLEU and its n-gram precisions); `MODEL_SCORE_FEATURES` adds the
fill-in energy, the analogue of the paper's model score (Table 3).

Accuracy is the fraction of rows whose prediction equals the truth (`member`). Its 95%
interval is a percentile bootstrap over GROUPS (patients or documents;
`mlmia.metrics.intervals.group_bootstrap`): a drawn group brings all its rows. When no group
holds both members and non-members (Alice's probes: in- and out-probe documents are disjoint),
groups are drawn within each label, so every replicate keeps the in/out balance; otherwise
(Bob's pairs, where a document is a member of one shadow model and not of another) all groups
are drawn together. Every classifier is evaluated on the same replicates (paired).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.metrics.intervals import group_bootstrap

#: the paper's classifiers, in its order
CLASSIFIERS = ("Perceptron", "Decision Tree", "Naive Bayes", "k-NN", "MLP")
#: features of the sample-level attack (Table 2), and with the model score (Table 3)
FEATURES = ("bleu", "top1_accuracy")
MODEL_SCORE_FEATURES = ("bleu", "top1_accuracy", "energy")
N_BOOTSTRAP = 1000
ACCURACY_COLUMNS = ["classifier", "evaluation", "accuracy", "ci_low", "ci_high", "n", "n_groups"]


def make_classifier(name: str, seed: int):
    """An unfitted scikit-learn pipeline (StandardScaler, then the classifier `name`)."""
    from sklearn.linear_model import Perceptron
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    seed = int(seed)
    models = {
        "Perceptron": lambda: Perceptron(random_state=seed),
        "Decision Tree": lambda: DecisionTreeClassifier(random_state=seed),
        "Naive Bayes": lambda: GaussianNB(),
        "k-NN": lambda: KNeighborsClassifier(n_neighbors=5),
        "MLP": lambda: MLPClassifier(hidden_layer_sizes=(100,), max_iter=500, random_state=seed),
    }
    if name not in models:
        raise UserError(f"unknown classifier {name!r} (use one of {', '.join(CLASSIFIERS)})")
    return make_pipeline(StandardScaler(), models[name]())


def _matrix(frame: pd.DataFrame, features: Sequence[str], where: str) -> np.ndarray:
    require_columns(frame, list(features), where)
    x = frame[list(features)].to_numpy(dtype=float)
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise UserError(f"{where}: row {int(np.flatnonzero(bad)[0]) + 1} has a feature that is not a finite number")
    return x


def fit_classifiers(
    train: pd.DataFrame,
    features: Sequence[str],
    seed: int,
    names: Sequence[str] = CLASSIFIERS,
    label: str = "member",
) -> dict:
    """The classifiers `names`, fitted on the rows of `train` (features -> `label`)."""
    x = _matrix(train, features, "classifier training set")
    require_columns(train, [label], "classifier training set")
    y = train[label].astype(bool).to_numpy()
    if len(np.unique(y)) < 2:
        raise UserError(f"classifier training set: {len(y)} rows, all of one class; need members and non-members")
    fitted = {}
    for name in names:
        model = make_classifier(name, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MLP convergence warnings on tiny or separable data
            model.fit(x, y)
        fitted[name] = model
    return fitted


def predict(classifiers: dict, frame: pd.DataFrame, features: Sequence[str]) -> pd.DataFrame:
    """Predicted membership (True: "in") of every row, one bool column per classifier."""
    if len(frame) == 0:
        return pd.DataFrame({name: pd.Series(dtype=bool) for name in classifiers})
    x = _matrix(frame, features, "evaluation set")
    return pd.DataFrame({name: model.predict(x).astype(bool) for name, model in classifiers.items()})


def accuracy_table(
    classifiers: dict,
    sets: dict[str, pd.DataFrame],
    features: Sequence[str],
    seed: int,
    n_bootstrap: int = N_BOOTSTRAP,
    label: str = "member",
    group: str = "group_id",
) -> pd.DataFrame:
    """Accuracy of every classifier on every evaluation set (name -> rows with the features,
    `label` and `group`), with its group-bootstrap interval: columns `ACCURACY_COLUMNS`, one
    row per (classifier, set), classifiers in the given order. An empty set gives NaN."""
    rows = []
    for name, frame in sets.items():
        if len(frame):
            require_columns(frame, [label, group], f"evaluation set {name}")
        pred = predict(classifiers, frame, features)
        truth = frame[label].astype(bool).to_numpy() if len(frame) else np.zeros(0, dtype=bool)
        correct = (
            np.column_stack([pred[c].to_numpy() == truth for c in classifiers])
            if len(frame)
            else np.zeros((0, len(classifiers)))
        )
        groups = frame[group].astype(str).tolist() if len(frame) else []
        point, low, high = group_bootstrap(correct, groups, truth, seed, n_bootstrap, stratum=name)
        for c, cls in enumerate(classifiers):
            rows.append(
                {
                    "classifier": cls,
                    "evaluation": name,
                    "accuracy": float(point[c]),
                    "ci_low": float(low[c]),
                    "ci_high": float(high[c]),
                    "n": int(len(frame)),
                    "n_groups": int(len(set(groups))),
                }
            )
    out = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    order = {c: i for i, c in enumerate(classifiers)}
    return out.sort_values("classifier", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
