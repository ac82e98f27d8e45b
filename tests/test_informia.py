"""InfoRMIA (Tao and Shokri, arXiv 2510.05582, ICLR 2026): per-slot and per-sample scores by hand,
against the authors' token-level formula (taojiashu/mimir, ``mimir/attacks/info_rmia.py``,
written here in numpy from its definition) on a toy vocabulary, its reduction to RMIA with one
slot per sample on the fixed arrays of tests/test_attack_references.py, the localisation of a
member's signal to its slots, and the refusals.

The stored copies of the paper give its abstract and summaries (the information log p(x | θ) /
p(x) in bits, the shift D_KL(p(z) || p(z | θ))), not its numbered equations: the expected values
below follow those terms and the authors' code, each written out by hand."""

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from sklearn.metrics import roc_auc_score
from test_attack_references import noise_in_the_references, reference_table, signal_in_the_references

from mlmia.attacks import get_attack
from mlmia.attacks.protocols import MetricSettings, attack_metrics, point_estimates
from mlmia.attacks.table import build_attack_table
from mlmia.core.errors import UserError

L2 = math.log2


def one_line_error(call, match):
    with pytest.raises(UserError, match=match) as info:
        call()
    assert "\n" not in str(info.value)
    return str(info.value)


def slot_table(roles, target, references, inside):
    """An attack table from per-row probabilities: `target[i]` the target's per slot, `references[i]`
    one list per reference, `inside[i]` its IN flags."""
    n = len(roles)
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)], "role": roles,
        "target_token_logp": [list(np.log(p)) for p in target],
        "references_token_logp": [[list(np.log(p)) for p in refs] for refs in references],
        "references_in": [list(f) for f in inside],
    })  # fmt: skip


def hand_table():
    # probabilities; the IN reference (1.0 everywhere) of m1 never enters Pr(x_j)
    return slot_table(
        ["member", "nonmember", "population", "population", "population"],
        [[1 / 2, 1 / 4], [1 / 8, 1 / 4], [1 / 4, 1 / 4], [1 / 2], [1 / 4, 1 / 4, 1 / 4]],
        [
            [[1 / 4, 1 / 8], [1.0, 1.0], [1 / 4, 3 / 8]],  # OUT mean 1/4, 1/4
            [[1 / 4, 1 / 4]] * 3,
            [[1 / 4, 1 / 2]] * 3,
            [[1 / 4]] * 3,
            [[1 / 8, 1 / 8, 1 / 2]] * 3,
        ],
        [[False, True, False]] + [[False] * 3] * 4,
    )


# ------------------------------------------------------------------ by hand


def test_slot_and_sample_scores_by_hand_with_a_1():
    """a = 1: Pr(x_j) is the OUT references' mean probability, l_j = log2 p_target / Pr (bits).
    l: m1 [1, 0], n1 [-1, 0], p1 [0, -1], p2 [1], p3 [1, 1, -1]; row means m1 1/2, n1 -1/2,
    p1 -1/2, p2 1, p3 1/3. Shift m: the population's mean of row means, (-1/2 + 1 + 1/3) / 3 =
    5/18 for the audited rows; for a population row the mean of the other two: p1 (1 + 1/3) / 2
    = 2/3, p2 (-1/2 + 1/3) / 2 = -1/12, p3 (-1/2 + 1) / 2 = 1/4. Slot score: l_j - m."""
    t = hand_table()
    attack = get_attack("informia", {"a": 1.0})
    tokens = attack.token_statistics(t)
    expected = [
        [1 - 5 / 18, -5 / 18],
        [-1 - 5 / 18, -5 / 18],
        [-2 / 3, -1 - 2 / 3],
        [1 + 1 / 12],
        [3 / 4, 3 / 4, -5 / 4],
    ]
    assert [len(s) for s in tokens] == [2, 2, 2, 1, 3]
    for ours, hand in zip(tokens, expected):
        np.testing.assert_allclose(ours, hand, rtol=0, atol=1e-12)
    np.testing.assert_allclose(attack.statistic(t), [2 / 9, -7 / 9, -7 / 6, 13 / 12, 1 / 12], rtol=0, atol=1e-12)
    assert attack.tuned == {} and not attack.lower_is_member


