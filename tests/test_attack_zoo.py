"""The attack zoo: each attack's statistic against values worked out by hand, and the registry."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from mlmia.attacks import attack_names, get_attack
from mlmia.attacks.base import Attack
from mlmia.attacks.protocols import MetricSettings, attack_metrics, point_estimates
from mlmia.attacks.table import SAMPLE_FEATURES, build_attack_table
from mlmia.core.errors import UserError

ZOO = (
    "zlib", "min_k", "min_k_plus_plus", "lira_offline", "lira_online", "rmia", "blind", "neighbourhood", "pll_word_l2r",
    "sama", "likelihood_ratio_elbo", "informia",
)  # fmt: skip
#: every registered attack: the paper's, the zoo's and any other a module of mlmia.attacks defines
REGISTERED = tuple(attack_names())
LN = math.log


def table(**columns):
    n = len(next(iter(columns.values())))
    base = {"sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)]}
    return pd.DataFrame({**base, **columns})


def refused_on_construction(name, params, match):
    """An out-of-range parameter is refused when the attack is built (as the config check builds it,
    before any job), in one line naming the config key."""
    with pytest.raises(UserError, match=match) as info:
        get_attack(name, params)
    assert "\n" not in str(info.value)
    return str(info.value)


def one_line_error(attack, frame, match):
    with pytest.raises(UserError, match=match) as info:
        attack.statistic(frame)
    assert "\n" not in str(info.value)
    return str(info.value)


# ------------------------------------------------------------------ the registry


def test_the_registry_holds_the_papers_attacks_and_the_zoo():
    assert {"loss", "likelihood_ratio", "likelihood_ratio_normalized", *ZOO} <= set(REGISTERED)


def contract_table(attack: Attack, rng: np.random.Generator) -> pd.DataFrame:
    """An attack table with every column `attack` reads, of every role, values of the right kind."""
    roles = ["member"] * 4 + ["member_heldin"] * 2 + ["nonmember"] * 4 + ["population"] * 4
    n = len(roles)
    t = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)],
                      "role": roles, "source": "a"})  # fmt: skip
    for column in attack.columns():
        if column == "references_in":  # two IN and two OUT references for every row
            t[column] = [[True, False, True, False] if i % 2 else [False, True, False, True] for i in range(n)]
        elif column.startswith("references_token_") or (
            column.startswith("references_") and column.endswith("_per_pattern")
        ):
            # per reference, a list as long as the target's (the same slots): six token values, or three patterns' losses
            size, sign = (3, 1.0) if column.endswith("_per_pattern") else (6, -1.0)
            t[column] = [[list(sign * rng.exponential(2.0, size)) for _ in range(4)] for _ in range(n)]
        elif column.startswith(("references_", "neighbours_")):
            t[column] = [list(rng.normal(3.0, 0.3, 4)) for _ in range(n)]
        elif column.endswith("_per_pattern"):  # each of three patterns' mean loss
            t[column] = [list(rng.uniform(1.0, 4.0, 3)) for _ in range(n)]
        elif column.endswith("_pattern_sizes"):  # the six token values in three patterns (a progressive energy)
            t[column] = [[1, 2, 3]] * n
        elif column.endswith("_token_var"):
            t[column] = [list(rng.uniform(0.1, 1.0, 6)) for _ in range(n)]
        elif column.endswith(("_token_logp", "_token_mean")):
            t[column] = [list(-rng.exponential(2.0, 6)) for _ in range(n)]
        elif column.endswith("_member_probability"):
            t[column] = rng.uniform(0.05, 0.95, n)
        else:  # an energy or a byte count: positive numbers
            t[column] = rng.uniform(1.0, 4.0, n)
    return t


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_attack_keeps_the_contract(name):
    attack = get_attack(name)
    assert isinstance(attack, Attack) and attack.name == name and attack.label
    doc = type(attack).__doc__
    assert any(str(y) in doc for y in range(2014, 2027)), "the docstring cites the paper's year"
    assert attack.params == type(attack).parameters
    assert attack.columns() and all(isinstance(c, str) for c in attack.columns())
    t = contract_table(attack, np.random.default_rng(0))
    statistic = np.asarray(attack.statistic(t), dtype=float)
    assert statistic.shape == (len(t),)
    scored = t["role"].isin(attack.scored_roles or t["role"].unique()).to_numpy()
    assert np.isfinite(statistic[scored]).all(), "finite on every row of the roles it scores"
    sign = -1.0 if attack.lower_is_member else 1.0
    np.testing.assert_array_equal(attack.member_score(t)[scored], sign * statistic[scored])
    if not attack.reads_other_rows():  # a row-local statistic is the same on any part of the table
        part = t.iloc[[0, 7, 3]].reset_index(drop=True)
        np.testing.assert_allclose(attack.statistic(part), statistic[[0, 7, 3]], rtol=1e-12)


def test_parameters_override_defaults_and_unknown_ones_are_refused():
    assert get_attack("min_k").params == {"fraction": 0.2}
    assert get_attack("min_k", {"fraction": 0.5}).params == {"fraction": 0.5}
    assert get_attack("rmia").params == {"a": "auto", "a_grid": tuple(i / 10 for i in range(11)), "gamma": 1.0}
    assert get_attack("lira_offline").params == {"variance": "global", "min_sigma": 1e-3}
    assert get_attack("blind").params == {"folds": 5}
    with pytest.raises(UserError, match="attacks.min_k: unknown parameter"):
        get_attack("min_k", {"kk": 0.5})


def test_columns_follow_the_input_roles():
    assert get_attack("zlib").columns() == ["target_energy", "sample_zlib_bytes"]
    assert get_attack("pll_word_l2r").columns() == ["target_pll_word_l2r_energy", "reference_pll_word_l2r_energy"]
    assert get_attack("lira_online").columns() == ["target_energy", "references_energy", "references_in"]
    assert get_attack("neighbourhood").columns() == ["target_energy", "neighbours_energy"]
    assert get_attack("min_k_plus_plus").columns() == ["target_token_logp", "target_token_mean", "target_token_var"]
    assert get_attack("blind").columns() == ["sample_blind_member_probability"]
    assert "blind_member_probability" in SAMPLE_FEATURES


# ------------------------------------------------------------------ zlib, neighbourhood, PLL-word-l2r


def test_zlib_by_hand():
    # 2.0 / 40 = 0.05, 3.0 / 60 = 0.05, 1.5 / 10 = 0.15
    t = table(target_energy=[2.0, 3.0, 1.5], sample_zlib_bytes=[40, 60, 10])
    attack = get_attack("zlib")
    np.testing.assert_allclose(attack.statistic(t), [0.05, 0.05, 0.15])
    np.testing.assert_allclose(attack.member_score(t), [-0.05, -0.05, -0.15])  # lower = member
    one_line_error(attack, t.assign(sample_zlib_bytes=[40, 0, 10]), "sample s1: zlib length is not positive")


def test_neighbourhood_by_hand():
    # means of the neighbours: 3.0, 1.0, 3.0 -> 2 - 3 = -1, 1 - 1 = 0, 3 - 3 = 0
    t = table(target_energy=[2.0, 1.0, 3.0], neighbours_energy=[[2.5, 3.5], [1.0], np.array([2.0, 2.5, 4.5])])
    attack = get_attack("neighbourhood")
    np.testing.assert_allclose(attack.statistic(t), [-1.0, 0.0, 0.0])
    assert attack.lower_is_member
    one_line_error(attack, t.assign(neighbours_energy=[[2.5], [], [1.0]]), "sample s1 has no neighbour energies")


def test_pll_word_l2r_by_hand():
    # 2.0 - 2.5 = -0.5, 3.5 - 3.0 = 0.5, 1.0 - 1.0 = 0
    t = table(target_pll_word_l2r_energy=[2.0, 3.5, 1.0], reference_pll_word_l2r_energy=[2.5, 3.0, 1.0])
    np.testing.assert_allclose(get_attack("pll_word_l2r").statistic(t), [-0.5, 0.5, 0.0])


# ------------------------------------------------------------------ Min-K% and Min-K%++


def test_min_k_by_hand():
    t = table(
        target_token_logp=[
            [-1.0, -2.0, -3.0, -4.0, -5.0],  # n 5
            [-0.5, -0.1, -2.0, -0.3, -1.0, -4.0, -0.2, -0.4, -0.6, -0.7],  # n 10
            [-0.25, -0.75],  # n 2
            list(-np.arange(1.0, 31.0)),  # n 30: -1, ..., -30
        ]
    )
    # k 0.2: m = floor(0.2 n), at least 1 = 1, 2, 1 (0.4 -> 0 -> 1), 6
    #   row 0: -5 -> 5; row 1: (-4 - 2) / 2 = -3 -> 3; row 2: -0.75 -> 0.75; row 3: mean(-25..-30) = -27.5 -> 27.5
    np.testing.assert_allclose(get_attack("min_k").statistic(t), [5.0, 3.0, 0.75, 27.5])
    # k 0.5: m = 2 (2.5 -> 2), 5, 1, 15
    #   row 0: (-5 - 4) / 2 = -4.5; row 1: (-4 - 2 - 1 - 0.7 - 0.6) / 5 = -1.66; row 3: mean(-16..-30) = -23
    np.testing.assert_allclose(get_attack("min_k", {"fraction": 0.5}).statistic(t), [4.5, 1.66, 0.75, 23.0])
    # k 0.1 on 30 tokens is 3 tokens (0.1 * 30 = 3.0000000000000004 in floating point): mean(-28, -29, -30)
    assert get_attack("min_k", {"fraction": 0.1}).statistic(t)[3] == pytest.approx(29.0)
    # k 1: the plain mean; row 1: -9.8 / 10
    assert get_attack("min_k", {"fraction": 1}).statistic(t)[1] == pytest.approx(0.98)
    attack = get_attack("min_k")
    one_line_error(attack, t.assign(target_token_logp=[[-1.0], [], [-1.0], [-1.0]]), "sample s1 has no scored tokens")
    one_line_error(attack, t.assign(target_token_logp=[[-1.0], [np.nan], [-1.0], [-1.0]]), "sample s1: .* not a finite")
    for k in (0, 1.5, "x"):
        refused_on_construction("min_k", {"fraction": k}, "attacks.min_k.fraction: a fraction")


def test_min_k_plus_plus_by_hand():
    t = table(
        # row 0: sigma = 2, 1, 0.5 -> z = (-1 + 2) / 2 = 0.5, (-2 + 2) / 1 = 0, (-3 + 1) / 0.5 = -4
        # row 1: variance 0 is a point mass -> z = 0; (-1 + 3) / 4 = 0.5
        # row 2: a variance rounded below zero is zero too -> z = 0
        target_token_logp=[[-1.0, -2.0, -3.0], [-0.5, -1.0], [-2.0]],
        target_token_mean=[[-2.0, -2.0, -1.0], [-0.5, -3.0], [-1.0]],
        target_token_var=[[4.0, 1.0, 0.25], [0.0, 16.0], [-1e-18]],
    )
    # k 0.2: m = 1, 1, 1 -> -min z: 4, 0, 0
    np.testing.assert_allclose(get_attack("min_k_plus_plus").statistic(t), [4.0, 0.0, 0.0], atol=1e-15)
    # k 0.5: m = 1 (1.5 -> 1), 1, 1 (0.5 -> 0 -> 1) -> row 0: 4
    np.testing.assert_allclose(
        get_attack("min_k_plus_plus", {"fraction": 0.5}).statistic(t), [4.0, 0.0, 0.0], atol=1e-15
    )
    # k 0.7: m = 2 (2.1 -> 2) -> row 0: -(-4 + 0) / 2 = 2
    assert get_attack("min_k_plus_plus", {"fraction": 0.7}).statistic(t)[0] == pytest.approx(2.0)
    # k 1: row 0: -(0.5 + 0 - 4) / 3 = 3.5 / 3; row 1: -(0 + 0.5) / 2 = -0.25
    np.testing.assert_allclose(get_attack("min_k_plus_plus", {"fraction": 1.0}).statistic(t)[:2], [3.5 / 3, -0.25])
    one_line_error(
        get_attack("min_k_plus_plus"),
        t.assign(target_token_var=[[4.0, 1.0], [0.0, 16.0], [0.0]]),
        "sample s0: .*length",
    )


# ------------------------------------------------------------------ the reference definitions
# Each attack with a public reference implementation against that definition, written here in
# plain numpy from the paper and from MIMIR's code (iamgroot42/mimir, mimir/attacks/<attack>.py,
# as each attack's docstring names it), on fixed arrays, never through mlmia's helpers; the
# attack must give the same numbers to 1e-9. MIMIR scores a causal LM, each token from its left
# context; here a sample's tokens are the masked positions of K patterns of l tokens (the
# scorer's token_* lists, pattern by pattern) and its loss the energy: the mean over patterns
# of each pattern's mean cross-entropy.

REF_PATTERNS, REF_MASKED = 3, [2, 2, 3, 5, 7, 9]  # n = K l = 6, 6, 9, 15, 21, 27 tokens
REF_VOCAB, REF_NEIGHBOURS = 50, 5
WORDS = (
    "patient admitted with chest pain and shortness of breath history hypertension diabetes denies fever cough nausea"
)
# zlib's default level (MIMIR's, Carlini et al.'s) and level 9 compress this text to 280 and 279 bytes
ZLIB_LEVELS_DIFFER = " ".join(np.random.default_rng(509).choice(WORDS.split(), 150))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def mimir_loss(logp) -> float:
    """MIMIR's ``Model.get_ll``: minus the mean log-probability of the text's tokens."""
    return float(-np.mean(logp))


def scorer_energy(logp) -> float:
    """The energy as the scorer computes it from the same tokens: pattern by pattern."""
    return float(np.mean(-np.asarray(logp).reshape(REF_PATTERNS, -1).mean(axis=1)))


@pytest.fixture(scope="module")
def reference_case():
    """Fixed distributions: per sample, the target's and the reference's logits at each masked
    position (n x V), the true tokens, and the neighbours' token log-probabilities."""
    rng = np.random.default_rng(20230523)
    texts = ["pt admitted w/ chest pain", "denies fever", "bp 120/80 hr 72 nsr", "aspirin 81 mg daily",
             "follow up in clinic in two weeks", ZLIB_LEVELS_DIFFER]  # fmt: skip
    cases = []
    for masked in REF_MASKED:
        n = REF_PATTERNS * masked
        true = rng.integers(0, REF_VOCAB, n)
        target, reference = (log_softmax(rng.normal(0.0, 3.0, (n, REF_VOCAB))) for _ in range(2))
        neighbours = [-rng.exponential(1.5, n) for _ in range(REF_NEIGHBOURS)]
        cases.append({"true": true, "target": target, "reference": reference, "neighbours": neighbours})
    # the attack table: the columns the scorer and the table builder would give these samples
    rows = np.arange(len(cases))
    logp = [c["target"][np.arange(len(c["true"])), c["true"]] for c in cases]
    ref_logp = [c["reference"][np.arange(len(c["true"])), c["true"]] for c in cases]
    mu = [(np.exp(c["target"]) * c["target"]).sum(-1) for c in cases]
    second = [(np.exp(c["target"]) * c["target"] ** 2).sum(-1) for c in cases]
    t = table(
        text=texts,
        target_energy=[scorer_energy(x) for x in logp],
        reference_energy=[scorer_energy(x) for x in ref_logp],
        target_token_logp=[list(x) for x in logp],
        target_token_mean=[list(x) for x in mu],
        target_token_var=[list(s - m**2) for s, m in zip(second, mu)],
        neighbours_energy=[[scorer_energy(x) for x in c["neighbours"]] for c in cases],
    )
    t["sample_zlib_bytes"] = SAMPLE_FEATURES["zlib_bytes"](t, {})
    assert len(rows) == len(texts)
    return cases, t


