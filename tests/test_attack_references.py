"""The attacks with a public reference implementation against that definition, and RMIA's tuning.

Each reference definition below is written here from the paper and the implementation its
attack's docstring names (plain numpy and scipy, no helper of the library), computed on
fixed arrays and compared with the attack to 1e-9. RMIA's `a` is checked on constructed
cases whose best value is known, and never to read the audited target's labels."""

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from sklearn.metrics import roc_auc_score

from mlmia.attacks import get_attack
from mlmia.attacks.protocols import MetricSettings, attack_metrics, point_estimates

# ------------------------------------------------------------------ fixed arrays

M = 4  # reference models
#: each audited row is IN for two of the four references, in every arrangement
HALVES = [np.array(c) for c in itertools.product([True, False], repeat=M) if sum(c) == 2]


def reference_table(n_member=12, n_nonmember=12, n_population=10, seed=0):
    """An attack table as the workflow builds it: audited rows IN for half of the references,
    population rows OUT for all; energies around 2.5 nats, IN references lower."""
    rng = np.random.default_rng(seed)
    roles = ["member"] * n_member + ["nonmember"] * n_nonmember + ["population"] * n_population
    n = len(roles)
    inside = np.array(
        [HALVES[i % len(HALVES)] if r != "population" else np.zeros(M, bool) for i, r in enumerate(roles)]
    )
    base = rng.normal(2.5, 0.4, n)
    references = base[:, None] + rng.normal(0.0, 0.15, (n, M)) - 0.3 * inside
    member = np.array([r == "member" for r in roles])
    target = base + rng.normal(0.0, 0.15, n) - 0.3 * member
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)], "role": roles,
        "target_energy": target, "references_energy": [list(r) for r in references],
        "references_in": [list(f) for f in inside],
    })  # fmt: skip


def arrays(t):
    return (
        t["target_energy"].to_numpy(float),
        np.array(t["references_energy"].tolist(), float),
        np.array(t["references_in"].tolist(), bool),
        t["role"].to_numpy(),
    )


# ------------------------------------------------------------------ LiRA: the reference definitions


def lira_fit(target, references, inside, side, fix_variance):
    """The Gaussian of one side as tensorflow_privacy's `compute_score_lira` fits it
    (median_or_mean="mean"): per example, the statistics of the side's shadow models as an
    m x 1 array (one augmentation), their mean; the standard deviation per example
    (np.std, ddof 0) or, with fix_variance, of every example's values around its own mean."""
    stats = [references[i][inside[i] if side == "in" else ~inside[i]][:, None] for i in range(len(target))]
    mean = np.array([s.mean(axis=0) for s in stats])
    if fix_variance:
        std = np.std(np.concatenate([s - m[None] for s, m in zip(stats, mean)]))
    else:
        std = np.array([s.std(axis=0) for s in stats])
    return mean[:, 0], std if np.ndim(std) == 0 else std[:, 0]


@pytest.mark.parametrize("variance", ["global", "per_sample"])
def test_lira_offline_is_the_papers_one_sided_test(variance):
    """Carlini et al. 2022, offline LiRA: the p-value of the target's statistic under the OUT
    Gaussian, one-sided (here: how likely a model without the sample gives an energy this
    low, scipy.stats.norm.cdf); ours is the z-score, whose Phi is that p-value."""
    t = reference_table(n_population=0).drop(columns="role")
    target, references, inside = (np.asarray(v) for v in arrays(t.assign(role="x"))[:3])
    mean, std = lira_fit(target, references, inside, "out", fix_variance=variance == "global")
    p_value = scipy.stats.norm.cdf(target, loc=mean, scale=std)
    z = get_attack("lira_offline", {"variance": variance}).statistic(t)
    np.testing.assert_allclose(scipy.stats.norm.cdf(z), p_value, rtol=0, atol=1e-9)
    np.testing.assert_allclose(z, (target - mean) / std, rtol=0, atol=1e-9)