def test_slot_scores_by_hand_with_a_half():
    """a = 1/2: Pr(x_j) = 3/4 OUT mean + 1/4. OUT means 1/4 -> 7/16, 1/2 -> 5/8, 1/8 -> 11/32."""
    t = hand_table()
    ell = [
        [L2(8 / 7), L2(4 / 7)],  # (1/2) / (7/16), (1/4) / (7/16)
        [L2(2 / 7), L2(4 / 7)],  # (1/8) / (7/16)
        [L2(4 / 7), L2(2 / 5)],  # (1/4) / (5/8)
        [L2(8 / 7)],
        [L2(8 / 11), L2(8 / 11), L2(2 / 5)],  # (1/4) / (11/32)
    ]
    means = [np.mean(v) for v in ell]
    shift = [np.mean(means[2:])] * 2 + [np.mean([means[j] for j in (2, 3, 4) if j != i]) for i in (2, 3, 4)]
    tokens = get_attack("informia", {"a": 0.5}).token_statistics(t)
    for ours, v, m in zip(tokens, ell, shift):
        np.testing.assert_allclose(ours, np.array(v) - m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        get_attack("informia", {"a": 0.5}).statistic(t), np.array(means) - shift, rtol=0, atol=1e-12
    )


def test_the_statistic_is_the_mean_of_its_slot_scores_one_per_slot():
    rng = np.random.default_rng(2)
    n, m = 14, 4
    lengths = rng.integers(1, 9, n)
    roles = ["member"] * 5 + ["nonmember"] * 5 + ["population"] * 4
    target = [rng.uniform(0.05, 0.9, k) for k in lengths]
    references = [[rng.uniform(0.05, 0.9, k) for _ in range(m)] for k in lengths]
    inside = [[i % 2 == 0, i % 2 == 1, i % 2 == 0, i % 2 == 1] if r != "population" else [False] * m
              for i, r in enumerate(roles)]  # fmt: skip
    t = slot_table(roles, target, references, inside)
    attack = get_attack("informia")
    tokens = attack.token_statistics(t)
    statistic = attack.statistic(t)
    assert [len(s) for s in tokens] == [len(v) for v in t["target_token_logp"]]
    np.testing.assert_allclose(statistic, [s.mean() for s in tokens], rtol=0, atol=1e-12)
    assert set(attack.tuned) == {"a"}
    # every other attack has no per-slot evidence
    assert get_attack("rmia").token_statistics(t) is None


# ------------------------------------------------------------------ the authors' token score


def authors_token_score(log_p_target, log_p_references, target_dist, reference_dists):
    """InfoRMIAToken (taojiashu/mimir): per position t, with lr(v) the references' mean
    log-probability of v, (log p_target(x_t) - lr(x_t)) - sum_v exp(lr(v)) (log p_target(v) - lr(v));
    its sequence score (aggregate mean) is the mean over positions (negated for MIMIR)."""
    lr_all = np.mean(np.log(reference_dists), axis=0)  # positions x vocabulary
    lr_tok = np.mean(log_p_references, axis=0)
    kl_term = np.sum(np.exp(lr_all) * (np.log(target_dist) - lr_all), axis=-1)
    return (log_p_target - lr_tok) - kl_term


