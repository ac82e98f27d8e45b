"""The blind baseline: a text classifier that separates members from non-members without the model."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.table import sample_feature
from mlmia.core.errors import UserError

FEATURE = "blind_member_probability"
DEFAULT_FOLDS = 5


def _classifier():
    """TF-IDF of word unigrams and bigrams (lower-cased, sublinear tf), then an L2 logistic
    regression with balanced class weights (so that 0.5 means no evidence either way)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000),
    )


def _fit(texts: np.ndarray, member: np.ndarray, where: str):
    try:
        return _classifier().fit(list(texts), member)
    except ValueError as exc:  # e.g. no word of two or more characters in any text
        raise UserError(f"sample feature {FEATURE}: {where}: cannot fit the text classifier ({exc})") from None


def _folds(settings: dict) -> int:
    """The fold count: the settings' ``attacks.blind.folds`` (the config section the attack-table
    build passes on), else `DEFAULT_FOLDS`."""
    value = ((settings.get("attacks") or {}).get(Blind.name) or {}).get("folds", DEFAULT_FOLDS)
    try:
        folds = int(value)
    except (TypeError, ValueError):
        folds = 0
    if folds < 2 or folds != value:
        raise UserError(f"config key attacks.{Blind.name}.folds: an integer >= 2 is needed, got {value!r}")
    return folds


@sample_feature(FEATURE)
def blind_member_probability(selected: pd.DataFrame, settings: dict) -> np.ndarray:
    """P(member | text) from a bag-of-words classifier (`_classifier`) fitted on the texts of the
    selected member rows against the selected non-member rows, cross-fitted by patient.

    Member and non-member rows are split into folds by `group_id` (scikit-learn
    `StratifiedGroupKFold`: a GroupKFold, no patient in two folds, that also keeps each
    fold's member share near the whole's; groups shuffled with the settings' ``seed``, the
    config's metrics.seed); each is scored by the classifier fitted on the other folds, so that no row
    is scored by a model that saw its patient. ``member_heldin`` and ``population`` rows
    are scored by the classifier fitted on every member and non-member row. Folds: the
    settings' ``attacks.blind.folds`` (default 5), at most the number of patients. Nothing
    of the text is printed or logged."""
    from sklearn.model_selection import StratifiedGroupKFold

    folds = _folds(settings)
    seed = int(settings["seed"])
    role = selected["role"].astype(str).to_numpy()
    texts = selected["text"].astype(str).to_numpy(dtype=object)
    groups = selected["group_id"].astype(str).to_numpy()
    labelled = np.flatnonzero(np.isin(role, ["member", "nonmember"]))
    member = role[labelled] == "member"
    if member.all() or not member.any():
        raise UserError(f"sample feature {FEATURE}: needs member and nonmember rows")
    n_splits = min(folds, len(np.unique(groups[labelled])))
    out = np.full(len(selected), np.nan)
    splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed % 2**32)
    with warnings.catch_warnings():  # fewer rows of a class than folds: fine, the check below guards
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        splits = list(splitter.split(labelled, member, groups[labelled]))
    for j, (train, test) in enumerate(splits):
        if member[train].all() or not member[train].any():
            raise UserError(
                f"sample feature {FEATURE}: fold {j} leaves only one class to train on "
                f"(too few patients of a role for {n_splits} folds)"
            )
        model = _fit(texts[labelled[train]], member[train], f"fold {j}")
        out[labelled[test]] = model.predict_proba(list(texts[labelled[test]]))[:, 1]
    rest = np.flatnonzero(~np.isin(role, ["member", "nonmember"]))
    if rest.size:
        model = _fit(texts[labelled], member, "all member and nonmember rows")
        out[rest] = model.predict_proba(list(texts[rest]))[:, 1]
    return out


class Blind(Attack):
    """P(member | text) from a classifier that never sees the target model: the sample feature
    ``blind_member_probability`` (`blind_member_probability`).

    Das, Zhang and Tramèr, "Blind Baselines Beat Membership Inference Attacks for Foundation
    Models", arXiv 2406.16201 (2024): when members and non-members are drawn from different
    distributions (other years, sources, templates), a bag-of-words classifier of the text
    alone separates them, often better than attacks on the model. Here: TF-IDF of word
    unigrams and bigrams with logistic regression, member rows against non-member rows of
    the experiment, cross-fitted by patient so no sample is scored by a model trained on its
    patient. Its AUC measures how much of any attack's AUC the distribution shift between
    the two sets can explain; near 0.5 means the sets are not told apart by their words.
    Parameter `folds` (default 5) is read when the attack table is built, from the settings'
    ``attacks.blind.folds``. Higher means "member"."""

    name = "blind"
    label = "blind (bag of words)"
    inputs = {"sample": (FEATURE,)}
    lower_is_member = False
    aggregates = True
    parameters = {"folds": DEFAULT_FOLDS}

    def check_params(self) -> None:
        _folds({"attacks": {self.name: self.params}})

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return table[f"sample_{FEATURE}"].to_numpy(dtype=float)