@pytest.mark.parametrize("variance", ["global", "per_sample"])
def test_lira_online_is_tensorflow_privacys_score_negated(variance):
    """tensorflow_privacy's compute_score_lira(option="both"): -(log N(x; in) - log N(x; out)),
    small for a member; ours is log N(E; in) - log N(E; out), large for a member."""
    t = reference_table(n_population=0)
    target, references, inside, _ = arrays(t)
    fix = variance == "global"
    mean_in, std_in = lira_fit(target, references, inside, "in", fix)
    mean_out, std_out = lira_fit(target, references, inside, "out", fix)
    score = -(scipy.stats.norm.logpdf(target, mean_in, std_in) - scipy.stats.norm.logpdf(target, mean_out, std_out))
    ours = get_attack("lira_online", {"variance": variance}).statistic(t)
    np.testing.assert_allclose(ours, -score, rtol=0, atol=1e-9)


# ------------------------------------------------------------------ RMIA: the reference definition


def rmia_reference(t, a, gamma):
    """RMIA offline (Zarifzadeh, Liu and Shokri, ICML 2024, Eq. for the offline Pr(x); ML
    Privacy Meter's `run_rmia`): Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2 with Pr_OUT(x) the
    mean of exp(-E) over the references not trained on x; score(x) = the fraction of
    population samples z with (p(x)/Pr(x)) / (p(z)/Pr(z)) >= gamma (the paper's >=; Privacy
    Meter writes > with gamma 1, the same but for exact ties). Population rows: against the
    other population rows."""
    target, references, inside, roles = arrays(t)
    probability = np.exp(-references)
    pr_out = np.array([probability[i][~inside[i]].mean() for i in range(len(t))])
    ratio = np.exp(-target) / (((1 + a) * pr_out + (1 - a)) / 2)
    z = np.flatnonzero(roles == "population")
    out = np.empty(len(t))
    for i in range(len(t)):
        others = [j for j in z if j != i]
        out[i] = np.mean([ratio[i] / ratio[j] >= gamma for j in others])
    return out, np.log(ratio), z


@pytest.mark.parametrize("a, gamma", [(0.3, 1.0), (1.0, 1.0), (0.0, 1.0), (0.6, 1.2)])
def test_rmia_is_the_papers_score_plus_the_documented_tie_break(a, gamma):
    t = reference_table()
    expected, log_lr, z = rmia_reference(t, a, gamma)
    ours = get_attack("rmia", {"a": a, "gamma": gamma}).statistic(t)
    # our tie-break: (rows with a smaller log LR) / (rows) / (2 |Z| (|Z| - 1))
    below = np.array([(log_lr < v).sum() for v in log_lr])
    tie_break = below / len(t) / (2 * len(z) * (len(z) - 1))
    np.testing.assert_allclose(ours, expected + tie_break, rtol=0, atol=1e-9)


def test_rmia_tie_break_orders_equal_shares_by_the_log_ratio_and_keeps_different_shares_apart():
    # a = 1, three members far above every population row: share 1 each, three distinct scores
    t = reference_table()
    t.loc[:2, "target_energy"] = [0.5, 0.3, 0.4]
    attack = get_attack("rmia", {"a": 1.0})
    score = attack.statistic(t)
    share, log_lr, z = rmia_reference(t, 1.0, 1.0)
    assert (share[:3] == 1.0).all()
    assert len(set(score[:3])) == 3 and list(np.argsort(score[:3])) == list(np.argsort(log_lr[:3]))
    # rows of different share keep their order; rows of equal share are ordered by log LR
    for i, j in itertools.permutations(range(len(t)), 2):
        if share[i] > share[j]:
            assert score[i] > score[j]
        elif share[i] == share[j] and log_lr[i] > log_lr[j]:
            assert score[i] > score[j]
    # so the members and non-members rank as their log ratio does
    audited = t["role"].isin(["member", "nonmember"]).to_numpy()
    assert scipy.stats.spearmanr(score[audited], log_lr[audited]).statistic == pytest.approx(1.0)