def close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float), rtol=0, atol=1e-9)


def test_loss_is_mimirs_loss(reference_case):
    cases, t = reference_case
    logp = [c["target"][np.arange(len(c["true"])), c["true"]] for c in cases]
    close(get_attack("loss").statistic(t), [mimir_loss(x) for x in logp])


def test_likelihood_ratio_is_mimirs_reference_attack(reference_case):
    cases, t = reference_case
    idx = [np.arange(len(c["true"])) for c in cases]
    theirs = [  # mimir/attacks/reference.py: ref_loss - loss, higher = member
        mimir_loss(c["reference"][i, c["true"]]) - mimir_loss(c["target"][i, c["true"]]) for c, i in zip(cases, idx)
    ]
    attack = get_attack("likelihood_ratio")
    close(attack.member_score(t), theirs)
    close(attack.statistic(t), -np.asarray(theirs))


def test_zlib_is_mimirs_zlib_attack(reference_case):
    import zlib

    cases, t = reference_case
    assert len(zlib.compress(ZLIB_LEVELS_DIFFER.encode("utf-8"), 9)) != len(zlib.compress(ZLIB_LEVELS_DIFFER.encode()))
    theirs = [  # mimir/attacks/zlib.py: loss / len(zlib.compress(bytes(document, "utf-8")))
        mimir_loss(c["target"][np.arange(len(c["true"])), c["true"]]) / len(zlib.compress(bytes(text, "utf-8")))
        for c, text in zip(cases, t["text"])
    ]
    close(get_attack("zlib").statistic(t), theirs)


