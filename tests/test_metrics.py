"""Attack metrics against scikit-learn, hand computations and the patient bootstrap's promises."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_score, recall_score, roc_auc_score, roc_curve

from mlmia.attacks import Attack, get_attack, register
from mlmia.attacks.protocols import MetricSettings, attack_metrics, attack_units, point_estimates, roc_points
from mlmia.core.errors import UserError
from mlmia.metrics.bootstrap import PatientResampler, multiplicities
from mlmia.metrics.classification import (
    auc,
    nonmembers_to_resolve,
    population_threshold,
    precision_recall,
    published_threshold,
    resolvable,
    roc,
    tpr_at_fpr,
)
from mlmia.metrics.intervals import patients_to_separate

ATTACKS = ("likelihood_ratio", "loss")


def settings(**changes):
    base = dict(
        protocols=("corrected",), attacks=ATTACKS, alphas=(0.1,), thresholds=("heldin_mean", "population"),
        fprs=(0.01, 0.1), draws=3, seed=2, bootstrap=0, level="sample",
    )  # fmt: skip
    return MetricSettings(**{**base, **changes})


def random_attack_table(rng, n_members=300, n_nonmembers=120, n_heldin=80, n_population=150, shift=0.8, per_patient=3):
    frames = []
    for role, n, offset, source in (
        ("member", n_members, -shift, "a"),
        ("member_heldin", n_heldin, -shift, "a"),
        ("nonmember", n_nonmembers, 0.0, "a"),
        ("population", n_population, 0.0, "b"),
    ):
        reference = rng.normal(3.0, 1.0, n)
        target = reference + rng.normal(offset, 0.7, n)
        frames.append(
            pd.DataFrame(
                {
                    "sample_id": [f"{role}{i}" for i in range(n)],
                    "group_id": [f"{role}-p{i // per_patient}" for i in range(n)],
                    "role": role,
                    "source": source,
                    "target_energy": target,
                    "reference_energy": reference,
                }
            )  # fmt: skip
        )
    return pd.concat(frames, ignore_index=True)


def value(metrics, metric, attack, protocol="corrected", threshold=None, alpha=None, fpr=None):
    m = point_estimates(metrics)
    m = m[(m.metric == metric) & (m.attack == attack) & (m.protocol == protocol)]
    if threshold is not None:
        m = m[(m.threshold == threshold) & np.isclose(m.alpha, alpha)]
    if fpr is not None:
        m = m[np.isclose(m.fpr, fpr)]
    assert len(m) == 1
    return m.iloc[0]


# ------------------------------------------------------------------ pure functions


def test_roc_and_auc_equal_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    score = np.round(rng.normal(y * 0.7, 1.0), 1)  # rounding makes many ties
    fpr, tpr = roc(y, score)
    sk_fpr, sk_tpr, _ = roc_curve(y, score, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr[sk_fpr.size - fpr.size :] if sk_fpr.size > fpr.size else sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr[sk_tpr.size - tpr.size :] if sk_tpr.size > tpr.size else sk_tpr)
    assert auc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)


def test_auc_by_hand():
    # members 3, 2 (tie with a non-member), non-members 2, 1: pairs (3>2, 3>1, 2=2 -> 1/2, 2>1) = 3.5 / 4
    assert auc(np.array([1, 1, 0, 0]), np.array([3.0, 2.0, 2.0, 1.0])) == pytest.approx(0.875)


def test_tpr_at_fpr_by_hand_and_not_resolvable():
    y = np.array([1, 1, 1, 0, 0, 0, 0])
    score = np.array([0.9, 0.8, 0.1, 0.85, 0.3, 0.2, 0.05])  # higher = member
    assert tpr_at_fpr(y, score, 0.25) == pytest.approx(2 / 3)  # one non-member (0.85) let through
    assert tpr_at_fpr(y, score, 0.75) == pytest.approx(1.0)
    # 4 non-members: an FPR of 0.2 allows no false positive at all, so it says nothing about 0.2
    assert not resolvable(0.2, 4) and resolvable(0.25, 4)
    assert np.isnan(tpr_at_fpr(y, score, 0.2))
    fpr, tpr, _ = roc_curve(y, score)
    assert tpr_at_fpr(y, score, 0.5) == pytest.approx(tpr[fpr <= 0.5].max())


def test_the_patients_that_would_tell_an_auc_from_chance_by_hand():
    # what an audit card says would resolve an AUC whose interval holds 0.5 (docs/audit_cards.md)
    # n (half-width / |AUC - 0.5|)^2, rounded up: half-width 0.25, distance 0.125: 20 x 2^2
    assert patients_to_separate(0.625, (0.375, 0.875), 20) == 80
    assert patients_to_separate(0.4375, (0.25, 0.75), 10) == 160  # below chance alike: 10 x 4^2
    assert patients_to_separate(0.6, (0.4, 0.9), 18) == 113  # 18 x 2.5^2 = 112.5, rounded up
    assert patients_to_separate(0.7, (0.6, 0.8), 40) == 10  # an interval that excludes 0.5 already: fewer
    assert patients_to_separate(0.3, (0.1, 0.5), 25, null=0.2) == 100
    assert patients_to_separate(0.5, (0.3, 0.7), 18) is None  # at chance: no number of patients
    for bad in ((1.2, (0.1, 0.3), 0), (0.6, (0.7, 0.4), 10), (float("nan"), (0.4, 0.8), 10),
                (0.6, (0.4, float("inf")), 10), (0.6, (0.4, 0.8), 2.5), (0.6, (0.4, 0.8), True),
                (0.6, (0.4, None), 10), ("0.6", (0.4, 0.8), -3)):  # fmt: skip
        with pytest.raises(ValueError):
            patients_to_separate(*bad)


def test_the_nonmembers_that_would_resolve_a_tpr_by_hand():
    # ... and a TPR at an FPR below 1 / non-members
    assert [nonmembers_to_resolve(f) for f in (0.01, 0.001, 0.003, 0.25, 1)] == [100, 1000, 334, 4, 1]
    for fpr in np.r_[np.logspace(-5, 0, 200), 0.1, 0.2, 0.3]:  # the inverse of `resolvable`, its float slack too
        needed = nonmembers_to_resolve(float(fpr))
        assert resolvable(fpr, needed) and not resolvable(fpr, needed - 1), fpr
    for bad in (0, -0.1, 1.5, float("nan"), True, "0.1", None):
        with pytest.raises(ValueError):
            nonmembers_to_resolve(bad)


def test_thresholds_by_hand():
    # member scores (higher = member); at most 20% of the population strictly above t
    scores = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 0.0, 9.0, 8.0, 7.0, 6.0])
    assert population_threshold(scores, 0.2) == 7.0  # 9 and 8 above it: 2 of 10
    assert np.mean(scores > population_threshold(scores, 0.2)) <= 0.2
    # the authors' rule on the statistic (= -score): descending [0, -1, ..., -9], element int(10 * 0.7) + 1 = 8
    # is -8, i.e. a member-score threshold of 8
    assert published_threshold(scores, 0.3) == 8.0
    assert published_threshold(scores, 0.2) == 9.0  # element int(8.0) + 1 = 9 -> -9
    assert published_threshold(scores, 0.0) == 9.0  # index clipped to the last element


# ------------------------------------------------------------------ the protocols


def test_single_draw_matches_sklearn_when_no_subsampling_needed():
    # With as many non-members as members, every draw takes all members: the averaged
    # metrics equal scikit-learn on the full sets (matched pairs, corrected protocol).
    rng = np.random.default_rng(0)
    table = random_attack_table(rng, n_members=100, n_nonmembers=100)
    metrics = attack_metrics(table, settings())
    members, nonmembers = table[table.role == "member"], table[table.role == "nonmember"]
    population = table[table.role == "population"]
    y = np.r_[np.ones(100), np.zeros(100)]
    loss = np.r_[members.target_energy, nonmembers.target_energy]
    stat = loss - np.r_[members.reference_energy, nonmembers.reference_energy]
    assert value(metrics, "auc", "loss").value == pytest.approx(roc_auc_score(y, -loss))
    assert value(metrics, "auc", "likelihood_ratio").value == pytest.approx(roc_auc_score(y, -stat))
    # the paper's threshold: the 10% quantile of the population's statistic
    pop_stat = np.sort((population.target_energy - population.reference_energy).to_numpy())
    predicted = stat < pop_stat[int(0.1 * len(pop_stat))]
    cell = dict(threshold="population", alpha=0.1)
    assert value(metrics, "precision", "likelihood_ratio", **cell).value == pytest.approx(
        100 * precision_score(y, predicted)
    )
    assert value(metrics, "recall", "likelihood_ratio", **cell).value == pytest.approx(100 * recall_score(y, predicted))
    mu = table[table.role == "member_heldin"].target_energy.mean()
    recall_mu = value(metrics, "recall", "loss", threshold="heldin_mean", alpha=0.1).value
    assert recall_mu == pytest.approx(100 * np.mean(members.target_energy < mu))
    fpr, tpr, _ = roc_curve(y, -stat)
    assert value(metrics, "tpr_at_fpr", "likelihood_ratio", fpr=0.1).value == pytest.approx(100 * tpr[fpr <= 0.1].max())
    # 100 non-members resolve an FPR of 1% but not of 0.1%
    low = attack_metrics(table, settings(fprs=(0.001,)))
    cell = value(low, "tpr_at_fpr", "likelihood_ratio", fpr=0.001)
    assert np.isnan(cell.value) and not cell.resolvable


def test_published_protocol_uses_unmatched_draws_and_is_reproducible():
    table = random_attack_table(np.random.default_rng(1))
    both = settings(protocols=("published", "corrected"), draws=10)
    first, second = attack_metrics(table, both), attack_metrics(table, both)
    pd.testing.assert_frame_equal(first, second)
    # unmatched pairs destroy the member correlation between target and reference: the
    # published LR AUC is lower than the matched one on correlated data
    assert (
        value(first, "auc", "likelihood_ratio", "published").value
        < value(first, "auc", "likelihood_ratio").value - 0.02
    )
    # the loss AUC does not involve the pairing
    assert value(first, "auc", "loss", "published").value == pytest.approx(value(first, "auc", "loss").value, abs=0.03)


def test_patient_level_averages_a_patients_samples():
    table = random_attack_table(np.random.default_rng(3))
    lr = get_attack("likelihood_ratio")
    units = attack_units(table, [lr], "patient")
    members = table[table.role == "member"].assign(stat=lambda t: t.target_energy - t.reference_energy)
    expected = members.groupby("group_id", sort=False)["stat"].mean()
    is_member = (units.frame.role == "member").to_numpy()
    assert is_member.sum() == len(expected) == 100
    np.testing.assert_allclose(-units.scores["likelihood_ratio"][is_member], expected.to_numpy())
    patient = attack_metrics(table, settings(level="patient"))
    assert set(patient.level) == {"patient"}
    # averaging three samples per patient sharpens the separation
    assert (
        value(patient, "auc", "likelihood_ratio").value
        > value(attack_metrics(table, settings()), "auc", "likelihood_ratio").value
    )


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda t: t.assign(target_energy=t.target_energy.where(t.index != 5, np.nan)),
            "target_energy is not a finite",
        ),
        (lambda t: t.assign(reference_energy=t.reference_energy.where(t.index != 7, np.inf)), "not a finite number"),
        (lambda t: t[t.role != "population"], "role 'population' has no samples"),
        (lambda t: t.drop(columns="reference_energy"), "lacks column\\(s\\) reference_energy"),
    ],
)
def test_bad_attack_tables_give_one_line(mutate, message):
    table = mutate(random_attack_table(np.random.default_rng(4)))
    with pytest.raises(UserError, match=message) as info:
        attack_metrics(table, settings())
    assert "\n" not in str(info.value)


def test_roles_a_table_does_not_use_are_optional():
    table = random_attack_table(np.random.default_rng(4))
    no_heldin = table[table.role != "member_heldin"]
    metrics = attack_metrics(no_heldin, settings(thresholds=("population",)))
    assert set(metrics.threshold.dropna()) == {"population"}


def test_roc_points_are_monotone_and_end_at_one():
    roc_table = roc_points(random_attack_table(np.random.default_rng(5)), list(ATTACKS))
    for _, curve in roc_table.groupby("attack"):
        assert np.all(np.diff(curve.fpr) >= 0) and np.all(np.diff(curve.tpr) >= 0)
        assert curve.fpr.iloc[-1] == 1.0 and curve.tpr.iloc[-1] == 1.0


# ------------------------------------------------------------------ the patient bootstrap


def test_a_drawn_patient_brings_all_its_samples_and_strata_keep_their_size():
    groups = np.array(["p1", "p1", "p2", "p3", "p3", "p3", "q1", "q2"])
    strata = [("member", "a")] * 6 + [("nonmember", "a")] * 2
    resampler = PatientResampler(strata, groups, seed=5)
    for b in range(20):
        rows = resampler.rows(b)
        counts = pd.Series(rows).value_counts().reindex(range(8), fill_value=0).to_numpy()
        # rows of one patient are drawn equally often
        assert counts[0] == counts[1] and counts[3] == counts[4] == counts[5]
        # as many patients per stratum as the data has: 3 member and 2 non-member patients
        assert counts[0] + counts[2] + counts[3] == 3 and counts[6] + counts[7] == 2
        assert set(rows) <= set(range(8))


def test_replicates_draw_the_same_patients_in_every_experiment():
    # a second experiment holding a subset of the samples (say, the long ones) draws each of
    # its patients exactly as often as the first does in the same replicate: the pairing
    universe = {("member", "a"): ["p1", "p2", "p3"]}
    full = PatientResampler([("member", "a")] * 4, np.array(["p1", "p2", "p2", "p3"]), 9, universe)
    part = PatientResampler([("member", "a")] * 2, np.array(["p2", "p3"]), 9, universe)
    for b in range(10):
        drawn = multiplicities(3, 9, b, ("member", "a"))
        assert np.bincount(full.rows(b), minlength=4).tolist() == [drawn[0], drawn[1], drawn[1], drawn[2]]
        assert np.bincount(part.rows(b), minlength=2).tolist() == [drawn[1], drawn[2]]
        # the same draws as counts per row, in row order (for weighted statistics)
        assert full.weights(b).tolist() == [drawn[0], drawn[1], drawn[1], drawn[2]]
        assert part.weights(b).tolist() == [drawn[1], drawn[2]]


def test_a_replicate_that_draws_no_threshold_patient_is_left_out_and_the_others_keep_their_numbers():
    # The population holds samples of one of the universe's 5 patients (as a short-sample
    # experiment does when most population patients have only long samples): a replicate
    # that draws none has no threshold, hence no estimate; before, it raised (the metrics
    # job failed) or, for an empty member or non-member stratum, the later replicates were
    # renumbered, pairing them with other replicates of every other experiment.
    table = random_attack_table(np.random.default_rng(4), n_members=12, n_nonmembers=12, n_heldin=6,
                                n_population=1, per_patient=1)  # fmt: skip
    universe = {(r, s): sorted(table[(table.role == r) & (table.source == s)].group_id) for r, s in
                table[["role", "source"]].drop_duplicates().itertuples(index=False)}  # fmt: skip
    universe[("population", "b")] = ["population-p0", "x1", "x2", "x3", "x4"]
    m = attack_metrics(table, settings(bootstrap=40), universe=universe)
    # by hand: replicate b has an estimate when it draws population-p0 (first of 5) at least once
    expected = [b for b in range(40) if multiplicities(5, 2, b, ("population", "b"))[0] > 0]
    assert 0 < len(expected) < 40  # the case occurs, and not in every replicate
    kept = m.dropna(subset=["replicate"])
    assert sorted(set(kept.replicate.astype(int))) == expected
    # the kept replicates equal the same replicates of the whole table (population from 1 patient
    # in every draw): the numbers pair the same resamples
    everyone = attack_metrics(
        table, settings(bootstrap=40), universe={**universe, ("population", "b"): ["population-p0"]}
    )
    whole = everyone.dropna(subset=["replicate"]).set_index(["replicate", "metric", "attack", "threshold", "fpr"])
    ours = kept.set_index(["replicate", "metric", "attack", "threshold", "fpr"])
    auc = ours.xs("auc", level="metric").value
    assert np.allclose(auc, whole.xs("auc", level="metric").value.loc[auc.index])


def copies_table(copies, n_members=30, n_nonmembers=30, seed=0):
    """Every patient's samples are `copies` identical copies of one sample."""
    rng = np.random.default_rng(seed)
    frames = []
    for role, n, offset, source in (("member", n_members, -0.6, "a"), ("nonmember", n_nonmembers, 0.0, "a"),
                                    ("population", 40, 0.0, "b"), ("member_heldin", 10, -0.6, "a")):  # fmt: skip
        target = rng.normal(offset, 1.0, n)
        frames.append(pd.DataFrame({
            "sample_id": [f"{role}{i}-{c}" for i in range(n) for c in range(copies)],
            "group_id": np.repeat([f"{role}{i}" for i in range(n)], copies), "role": role, "source": source,
            "target_energy": np.repeat(target, copies), "reference_energy": 0.0,
        }))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def auc_interval(table, draws=5):
    m = attack_metrics(table, settings(attacks=("loss",), thresholds=(), alphas=(), bootstrap=300, draws=draws))
    cell = value(m, "auc", "loss")
    return cell.ci_low, cell.ci_high


