"""Attack metrics against scikit-learn and hand computations on random data."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_score, recall_score, roc_auc_score, roc_curve

from mlmia.errors import UserError
from mlmia.metrics import (
    MetricSettings,
    attack_metrics,
    population_threshold,
    published_threshold,
    roc_points,
    split_roles,
    tpr_at_fpr,
)


def random_attack_table(rng, n_members=300, n_nonmembers=120, n_heldin=80, n_population=150, shift=0.8):
    frames = []
    for role, n, offset in (
        ("member", n_members, -shift),
        ("member_heldin", n_heldin, -shift),
        ("nonmember", n_nonmembers, 0.0),
        ("population", n_population, 0.0),
    ):
        reference = rng.normal(3.0, 1.0, n)
        target = reference + rng.normal(offset, 0.7, n)
        frames.append(
            pd.DataFrame(
                {
                    "sample_id": [f"{role}{i}" for i in range(n)],
                    "group_id": [f"{role}-p{i // 3}" for i in range(n)],
                    "role": role,
                    "target": target,
                    "reference": reference,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def value(metrics, metric, method, protocol, alpha=None, fpr=None):
    m = metrics[(metrics.metric == metric) & (metrics.method == method) & (metrics.protocol == protocol)]
    if alpha is not None:
        m = m[np.isclose(m.alpha, alpha)]
    if fpr is not None:
        m = m[np.isclose(m.fpr, fpr)]
    assert len(m) == 1
    return m.iloc[0]


def test_single_draw_matches_sklearn_when_no_subsampling_needed():
    # With as many non-members as members, every draw takes all members: the averaged
    # metrics equal scikit-learn on the full sets (matched pairs, corrected protocol).
    rng = np.random.default_rng(0)
    table = random_attack_table(rng, n_members=100, n_nonmembers=100)
    metrics = attack_metrics(table, MetricSettings(protocols=("corrected",), alphas=(0.1,), bootstrap=0, draws=3))
    members = table[table.role == "member"]
    nonmembers = table[table.role == "nonmember"]
    population = table[table.role == "population"]
    y = np.r_[np.ones(100), np.zeros(100)]
    loss = np.r_[members.target, nonmembers.target]
    stat = np.r_[members.target - members.reference, nonmembers.target - nonmembers.reference]
    assert value(metrics, "auc", "loss", "corrected").value == pytest.approx(roc_auc_score(y, -loss))
    assert value(metrics, "auc", "lr", "corrected").value == pytest.approx(roc_auc_score(y, -stat))
    # threshold: 10% quantile of the population's statistic
    pop_stat = np.sort((population.target - population.reference).to_numpy())
    t = pop_stat[int(0.1 * len(pop_stat))]
    predicted = stat < t
    assert value(metrics, "precision", "lr_pop", "corrected", alpha=0.1).value == pytest.approx(100 * precision_score(y, predicted))
    assert value(metrics, "recall", "lr_pop", "corrected", alpha=0.1).value == pytest.approx(100 * recall_score(y, predicted))
    mu = table[table.role == "member_heldin"].target.mean()
    assert value(metrics, "recall", "loss_mu", "corrected", alpha=0.1).value == pytest.approx(100 * np.mean(members.target < mu))
    fpr, tpr, _ = roc_curve(y, -stat)
    assert value(metrics, "tpr_at_fpr", "lr", "corrected", fpr=0.1).value == pytest.approx(100 * tpr[fpr <= 0.1].max())


def test_thresholds_by_hand():
    scores = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 0.0, 9.0, 8.0, 7.0, 6.0])
    # at most 20% of the population strictly below: the 3rd smallest value (2.0)
    assert population_threshold(scores, 0.2) == 2.0
    assert np.mean(scores < population_threshold(scores, 0.2)) <= 0.2
    # the authors' rule: descending order [9, 8, ..., 0], element int(10 * 0.7) + 1 = 8 -> 1.0
    assert published_threshold(scores, 0.3) == 1.0
    assert published_threshold(scores, 0.2) == 0.0  # element int(8.0) + 1 = 9
    assert published_threshold(scores, 0.0) == 0.0  # index clipped to the last element


def test_tpr_at_fpr_by_hand():
    y = np.array([1, 1, 1, 0, 0, 0, 0])
    score = np.array([0.9, 0.8, 0.1, 0.85, 0.3, 0.2, 0.05])  # higher = member
    assert tpr_at_fpr(y, score, 0.0) == pytest.approx(1 / 3)
    assert tpr_at_fpr(y, score, 0.25) == pytest.approx(2 / 3)
    assert tpr_at_fpr(y, score, 0.75) == pytest.approx(1.0)


def test_published_protocol_uses_unmatched_draws_and_is_reproducible():
    rng = np.random.default_rng(1)
    table = random_attack_table(rng)
    settings = MetricSettings(protocols=("published", "corrected"), alphas=(0.1,), bootstrap=0)
    first = attack_metrics(table, settings)
    second = attack_metrics(table, settings)
    pd.testing.assert_frame_equal(first, second)
    # unmatched pairs destroy the member correlation between target and reference: the
    # published LR AUC is lower than the matched one on correlated data.
    assert value(first, "auc", "lr", "published").value < value(first, "auc", "lr", "corrected").value - 0.02
    # the loss AUC does not involve the pairing
    assert value(first, "auc", "loss", "published").value == pytest.approx(value(first, "auc", "loss", "corrected").value, abs=0.03)


def test_bootstrap_interval_brackets_point_estimate():
    rng = np.random.default_rng(2)
    table = random_attack_table(rng)
    metrics = attack_metrics(table, MetricSettings(protocols=("corrected",), alphas=(0.1,), bootstrap=60))
    auc = value(metrics, "auc", "lr", "corrected")
    assert auc.ci_low < auc.value < auc.ci_high
    assert auc.ci_high - auc.ci_low < 0.2


def test_patient_level_averages_a_patients_samples():
    rng = np.random.default_rng(3)
    table = random_attack_table(rng)
    roles = split_roles(table, "patient")
    members = table[table.role == "member"]
    expected = members.groupby("group_id", sort=False)[["target", "reference"]].mean()
    assert len(roles["member"]) == len(expected) == 100
    np.testing.assert_allclose(roles["member"].stat, (expected.target - expected.reference).to_numpy())
    metrics = attack_metrics(table, MetricSettings(protocols=("corrected",), alphas=(0.1,), bootstrap=0, level="patient"))
    assert set(metrics.level) == {"patient"}
    # averaging three samples per patient sharpens the separation
    sample = attack_metrics(table, MetricSettings(protocols=("corrected",), alphas=(0.1,), bootstrap=0))
    assert value(metrics, "auc", "lr", "corrected").value > value(sample, "auc", "lr", "corrected").value


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.assign(target=t.target.where(t.index != 5, np.nan)), "NaN or inf"),
        (lambda t: t.assign(reference=t.reference.where(t.index != 7, np.inf)), "NaN or inf"),
        (lambda t: t[t.role != "population"], "role 'population' has no samples"),
    ],
)
def test_bad_attack_tables_give_one_line(mutate, message):
    table = mutate(random_attack_table(np.random.default_rng(4)))
    with pytest.raises(UserError, match=message) as info:
        attack_metrics(table, MetricSettings(bootstrap=0))
    assert "\n" not in str(info.value)


def test_roc_points_are_monotone_and_end_at_one():
    roc = roc_points(random_attack_table(np.random.default_rng(5)))
    for _, curve in roc.groupby("method"):
        assert np.all(np.diff(curve.fpr) >= 0) and np.all(np.diff(curve.tpr) >= 0)
        assert curve.fpr.iloc[-1] == 1.0 and curve.tpr.iloc[-1] == 1.0