def test_one_reference_a_1_gives_the_authors_token_score_with_the_shift_from_the_population():
    """A toy vocabulary of 6, one distribution per model at every position: the reference's q,
    the target's p. The authors' shift at a position is D_KL(q || p) (their term -sum q log p/q);
    ours is minus the population's mean log2 p(z_j) / q(z_j), population tokens drawn from q:
    a Monte Carlo estimate of the same -E_q[log2 p / q]. With one OUT reference and a = 1 the
    log ratios coincide, so our slot score times ln 2 is the authors' up to that estimate's
    error (4 standard errors allowed, from the exact variance of log p / q under q)."""
    q = np.array([0.30, 0.25, 0.20, 0.12, 0.08, 0.05])
    p = np.array([0.20, 0.30, 0.10, 0.25, 0.05, 0.10])
    rng = np.random.default_rng(4)
    n_pop, n_aud, slots = 400, 30, 5
    tokens = rng.choice(6, size=(n_pop + n_aud, slots), p=q)
    roles = ["member"] * 15 + ["nonmember"] * 15 + ["population"] * n_pop
    tokens = np.vstack([tokens[n_pop:], tokens[:n_pop]])
    t = slot_table(roles, [p[v] for v in tokens], [[q[v]] for v in tokens], [[False]] * len(roles))
    attack = get_attack("informia", {"a": 1.0})
    ours = attack.token_statistics(t)
    kl = float(np.sum(q * np.log(q / p)))
    log_ratio = np.log(p / q)
    sd = math.sqrt(float(np.sum(q * log_ratio**2)) - float(np.sum(q * log_ratio)) ** 2)
    tolerance = 4 * sd / math.sqrt(n_pop * slots)
    for i in range(n_aud):
        v = tokens[i]
        theirs = authors_token_score(
            np.log(p[v]), np.log(q[v])[None], np.tile(p, (slots, 1)), np.tile(q, (slots, 1))[None]
        )
        np.testing.assert_allclose(theirs, np.log(p[v] / q[v]) + kl, rtol=0, atol=1e-12)  # their shift is the KL
        np.testing.assert_allclose(ours[i] * math.log(2), theirs, rtol=0, atol=tolerance)
    # the sequence score: like their mean over tokens, the mean of the slot scores
    np.testing.assert_allclose(attack.statistic(t)[:n_aud], [ours[i].mean() for i in range(n_aud)], rtol=0, atol=1e-12)
    # the shift is one number for the audited rows: their slots and they rank by the log ratio
    shifts = np.concatenate([np.log2(p[tokens[i]] / q[tokens[i]]) - ours[i] for i in range(n_aud)])
    np.testing.assert_allclose(shifts, shifts[0], rtol=0, atol=1e-12)


# ------------------------------------------------------------------ one slot per sample: RMIA


def one_slot(t):
    """The energies of an RMIA table as one slot per sample: log p = -E."""
    return t.assign(
        target_token_logp=[[-e] for e in t["target_energy"]],
        references_token_logp=[[[-e] for e in refs] for refs in t["references_energy"]],
    )


@pytest.mark.parametrize("a", [0.0, 0.3, 1.0])
def test_with_one_slot_it_is_rmia_with_the_indicator_replaced_by_the_ratios_information(a):
    """RMIA: share of z with LR(x) / LR(z) >= gamma; InfoRMIA with one slot: the mean over the same
    z of log2(LR(x) / LR(z)), LR(x) = exp(-E) / (((1 + a) Pr_OUT(x) + (1 - a)) / 2) (brute force
    over the pairs, population rows against the others)."""
    t = reference_table()
    target = t["target_energy"].to_numpy()
    refs = np.array(t["references_energy"].tolist())
    inside = np.array(t["references_in"].tolist())
    pr_out = np.array([np.exp(-refs[i][~inside[i]]).mean() for i in range(len(t))])
    lr = np.exp(-target) / (((1 + a) * pr_out + (1 - a)) / 2)
    z = np.flatnonzero(t["role"].to_numpy() == "population")
    pairs = [[lr[i] / lr[j] for j in z if j != i] for i in range(len(t))]
    expected = [np.mean(np.log2(r)) for r in pairs]
    ours = get_attack("informia", {"a": a}).statistic(one_slot(t))
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-9)
    # the audited rows rank as RMIA's (gamma 1, its tie-break): both follow LR(x)
    rmia = get_attack("rmia", {"a": a, "gamma": 1.0}).statistic(t)
    audited = t["role"].isin(["member", "nonmember"]).to_numpy()
    assert scipy.stats.spearmanr(ours[audited], rmia[audited]).statistic == pytest.approx(1.0)
    assert scipy.stats.spearmanr(ours[audited], np.log(lr[audited])).statistic == pytest.approx(1.0)


@pytest.mark.parametrize("make", [reference_table, signal_in_the_references, noise_in_the_references])
def test_with_one_slot_a_auto_is_tuned_to_rmias_value(make):
    # the tuning's AUCs are on the audited rows, which both statistics rank by LR: equal AUCs
    t = make()
    rmia, info = get_attack("rmia"), get_attack("informia")
    rmia.statistic(t)
    info.statistic(one_slot(t))
    assert info.tuned == rmia.tuned
    known = {signal_in_the_references: 1.0, noise_in_the_references: 0.0}  # their docstrings say why
    if make in known:
        assert info.tuned["a"] == known[make]


# ------------------------------------------------------------------ the member's tokens