@pytest.mark.parametrize("k", [0.2, 0.35, 0.5])
def test_min_k_is_mimirs_min_k(reference_case, k):
    cases, t = reference_case
    theirs = []
    for c in cases:  # mimir/attacks/min_k.py, window 1, stride 1
        probs = list(c["target"][np.arange(len(c["true"])), c["true"]])
        theirs.append(-np.mean(sorted(probs)[: int(len(probs) * k)]))
    assert any(int(k * n) != math.ceil(k * n) for n in (REF_PATTERNS * m for m in REF_MASKED))  # rounding shows
    close(get_attack("min_k", {"fraction": k}).statistic(t), theirs)


@pytest.mark.parametrize("k", [0.2, 0.35, 0.5])
def test_min_k_plus_plus_is_mimirs_min_k_plus_plus(reference_case, k):
    cases, t = reference_case
    theirs = []
    for c in cases:  # mimir/attacks/min_k_plus_plus.py, from the full distribution at each position
        log_prob = c["target"]
        prob = np.exp(log_prob)
        mu = (prob * log_prob).sum(-1)
        sigma = (prob * np.square(log_prob)).sum(-1) - np.square(mu)
        scores = (log_prob[np.arange(len(c["true"])), c["true"]] - mu) / np.sqrt(sigma)
        theirs.append(-np.mean(sorted(scores)[: int(len(scores) * k)]))
    close(get_attack("min_k_plus_plus", {"fraction": k}).statistic(t), theirs)