def test_identical_copies_do_not_shrink_the_interval():
    # As many member as non-member patients: no member subsampling, so copies change nothing
    # but the number of rows: a patient bootstrap gives the very same interval. (A bootstrap
    # of samples would narrow it by about sqrt(8).)
    one, eight = auc_interval(copies_table(1)), auc_interval(copies_table(8))
    assert one == pytest.approx(eight, abs=1e-12)
    assert one[1] - one[0] > 0.1
    # With more member patients than non-member patients, members are subsampled in every
    # replicate: the interval stays as wide (up to the draws' own noise)
    one = auc_interval(copies_table(1, n_members=60))
    eight = auc_interval(copies_table(8, n_members=60))
    assert (eight[1] - eight[0]) > 0.85 * (one[1] - one[0])


def test_paired_replicates_separate_what_marginal_intervals_cannot():
    # attack "shifted" is the loss plus a small member-only gain: on its own its interval
    # overlaps the loss's, but on the same resamples it is above it in nearly every replicate
    table = random_attack_table(np.random.default_rng(8), n_members=120, n_nonmembers=120, shift=0.3)
    table.loc[table.role.isin(["member", "member_heldin"]), "reference_energy"] = 0.15
    table.loc[~table.role.isin(["member", "member_heldin"]), "reference_energy"] = 0.0

    class Shifted(Attack):
        name = "shifted_loss_for_test"
        label = "shifted loss"
        inputs = {"target": ("energy",), "reference": ("energy",)}

        def statistic(self, t):
            return t["target_energy"].to_numpy() - t["reference_energy"].to_numpy()

    register(Shifted)
    m = attack_metrics(
        table, settings(attacks=("loss", "shifted_loss_for_test"), thresholds=(), alphas=(), bootstrap=200)
    )
    a, b = value(m, "auc", "shifted_loss_for_test"), value(m, "auc", "loss")
    assert a.ci_low < b.ci_high  # the marginal intervals overlap
    reps = m.dropna(subset=["replicate"])
    reps = reps[reps.metric == "auc"].pivot(index="replicate", columns="attack", values="value")
    difference = reps["shifted_loss_for_test"] - reps["loss"]
    assert np.percentile(difference, 2.5) > 0  # the paired interval excludes 0