def localisation_table(seed=0, n_member=40, n_nonmember=40, n_population=20, slots=30, signal=2.0):
    """Each slot's log-probability has a base over the vocabulary's spread, N(-4, 1.5); four OUT
    references and the target add N(0, 0.3) each; a member's target adds `signal` nats on 2
    random slots of its 30. Returns the table and each member's signal slots."""
    rng = np.random.default_rng(seed)
    n = n_member + n_nonmember + n_population
    roles = ["member"] * n_member + ["nonmember"] * n_nonmember + ["population"] * n_population
    base = rng.normal(-4.0, 1.5, (n, slots))
    references = base[:, None, :] + rng.normal(0.0, 0.3, (n, 4, slots))
    target = base + rng.normal(0.0, 0.3, (n, slots))
    hot = [np.sort(rng.choice(slots, 2, replace=False)) for _ in range(n_member)]
    for i, h in enumerate(hot):
        target[i, h] += signal
    t = pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)], "role": roles,
        "target_token_logp": [list(v) for v in target],
        "references_token_logp": [[list(v) for v in r] for r in references],
        "references_in": [[False] * 4] * n,
    })  # fmt: skip
    return t, hot


def test_the_slot_scores_rank_a_members_two_signal_slots_first():
    """Slot score noise: the target's 0.3 and the log of the four references' mean (about 0.15),
    sd ~0.34 nats per slot, ~0.47 for the difference of two slots; a signal slot of 2 nats falls
    below a given other slot with probability Phi(-2 / 0.47) ~ 1e-5, so a member misses (some
    of 28 other slots passes one of its 2) with probability <= 56e-5 (union bound), and 5 of 40
    members missing has probability < 1e-10: at least 36 of 40 must rank right. The target's raw
    log-probability ranks by the base (sd 1.5 against 2 nats): both signal slots first in ~9% of
    rows (simulated, 20 000 rows), so at most 12 of 40 may there."""
    t, hot = localisation_table()
    attack = get_attack("informia", {"a": 1.0})
    tokens = attack.token_statistics(t)
    assert all(len(s) == 30 for s in tokens)
    first = [np.sort(np.argsort(-tokens[i])[:2]) for i in range(len(hot))]
    hits = sum(bool((f == h).all()) for f, h in zip(first, hot))
    assert hits >= 36
    raw = [np.sort(np.argsort(-np.asarray(t["target_token_logp"][i]))[:2]) for i in range(len(hot))]
    assert sum(bool((f == h).all()) for f, h in zip(raw, hot)) <= 12
    # the sample's mean dilutes the same signal: 2 x 2 nats over 30 slots, 0.13 nats against a
    # row mean's sd of 0.34 / sqrt(30) = 0.06, an expected AUC of about Phi(2.2 / sqrt 2) = 0.94
    statistic = attack.statistic(t)
    y = t["role"].to_numpy()
    audited = np.isin(y, ["member", "nonmember"])
    assert roc_auc_score(y[audited] == "member", statistic[audited]) > 0.8


# ------------------------------------------------------------------ the workflow's table


def test_it_reads_the_attack_table_as_built_from_score_tables_and_reaches_the_metrics():
    """Score tables of a target and three references (token_logp lists per sample, each sample its
    own number of slots), the references trained on halves of the audited patients: the attack
    table's references_token_logp holds one list per reference, and the metrics take the
    statistic and the tuned a."""
    rng = np.random.default_rng(7)
    roles = ["member"] * 8 + ["member_heldin"] * 2 + ["nonmember"] * 8 + ["population"] * 6
    n = len(roles)
    samples = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)],
                            "role": roles, "source": "a"})  # fmt: skip
    lengths = rng.integers(2, 9, n)
    base = [rng.normal(-3.0, 1.0, k) for k in lengths]
    names = ["r0", "r1", "r2", "r3"]
    audited = np.isin(roles, ["member", "nonmember"])
    inside = {r: audited & (np.arange(n) % 2 == k % 2) for k, r in enumerate(names)}

    def score_table(shift):
        return pd.DataFrame({"sample_id": samples.sample_id, "token_logp": [list(b + s) for b, s in zip(base, shift)]})

    member = np.isin(roles, ["member", "member_heldin"])
    scores = {("target", "masked"): score_table([rng.normal(0.8 * m, 0.1, k) for m, k in zip(member, lengths)])}
    scores[("references", "masked")] = [
        score_table([rng.normal(0.8 * f, 0.1, k) for f, k in zip(inside[r], lengths)]) for r in names
    ]
    splits = pd.DataFrame(
        [{"sample_id": f"s{i}", "reference": r, "in": bool(inside[r][i])} for r in names for i in range(n)]
    )
    columns = {"target": ["token_logp"], "references": ["token_logp"]}
    built = build_attack_table(
        samples, scores, {"target": "t", "references": names}, columns, nonmembers="a", population="a", splits=splits
    )
    assert [len(v) for v in built["references_token_logp"]] == [4] * n
    attack = get_attack("informia")
    assert [len(s) for s in attack.token_statistics(built)] == list(lengths)
    settings = MetricSettings(
        protocols=("corrected",), attacks=("informia",), alphas=(0.1,), thresholds=("population",), fprs=(0.1,),
        draws=2, seed=0, bootstrap=2, level="sample",
    )  # fmt: skip
    metrics = point_estimates(attack_metrics(built, settings))
    assert metrics[metrics.metric == "auc"]["value"].iloc[0] > 0.9
    tuned = metrics[metrics.metric == "parameter"]
    assert list(tuned["parameter"]) == ["a"] and tuned["value"].between(0, 1).all()