def test_the_scorers_token_evidence_is_min_k_plus_plus_mu_and_sigma(reference_case):
    # the scorer's fp32 evidence (mlmia.scoring.energy) on the same distributions: MIMIR's mu and sigma^2
    from mlmia.scoring.fast_path import token_evidence

    cases, t = reference_case
    for c, mean, var in zip(cases, t["target_token_mean"], t["target_token_var"]):
        logp, mu, variance, _ = token_evidence(torch.tensor(c["target"], dtype=torch.float32), torch.tensor(c["true"]))
        np.testing.assert_allclose(mu.numpy(), mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(variance.numpy(), var, rtol=1e-4, atol=1e-4)


def test_neighbourhood_is_mimirs_neighbourhood_attack(reference_case):
    cases, t = reference_case
    theirs = [  # mimir/attacks/neighborhood.py: loss - mean of the neighbours' losses
        mimir_loss(c["target"][np.arange(len(c["true"])), c["true"]])
        - np.mean([mimir_loss(x) for x in c["neighbours"]])
        for c in cases
    ]
    close(get_attack("neighbourhood").statistic(t), theirs)


# ------------------------------------------------------------------ LiRA


def lira_table():
    return table(
        target_energy=[1.0, 2.0, 4.0],
        references_energy=[[2.0, 3.0, 1.5], [1.0, 2.0, 3.0], [4.0, 3.0, 9.0]],
        references_in=[[False, False, True], [False, False, False], [True, False, True]],
    )


def test_lira_offline_global_variance_by_hand():
    # OUT energies: s0 [2, 3] (mean 2.5, squares 0.25 + 0.25), s1 [1, 2, 3] (mean 2, squares 1 + 0 + 1), s2 [3]
    # (mean 3, square 0). Around each row's mean, all rows: (0.5 + 2 + 0) / (2 + 3 + 1) = 5/12, sigma = 0.6454972
    # z: (1 - 2.5) / 0.6454972 = -2.3237900, (2 - 2) / . = 0, (4 - 3) / 0.6454972 = 1.5491933
    attack = get_attack("lira_offline")
    np.testing.assert_allclose(attack.statistic(lira_table()), [-2.3237900, 0.0, 1.5491933], rtol=1e-7)
    assert attack.lower_is_member


def test_lira_offline_per_sample_variance_floor_and_errors():
    per_sample = get_attack("lira_offline", {"variance": "per_sample"})
    # s0: sd([2, 3]) = 0.5 (ddof 0) -> -1.5 / 0.5 = -3; s1: sd([1, 2, 3]) = 0.8164966 -> 0
    np.testing.assert_allclose(per_sample.statistic(lira_table().iloc[:2]), [-3.0, 0.0], rtol=1e-7)
    # s2 has one OUT reference: no variance of its own
    one_line_error(per_sample, lira_table(), "sample s2 has 1 OUT reference; variance per_sample needs at least 2")
    # equal OUT energies: sd 0, floored at min_sigma 0.001 -> (2.5 - 2) / 0.001 = 500
    same = table(target_energy=[2.5], references_energy=[[2.0, 2.0]], references_in=[[False, False]])
    np.testing.assert_allclose(per_sample.statistic(same), [500.0])
    np.testing.assert_allclose(
        get_attack("lira_offline", {"variance": "per_sample", "min_sigma": 0.25}).statistic(same), [2.0]
    )
    all_in = lira_table().assign(references_in=[[False, True, True], [True, True, True], [False, False, False]])
    message = one_line_error(get_attack("lira_offline"), all_in, "sample s1 has no OUT reference")
    assert "s1" in message
    one_line_error(get_attack("lira_offline"), lira_table().iloc[[2]], "global variance cannot be estimated")
    refused_on_construction("lira_offline", {"variance": "pooled"}, "attacks.lira_offline.variance")


def test_lira_online_by_hand():
    t = table(
        target_energy=[1.0, 3.0],
        # s0: IN [1, 2] (mean 1.5), OUT [3, 4] (mean 3.5); s1: IN [2, 3] (mean 2.5), OUT [4, 5] (mean 4.5)
        references_energy=[[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 3.0, 5.0]],
        references_in=[[True, True, False, False], [True, False, True, False]],
    )
    # global: sigma_in^2 = (0.5 + 0.5) / 4 = 0.25 = sigma_out^2, so the log ratio is
    # ((E - mu_out)^2 - (E - mu_in)^2) / (2 * 0.25): s0 (6.25 - 0.25) / 0.5 = 12, s1 (2.25 - 0.25) / 0.5 = 4
    attack = get_attack("lira_online")
    np.testing.assert_allclose(attack.statistic(t), [12.0, 4.0])
    assert not attack.lower_is_member
    # per sample, unequal sigmas: E = 0, IN [0, 2] (mean 1, var 1), OUT [2, 6] (mean 4, var 4):
    # log N(0; 1, 1) - log N(0; 4, 4) = (-1/2 - 0) - (-16/8 - ln(2)) = 1.5 + ln 2
    d = table(target_energy=[0.0], references_energy=[[0.0, 2.0, 2.0, 6.0]], references_in=[[True, True, False, False]])
    per_sample = get_attack("lira_online", {"variance": "per_sample"})
    np.testing.assert_allclose(per_sample.statistic(d), [1.5 + LN(2)])
    no_in = t.assign(references_in=[[True, True, False, False], [False, False, False, False]])
    one_line_error(attack, no_in, "sample s1 has no IN reference")


# ------------------------------------------------------------------ RMIA


def rmia_table():
    # Pr(x | theta) = exp(-E): energies are -ln of probabilities
    return pd.DataFrame(
        {
            "sample_id": ["m1", "n1", "p1", "p2", "p3", "p4"],
            "group_id": ["a", "b", "c", "d", "e", "f"],
            "role": ["member", "nonmember", "population", "population", "population", "population"],
            "target_energy": [LN(1 / 0.5), LN(1 / 0.2), LN(1 / 0.1), LN(1 / 0.3), LN(1 / 0.6), LN(1 / 0.9)],
            "references_energy": [
                [LN(1 / 0.2), LN(1 / 0.3)],  # OUT mean 0.25
                [LN(1 / 0.25), LN(1 / 0.9), LN(1 / 0.25)],  # the IN 0.9 is left out: OUT mean 0.25
                [LN(1 / 0.2)],
                [LN(1 / 0.3)],
                [LN(1 / 0.4)],
                [LN(1 / 0.3)],
            ],
            "references_in": [[False, False], [False, True, False], [False], [False], [False], [False]],
        }
    )


def test_rmia_by_hand():
    t = rmia_table()
    # The share of population rows beaten, plus the tie-break: (rows with a smaller log LR) /
    # (6 rows) / (2 * 4 * 3), i.e. in units of 1/144, never reordering rows of different share.
    unit = 1 / 144
    # a = 1: Pr(x) is the OUT mean. LR: m1 0.5 / 0.25 = 2, n1 0.2 / 0.25 = 0.8; population
    # p1 0.1 / 0.2 = 0.5, p2 0.3 / 0.3 = 1, p3 0.6 / 0.4 = 1.5, p4 0.9 / 0.3 = 3
    # gamma 1: m1 beats 0.5, 1, 1.5 -> 3/4; n1 beats 0.5 -> 1/4; population rows against the
    # other three: p1 0/3, p2 1/3, p3 2/3, p4 3/3. Rows below in LR: m1 4, n1 1, p1 0, p2 2, p3 3, p4 5
    attack = get_attack("rmia", {"a": 1.0})
    below = np.array([4, 1, 0, 2, 3, 5])
    np.testing.assert_allclose(attack.statistic(t), np.array([0.75, 0.25, 0.0, 1 / 3, 2 / 3, 1.0]) + below * unit)
    assert not attack.lower_is_member and attack.tuned == {}  # a fixed: nothing tuned
    # gamma 2.5: LR(z) <= LR(x) / 2.5: m1 (0.8) 0.5 -> 1/4; n1 (0.32) none; p1 (0.2) none;
    # p2 (0.4) none; p3 (0.6) 0.5 -> 1/3; p4 (1.2) 0.5, 1 -> 2/3; the tie-break is by LR itself
    strict = get_attack("rmia", {"a": 1.0, "gamma": 2.5})
    np.testing.assert_allclose(strict.statistic(t), np.array([0.25, 0.0, 0.0, 0.0, 1 / 3, 2 / 3]) + below * unit)
    # a = 0.3: Pr(x) = 0.65 * OUT mean + 0.35. LR: m1 0.5 / 0.5125 = 0.9756,
    # n1 0.2 / 0.5125 = 0.3902; p1 0.1 / 0.48 = 0.2083, p2 0.3 / 0.545 = 0.5505,
    # p3 0.6 / 0.61 = 0.9836, p4 0.9 / 0.545 = 1.6514 -> m1 beats p1, p2 -> 2/4; n1 beats p1 -> 1/4;
    # rows below: m1 3 (p3 is above it now), n1 1, p1 0, p2 2, p3 4, p4 5
    np.testing.assert_allclose(
        get_attack("rmia", {"a": 0.3}).statistic(t),
        np.array([0.5, 0.25, 0.0, 1 / 3, 2 / 3, 1.0]) + np.array([3, 1, 0, 2, 4, 5]) * unit,
    )


def test_rmia_needs_population_rows_and_out_references():
    t = rmia_table()
    one_line_error(get_attack("rmia"), t.iloc[:3], "1 population rows; at least 2 are needed")
    no_out = t.assign(references_in=[[True, True], [False, True, False], [False], [False], [False], [False]])
    one_line_error(get_attack("rmia"), no_out, "sample m1 has no OUT reference")
    refused_on_construction("rmia", {"a": 2}, "attacks.rmia.a: 'auto' or a number in")
    refused_on_construction("rmia", {"a": "automatic"}, "attacks.rmia.a")
    refused_on_construction("rmia", {"a_grid": []}, "attacks.rmia.a_grid")
    refused_on_construction("rmia", {"a_grid": [0.5, 1.5]}, "attacks.rmia.a_grid")
    refused_on_construction("rmia", {"gamma": 0}, "attacks.rmia.gamma")
    # a: auto attacks reference j with the others: every row must list the same references
    one_line_error(get_attack("rmia"), t, "rows list 1 to 3 reference energies; a: auto needs every row")
    # ... and references trained on some audited samples (online), else nothing to tune on
    aligned = t.assign(references_energy=[[1.0, 2.0, 3.0]] * 6, references_in=[[False] * 3] * 6)
    one_line_error(get_attack("rmia"), aligned, "a: auto needs reference models trained on some of the audited")


# ------------------------------------------------------------------ blind


def blind_samples(unique_words: bool):
    """5 member and 5 non-member patients of 2 samples each, 2 held-in and 2 population samples."""
    rows = []
    sets = [("member", 5, "aspirin"), ("nonmember", 5, "insulin")]
    sets += [("member_heldin", 1, "aspirin"), ("population", 1, "insulin")]
    for role, patients, word in sets:
        for p in range(patients):
            for s in range(2):
                if unique_words:  # the same shared words everywhere, and one word only this sample has
                    text = f"patient seen in clinic today tok{role}{p}x{s}q"
                else:  # words that tell the two sets apart
                    text = f"patient given {word} {word} daily note {p} {s}"
                rows.append({"sample_id": f"{role}{p}-{s}", "group_id": f"{role}-{p}", "role": role, "text": text})
    return pd.DataFrame(rows)


def test_blind_statistic_is_the_feature():
    # higher = member; the statistic is the feature as it is
    t = table(sample_blind_member_probability=[0.9, 0.2, 0.5])
    attack = get_attack("blind")
    np.testing.assert_allclose(attack.statistic(t), [0.9, 0.2, 0.5])
    np.testing.assert_allclose(attack.member_score(t), [0.9, 0.2, 0.5])


def test_blind_feature_separates_shifted_sets_and_is_reproducible(capsys, caplog):
    get_attack("blind")  # the registry imports blind.py, which registers the feature
    feature = SAMPLE_FEATURES["blind_member_probability"]
    samples = blind_samples(unique_words=False)
    p = feature(samples, {"seed": 3})
    role = samples["role"].to_numpy()
    assert np.isfinite(p).all() and ((p > 0) & (p < 1)).all()
    # the word "aspirin" only in members, "insulin" only in non-members: cross-fitted, still separated
    assert p[role == "member"].min() > 0.5 > p[role == "nonmember"].max()
    assert p[role == "member_heldin"].min() > 0.5 > p[role == "population"].max()
    np.testing.assert_array_equal(p, feature(samples, {"seed": 3}))
    np.testing.assert_array_equal(
        feature(samples, {"seed": 1, "attacks": {"blind": {"folds": 2}}}),
        feature(samples, {"seed": 1, "attacks": {"blind": {"folds": 2}}}),
    )
    out = capsys.readouterr()
    assert out.out == out.err == "" and "given" not in caplog.text


def test_blind_feature_is_cross_fitted_by_patient():
    # Every text holds the same shared words and one word of its own. Fitted on all rows, the
    # classifier learns those words and tells the sets apart perfectly. Cross-fitted by
    # patient, the words of a scored patient are unknown to the model that scores it (its
    # vocabulary comes from the other folds), so every scored row is the same vector of shared
    # words; each fold trains on 4 member and 4 non-member patients that look alike on those
    # words, and with balanced class weights the fit is symmetric between the classes:
    # P(member) = 1/2 exactly, for every row. Held-in and population rows: scored by the model
    # fitted on all rows, their own words unknown to it: 1/2 too.
    get_attack("blind")
    feature = SAMPLE_FEATURES["blind_member_probability"]
    samples = blind_samples(unique_words=True)
    np.testing.assert_allclose(feature(samples, {"seed": 0}), 0.5, atol=1e-9)
    # the contrast: a model that saw the patients separates them
    from mlmia.attacks.blind import _classifier

    labelled = samples[samples.role.isin(["member", "nonmember"])]
    seen = _classifier().fit(list(labelled.text), labelled.role == "member").predict_proba(list(labelled.text))[:, 1]
    assert seen[(labelled.role == "member").to_numpy()].min() > 0.5 + 0.05


def test_blind_feature_errors_are_one_line():
    get_attack("blind")
    feature = SAMPLE_FEATURES["blind_member_probability"]
    samples = blind_samples(unique_words=False)
    for settings, match in (
        ({"attacks": {"blind": {"folds": 1}}}, "attacks.blind.folds: an integer >= 2"),
        ({"attacks": {"blind": {"folds": 2.5}}}, "attacks.blind.folds"),
    ):
        with pytest.raises(UserError, match=match) as info:
            feature(samples, settings)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="needs member and nonmember rows"):
        feature(samples[samples.role != "nonmember"], {"seed": 0})
    one_patient = samples[(samples.role != "nonmember") | (samples.group_id == "nonmember-0")]
    with pytest.raises(UserError, match="only one class to train on") as info:
        feature(one_patient, {"seed": 0})
    assert "given" not in str(info.value)  # no sample text