def test_the_registry_refuses_duplicates_and_unknown_names():
    with pytest.raises(UserError, match="unknown attack 'no_such'"):
        get_attack("no_such")

    class Again(Attack):
        name = "loss"

        def statistic(self, t):
            return t["target_energy"].to_numpy()

    with pytest.raises(UserError, match="attack 'loss' is defined twice"):
        register(Again)

    class Nameless(Attack):
        pass

    with pytest.raises(UserError, match="needs a `name`"):
        register(Nameless)


@pytest.mark.parametrize(
    "labels, scores, message",
    [
        ([1, 0, 1], [0.1, 0.2], "inconsistent numbers of samples: 3 labels and 2 scores"),
        ([1, 0, 2], [0.1, 0.2, 0.3], "labels must be binary"),
        ([1, 0, 1], [0.1, np.nan, 0.3], "1 value.* not finite"),
        ([1, 0, 1], [0.1, np.inf, 0.3], "not finite"),
    ],
)
def test_metrics_check_their_inputs_as_scikit_learn_does(labels, scores, message):
    for metric in (auc, roc, lambda y, s: tpr_at_fpr(y, s, 0.5)):
        with pytest.raises(UserError, match=message) as info:
            metric(labels, scores)
        assert "\n" not in str(info.value)
    # the same inputs make scikit-learn refuse too
    with pytest.raises(ValueError):
        roc_auc_score(labels, scores)