# ------------------------------------------------------------------ RMIA: the tuning of a


def tuning_table(p_in, p_out, n_audited=60, n_population=12, seed=0):
    """Reference probabilities p = exp(-E) drawn per (row, reference): IN ones by `p_in(rng, n)`,
    OUT ones by `p_out(rng, n)` (population rows: OUT everywhere); the target's energies and
    the member / non-member roles are random (the tuning must not read them)."""
    rng = np.random.default_rng(seed)
    n = n_audited + n_population
    inside = np.array([HALVES[i % len(HALVES)] if i < n_audited else np.zeros(M, bool) for i in range(n)])
    probability = np.where(inside, p_in(rng, (n, M)), p_out(rng, (n, M)))
    roles = list(rng.permutation(["member", "nonmember"] * (n_audited // 2))) + ["population"] * n_population
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)], "role": roles,
        "target_energy": rng.uniform(1.0, 4.0, n), "references_energy": [list(-np.log(p)) for p in probability],
        "references_in": [list(f) for f in inside],
    })  # fmt: skip


def signal_in_the_references(seed=0):
    """Every OUT reference gives a row the same probability m (spread over rows), every IN one
    1.5 m: with a = 1 each reference's LR is 1.5 on its members and 1 on its non-members
    (AUC 1); with a < 1 the constant (1 - a)/2 lets a large-m non-member pass a small-m member."""
    rng = np.random.default_rng(seed)
    t = tuning_table(lambda r, s: np.ones(s), lambda r, s: np.ones(s), seed=seed)
    m = rng.uniform(0.02, 0.6, len(t))
    inside = np.array(t["references_in"].tolist())
    t["references_energy"] = [list(-np.log(np.where(f, 1.5 * mi, mi))) for f, mi in zip(inside, m)]
    return t


def noise_in_the_references(seed=0):
    """IN probabilities all above OUT ones (0.5-0.95 against 0.05-0.45), each drawn at random:
    a reference's own probability separates its members perfectly and the others' OUT mean is
    noise. For a member x1 and a non-member x2, x1 ranks first at w = (1 + a)/2 iff
    (p1 - p2)(1 - w) + w (p1 m2 - p2 m1) > 0: linear in w and positive at w = 0, so a pair
    ranked right at some a stays right at every smaller a: the AUC never rises with a."""
    return tuning_table(lambda r, s: r.uniform(0.5, 0.95, s), lambda r, s: r.uniform(0.05, 0.45, s), seed=seed)


def tuned_a(t, **params):
    attack = get_attack("rmia", params)
    attack.statistic(t)
    return attack.tuned["a"]


def test_tuning_picks_a_1_when_the_references_out_energies_carry_the_signal():
    assert tuned_a(signal_in_the_references()) == 1.0
    # on a grid without 1.0 the largest value comes closest to it
    assert tuned_a(signal_in_the_references(), a_grid=[0.0, 0.5, 0.9]) == 0.9


def test_tuning_picks_the_smallest_a_when_the_references_out_energies_are_noise():
    assert tuned_a(noise_in_the_references()) == 0.0
    assert tuned_a(noise_in_the_references(seed=1), a_grid=[1.0, 0.4, 0.7]) == 0.4


def test_tuning_ties_go_to_the_smallest_a():
    # every OUT reference gives every row the same probability: Pr(x) is one constant for all
    # rows whatever a is, so every a ranks the rows alike and the smallest wins
    t = tuning_table(lambda r, s: r.uniform(0.2, 0.9, s), lambda r, s: np.full(s, 0.1))
    assert tuned_a(t) == 0.0
    assert tuned_a(t, a_grid=[0.8, 0.3, 0.5]) == 0.3