# ------------------------------------------------------------------ through the attack table and the metrics


def test_zoo_through_the_attack_table_and_the_protocols():
    rng = np.random.default_rng(0)
    samples = blind_samples(unique_words=False).assign(source="a")
    n = len(samples)
    member = samples["role"].isin(["member", "member_heldin"]).to_numpy()
    get_attack("blind")  # registers the blind feature for build_attack_table
    energy = rng.normal(3.0, 0.3, n) - 0.5 * member
    scores = {("target", "masked"): pd.DataFrame({"sample_id": samples.sample_id, "energy": energy})}
    columns = {"target": ["energy"], "sample": ["zlib_bytes", "blind_member_probability"]}
    built = build_attack_table(
        samples, scores, {"target": "tiny"}, columns, nonmembers="a", population="a", settings={"seed": 0}
    )
    assert built["sample_blind_member_probability"].between(0, 1).all()
    # the list columns of the other attacks, added by hand
    built["target_token_logp"] = [list(-rng.exponential(2.0 - m, 8)) for m in member]
    built["target_token_mean"] = [list(-np.full(8, 1.5)) for _ in member]
    built["target_token_var"] = [list(np.full(8, 0.5)) for _ in member]
    built["references_energy"] = [list(e + rng.normal(0.5 * m, 0.2, 4)) for e, m in zip(energy, member)]
    # the references train on halves of the audited patients, never on held-in or population rows
    audited = built["role"].isin(["member", "nonmember"]).to_numpy()
    built["references_in"] = [
        [bool(a and i % 2), bool(a and i % 2), bool(a and not i % 2), bool(a and not i % 2)]
        for i, a in enumerate(audited)
    ]
    built["neighbours_energy"] = [list(e + rng.normal(0.3 * m, 0.1, 3)) for e, m in zip(energy, member)]
    attacks = ("zlib", "min_k", "min_k_plus_plus", "lira_offline", "lira_online", "rmia", "blind", "neighbourhood")
    settings = MetricSettings(
        protocols=("corrected",), attacks=attacks, alphas=(0.1,), thresholds=("population",), fprs=(0.1,),
        draws=2, seed=0, bootstrap=3, level="patient", attack_params={"min_k": {"fraction": 0.5}},
    )  # fmt: skip
    metrics = point_estimates(attack_metrics(built, settings))
    auc = metrics[metrics.metric == "auc"].set_index("attack")["value"]
    assert set(auc.index) == set(attacks) and auc.between(0, 1).all()
    assert auc["blind"] == pytest.approx(1.0)  # the words tell the sets apart