def test_precision_recall_and_thresholds_refuse_what_they_cannot_rank():
    with pytest.raises(UserError, match="1 labels and 2 predictions"):
        precision_recall([1], [True, False])
    with pytest.raises(UserError, match="predictions must be binary"):
        precision_recall([1, 0], [0.5, 1])
    with pytest.raises(UserError, match="population scores hold 1 value"):
        population_threshold(np.array([0.1, np.nan, 0.3]), 0.1)
    with pytest.raises(UserError, match="non-member scores"):
        published_threshold(np.array([np.nan, 0.2]), 0.1)


def test_rows_an_attack_does_not_score_are_dropped_before_the_metrics():
    # "members_only" is defined on members and non-members only (NaN elsewhere), as LiRA online
    table = random_attack_table(np.random.default_rng(9), n_members=90, n_nonmembers=60)

    class MembersOnly(Attack):
        name = "members_only_for_test"
        label = "members only"
        inputs = {"target": ("energy",)}
        scored_roles = ("member", "nonmember")

        def statistic(self, t):
            out = t["target_energy"].to_numpy(dtype=float).copy()
            out[~t["role"].isin(("member", "nonmember")).to_numpy()] = np.nan
            return out

    class Undeclared(MembersOnly):
        name = "undeclared_nan_for_test"
        scored_roles = None

    register(MembersOnly)
    register(Undeclared)
    m = attack_metrics(table, settings(attacks=("loss", "members_only_for_test"), bootstrap=20))
    # its AUC is the loss's (the same statistic) on the same rows, draws and resamples
    mine, loss = value(m, "auc", "members_only_for_test"), value(m, "auc", "loss")
    assert mine.value == loss.value and (mine.ci_low, mine.ci_high) == (loss.ci_low, loss.ci_high)
    # no threshold on a role it does not score: no precision or recall at all for it
    assert not ((m.attack == "members_only_for_test") & m.metric.isin(["precision", "recall"])).any()
    assert ((m.attack == "loss") & (m.metric == "precision")).any()
    curves = roc_points(table, ["members_only_for_test", "loss"])
    assert list(dict.fromkeys(curves.attack)) == ["members_only_for_test", "loss"]
    # a NaN statistic on a row it claims to score is an error naming the attack and the row
    with pytest.raises(UserError, match="attack 'undeclared_nan_for_test': sample member_heldin0 .* not a finite"):
        attack_metrics(table, settings(attacks=("undeclared_nan_for_test",)))


def test_counts_per_role_come_with_the_metrics():
    table = random_attack_table(np.random.default_rng(6))  # 3 samples per patient
    m = point_estimates(attack_metrics(table, settings(level="patient")))
    counts = m[m.metric.isin(["n_samples", "n_patients"])].set_index(["metric", "role"]).value
    assert counts["n_samples", "member"] == 300 and counts["n_patients", "member"] == 100
    assert counts["n_samples", "population"] == 150 and counts["n_patients", "population"] == 50
