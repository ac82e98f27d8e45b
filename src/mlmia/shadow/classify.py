"""The attack classifiers, their scores, and their accuracy and AUC with a group bootstrap
(Hisamoto, Post and Duh, TACL 2020, Section 4 and Tables 2-3).

The paper trains five scikit-learn classifiers on Bob's labelled (sentence, shadow model)
pairs: Perceptron, Decision Tree (depth 5, the paper's), Naive Bayes, k-NN and a multi-layer
perceptron. The paper gives no other hyper-parameters; ours are scikit-learn's defaults
(GaussianNB for "Naive Bayes", k = 5 neighbours, one hidden layer of 100 units for the MLP with
at most 500 epochs), each behind a StandardScaler fitted on the training rows and seeded with
`seed` where the model has a seed. Features: the paper's, sentence BLEU and its 1-4-gram
precisions (`FEATURES`, Table 2), and with the model score of the model's own output
(`MODEL_SCORE_FEATURES`, Table 3).

Accuracy is the fraction of rows whose prediction equals the truth (`member`); the AUC ranks the
rows by the classifier's score (`scores`: `decision_function` where the classifier has one, the
Perceptron's, else the probability of "in" from `predict_proba`), threshold-free, so it tells a
classifier that ranks members first but is miscalibrated on Alice (its threshold off) from one
that has no signal. Their 95% intervals are percentile bootstraps over GROUPS (patients or
documents; `mlmia.metrics.intervals.group_resamples`): a drawn group brings all its rows. When no
group holds both members and non-members (Alice's probes: in- and out-probe documents are
disjoint), groups are drawn within each label, so every replicate keeps the in/out balance;
otherwise (Bob's pairs, where a document is in for one shadow model and out for the other of its
pair) all groups are drawn together. Every classifier and both measures are evaluated on the same
replicates (paired).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns
from mlmia.metrics.classification import weighted_auc
from mlmia.metrics.intervals import group_resamples, percentile_interval, row_weights

#: the paper's classifiers, in its order
CLASSIFIERS = ("Perceptron", "Decision Tree", "Naive Bayes", "k-NN", "MLP")
#: the depth of the paper's decision tree
TREE_DEPTH = 5
#: features of the sample-level attack (Table 2: sentence BLEU and its n-gram precisions), and
#: with the model score of the model's own output (Table 3)
FEATURES = ("bleu", "precision_1", "precision_2", "precision_3", "precision_4")
MODEL_SCORE_FEATURES = (*FEATURES, "model_score")
ACCURACY_COLUMNS = [
    "classifier", "evaluation", "accuracy", "ci_low", "ci_high", "auc", "auc_ci_low", "auc_ci_high", "n", "n_groups",
]  # fmt: skip


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
        "Decision Tree": lambda: DecisionTreeClassifier(max_depth=TREE_DEPTH, random_state=seed),
        "Naive Bayes": lambda: GaussianNB(),
        "k-NN": lambda: KNeighborsClassifier(n_neighbors=5),
        "MLP": lambda: MLPClassifier(hidden_layer_sizes=(100,), max_iter=500, random_state=seed),
    }
    if name not in models:
        raise UserError(f"unknown classifier {name!r} (use one of {', '.join(CLASSIFIERS)})")
    return make_pipeline(StandardScaler(), models[name]())


def feature_matrix(frame: pd.DataFrame, features: Sequence[str], where: str) -> np.ndarray:
    """The columns `features` of `frame` as floats; a missing column or a value that is not a
    finite number is a UserError naming the row."""
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
    x = feature_matrix(train, features, "classifier training set")
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


def _score(model, x: np.ndarray) -> tuple[np.ndarray, float]:
    """(score of "in", the score above which the model predicts "in"). A score that is not a finite
    number (naive Bayes trained on features without variance: a tiny world's identical outputs)
    carries no ranking: it is the cut, a tie, and the prediction "out", as `predict` gives."""
    if hasattr(model, "decision_function"):
        score, cut = np.asarray(model.decision_function(x), dtype=float), 0.0
    else:
        proba = model.predict_proba(x)
        score, cut = np.asarray(proba[:, list(model.classes_).index(True)], dtype=float), 0.5
    return np.where(np.isfinite(score), score, cut), cut


def predict_matrix(classifiers: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, scores), rows x classifiers, of a feature matrix: the score of "in"
    (`decision_function`, else `predict_proba`'s column of "in") and "in" where it is above the
    model's cut (0, else 0.5): what `predict` of these binary classifiers returns, from one call."""
    if len(x) == 0:
        return np.zeros((0, len(classifiers)), dtype=bool), np.zeros((0, len(classifiers)))
    scored = [_score(model, x) for model in classifiers.values()]
    score = np.column_stack([s for s, _ in scored])
    pred = np.column_stack([s > cut for s, cut in scored])
    return pred, score


def predict(classifiers: dict, frame: pd.DataFrame, features: Sequence[str]) -> pd.DataFrame:
    """Predicted membership (True: "in") of every row, one bool column per classifier."""
    x = feature_matrix(frame, features, "evaluation set") if len(frame) else np.zeros((0, len(features)))
    return pd.DataFrame(predict_matrix(classifiers, x)[0], columns=list(classifiers))


def scores(classifiers: dict, frame: pd.DataFrame, features: Sequence[str]) -> pd.DataFrame:
    """Each classifier's score of "in" for every row (higher: more likely in), one column each."""
    x = feature_matrix(frame, features, "evaluation set") if len(frame) else np.zeros((0, len(features)))
    return pd.DataFrame(predict_matrix(classifiers, x)[1], columns=list(classifiers))


def measure_rows(
    pred: np.ndarray,
    score: np.ndarray,
    truth: np.ndarray,
    groups: Sequence[str],
    seed: int,
    n_bootstrap: int,
    stratum: str,
) -> list[dict]:
    """Per classifier (a column of `pred` and `score`): accuracy and AUC with their percentile
    intervals over the same group resamples (`group_resamples`). An AUC where the rows hold one
    class only is NaN, and so is its interval."""
    truth = np.asarray(truth, dtype=bool)
    n_cls = pred.shape[1]
    if len(truth) == 0:
        return [dict.fromkeys(("accuracy", "ci_low", "ci_high", "auc", "auc_ci_low", "auc_ci_high"), np.nan)] * n_cls
    names, counts = group_resamples(groups, truth, seed, n_bootstrap, stratum)
    weights = row_weights(groups, names, counts)
    both = truth.any() and (~truth).any()
    out = []
    for c in range(n_cls):
        correct = (pred[:, c] == truth).astype(float)
        boot_acc = weights @ correct / weights.sum(axis=1) if len(weights) else np.zeros(0)
        low, high = percentile_interval(boot_acc)
        record = {"accuracy": float(correct.mean()), "ci_low": low, "ci_high": high}
        if both:
            auc_point = float(weighted_auc(truth, score[:, c], np.ones(len(truth)))[0])
            a_low, a_high = (
                percentile_interval(weighted_auc(truth, score[:, c], weights)) if len(weights) else (np.nan,) * 2
            )
        else:
            auc_point, a_low, a_high = np.nan, np.nan, np.nan
        record.update({"auc": auc_point, "auc_ci_low": a_low, "auc_ci_high": a_high})
        out.append(record)
    return out


def accuracy_table(
    classifiers: dict,
    sets: dict[str, pd.DataFrame],
    features: Sequence[str],
    seed: int,
    n_bootstrap: int,
    label: str = "member",
    group: str = "group_id",
) -> pd.DataFrame:
    """Accuracy and AUC of every classifier on every evaluation set (name -> rows with the
    features, `label` and `group`), each with its group-bootstrap interval: columns
    `ACCURACY_COLUMNS`, one row per (classifier, set), classifiers in the given order. An empty
    set gives NaN; a set of one class (all out: OOD probes) a NaN AUC."""
    rows = []
    for name, frame in sets.items():
        if len(frame):
            require_columns(frame, [label, group], f"evaluation set {name}")
            x = feature_matrix(frame, features, f"evaluation set {name}")
        else:
            x = np.zeros((0, len(features)))
        pred, score = predict_matrix(classifiers, x)
        truth = frame[label].astype(bool).to_numpy() if len(frame) else np.zeros(0, dtype=bool)
        groups = frame[group].astype(str).tolist() if len(frame) else []
        measured = measure_rows(pred, score, truth, groups, seed, n_bootstrap, name)
        for cls, record in zip(classifiers, measured):
            rows.append(
                {"classifier": cls, "evaluation": name, **record, "n": int(len(frame)), "n_groups": len(set(groups))}
            )
    out = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    order = {c: i for i, c in enumerate(classifiers)}
    return out.sort_values("classifier", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