def test_tuning_never_reads_the_audited_targets_labels_or_energies():
    rng = np.random.default_rng(5)
    for t in (signal_in_the_references(), noise_in_the_references(), reference_table()):
        attack = get_attack("rmia")
        attack.statistic(t)
        chosen = attack.tuned
        audited = t["role"].isin(["member", "nonmember"]).to_numpy()
        for _ in range(3):
            shuffled = t.copy()
            shuffled.loc[audited, "role"] = rng.permutation(shuffled.loc[audited, "role"].to_numpy())
            shuffled["target_energy"] = rng.uniform(0.5, 5.0, len(t))
            again = get_attack("rmia")
            again.statistic(shuffled)
            assert again.tuned == chosen
    # the references' memberships are what it reads: the same energies with the IN and OUT
    # flags of the audited rows swapped lead to another a
    t = signal_in_the_references()
    audited = t["role"].isin(["member", "nonmember"]).to_numpy()
    swapped = t.copy()
    swapped["references_in"] = [list(~np.array(f)) if a else f for f, a in zip(t["references_in"], audited)]
    assert tuned_a(swapped) != tuned_a(t) == 1.0


def test_tuning_matches_the_reference_procedure_on_the_fixed_arrays():
    """Privacy Meter's `tune_offline_a`, written here: each reference r attacked with the others'
    OUT probabilities, the population rows (OUT for r) as Z, AUC (scikit-learn) on r's own
    memberships, averaged over r; the first a with the largest mean wins. The score is our
    statistic's definition (the paper's share plus the tie-break, see above)."""
    t = reference_table(seed=3)
    _, references, inside, roles = arrays(t)
    probability = np.exp(-references)
    grid = [round(0.1 * i, 1) for i in range(11)]
    means = []
    for a in grid:
        aucs = []
        for r in range(M):
            others = [j for j in range(M) if j != r]
            keep = [i for i in range(len(t)) if (~inside[i, others]).any()]
            pr = {i: probability[i, [j for j in others if not inside[i, j]]].mean() for i in keep}
            ratio = {i: probability[i, r] / (((1 + a) * pr[i] + (1 - a)) / 2) for i in keep}
            z = [i for i in keep if roles[i] == "population"]
            x = [i for i in keep if roles[i] in ("member", "nonmember")]
            rows = x + z
            log_lr = np.log([ratio[i] for i in rows])
            share = [np.mean([ratio[i] / ratio[j] >= 1 for j in z]) for i in x]
            below = [(log_lr < v).sum() for v in log_lr[: len(x)]]
            score = np.array(share) + np.array(below) / len(rows) / (2 * len(z) * (len(z) - 1))
            aucs.append(roc_auc_score(inside[x, r], score))
        means.append(np.mean(aucs))
    expected = grid[int(np.argmax(means))]
    assert tuned_a(t) == expected


def test_the_tuned_a_reaches_the_metrics_under_every_protocol():
    t = reference_table(seed=3).assign(source="x")
    attack = get_attack("rmia")
    attack.statistic(t)
    settings = MetricSettings(
        protocols=("published", "corrected"), attacks=("rmia", "lira_offline"), alphas=(0.1,),
        thresholds=("population",), fprs=(0.1,), draws=2, seed=0, bootstrap=2, level="sample",
    )  # fmt: skip
    metrics = attack_metrics(t, settings)
    tuned = metrics[metrics["metric"] == "parameter"]
    assert len(tuned) == 2 and set(tuned["protocol"]) == {"published", "corrected"}
    assert (tuned["attack"] == "rmia").all() and (tuned["parameter"] == "a").all()
    assert (tuned["value"] == attack.tuned["a"]).all() and tuned["replicate"].isna().all()
    assert len(point_estimates(metrics)) == len(metrics[metrics["replicate"].isna()])
    # a fixed a: nothing tuned, no row
    fixed = attack_metrics(t, MetricSettings(**{**settings.__dict__, "attack_params": {"rmia": {"a": 0.3}}}))
    assert not (fixed["metric"] == "parameter").any()
    assert fixed["parameter"].isna().all()