def test_attacks_that_compare_rows_keep_their_whole_table_scores_under_the_published_protocol():
    # The published protocol re-scores the drawn member rows alone; RMIA would then find no
    # population row (an error before) and LiRA's pooled sigma would change with the draw.
    # By hand (test_rmia_by_hand): m1 0.75 > n1 0.25, so the one pair ranks right: AUC 1.
    t = rmia_table().assign(source="a")
    t["references_in"] = [[False] * len(r) for r in t["references_energy"]]
    settings = MetricSettings(
        protocols=("published", "corrected"), attacks=("rmia", "lira_offline"), alphas=(0.1,),
        thresholds=("population",), fprs=(0.1,), draws=2, seed=0, bootstrap=0, level="sample",
        attack_params={"rmia": {"a": 1.0}},
    )  # fmt: skip
    metrics = point_estimates(attack_metrics(t, settings))
    auc = metrics[(metrics.metric == "auc") & (metrics.attack == "rmia")].set_index("protocol")["value"]
    assert auc.to_dict() == {"published": 1.0, "corrected": 1.0}
    assert get_attack("rmia").reads_other_rows() and get_attack("lira_offline").reads_other_rows()
    assert not get_attack("lira_offline", {"variance": "per_sample"}).reads_other_rows()
    assert not get_attack("loss").reads_other_rows()