# ------------------------------------------------------------------ refusals


def test_a_reference_that_does_not_tokenize_as_the_target_is_refused():
    t, _ = localisation_table(n_member=2, n_nonmember=2, n_population=3)
    t.at[3, "references_token_logp"] = [v if k != 1 else v[:29] for k, v in enumerate(t.at[3, "references_token_logp"])]
    message = one_line_error(
        lambda: get_attack("informia", {"a": 1.0}).statistic(t), "attack informia: sample s3: reference 2 of 4"
    )
    assert "lists 29 values and the target 30" in message and "does not tokenize" in message
    one_line_error(lambda: get_attack("informia", {"a": 1.0}).token_statistics(t), "sample s3")


def test_rows_and_tables_it_cannot_score_are_refused_in_one_line():
    t = hand_table()
    attack = get_attack("informia", {"a": 1.0})
    one_line_error(lambda: attack.statistic(t.iloc[:3]), "1 population rows; at least 2 are needed")
    all_in = t.copy()
    all_in.at[1, "references_in"] = [True, True, True]
    one_line_error(lambda: attack.statistic(all_in), "sample s1 has no OUT reference")
    bad = t.copy()
    bad.at[0, "references_token_logp"] = [[np.nan, 0.0], [0.0, 0.0], [0.0, 0.0]]
    one_line_error(lambda: attack.statistic(bad), "sample s0: references_token_logp holds a value that is not")
    flags = t.copy()
    flags.at[0, "references_in"] = [False, False]
    one_line_error(lambda: attack.statistic(flags), "sample s0: references_token_logp and references_in differ")
    # a: auto attacks each reference with the others: the same references on every row, some IN
    fewer = t.copy()
    fewer.at[4, "references_token_logp"] = fewer.at[4, "references_token_logp"][:2]
    fewer.at[4, "references_in"] = [False, False]
    one_line_error(lambda: get_attack("informia").statistic(fewer), "rows list 2 to 3 references; a: auto needs")
    one_line_error(
        lambda: get_attack("informia").statistic(localisation_table(n_member=3, n_nonmember=3, n_population=3)[0]),
        r"attack informia: a: auto needs reference models trained on some of the audited.*attacks\.informia\.a$",
    )


def test_parameters_are_refused_on_construction_naming_the_config_key():
    for params, match in [
        ({"a": 2}, "config key attacks.informia.a: 'auto' or a number in"),
        ({"a": "automatic"}, "config key attacks.informia.a:"),
        ({"a_grid": []}, "config key attacks.informia.a_grid:"),
        ({"a_grid": [0.5, 1.5]}, "config key attacks.informia.a_grid:"),
        ({"gamma": 1.0}, r"config key attacks.informia: unknown parameter\(s\) gamma"),
    ]:
        one_line_error(lambda params=params: get_attack("informia", params), match)
    assert get_attack("informia").params == {"a": "auto", "a_grid": tuple(i / 10 for i in range(11))}
    lack = get_attack("informia").references_lack(2, True)
    assert "at least 3 reference models" in lack and "attacks.informia.a" in lack
    assert get_attack("informia", {"a": 0.5}).references_lack(1, False) is None
