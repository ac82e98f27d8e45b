"""Multivariate LiRA (Rossi, Aerni, Zhang and Tramèr, arXiv 2506.05126): its Gaussian log densities
against scipy, its shrinkage against scikit-learn, its one-sided offline test against a brute-force
solution, its reduction to univariate LiRA on one slot, its refusals, and a simulated sparse signal
that the summed loss dilutes."""

import functools
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal
from sklearn.covariance import OAS, ledoit_wolf, ledoit_wolf_shrinkage

from mlmia.attacks import get_attack
from mlmia.attacks.lira_multivariate import (
    COVARIANCES,
    diagonal_fit,
    ledoit_wolf_intensity,
    oas_intensity,
    one_sided_lrt,
    shrunk_fit,
)
from mlmia.core.errors import UserError
from mlmia.metrics.classification import auc

OFFLINE, ONLINE = "lira_multivariate_offline", "lira_multivariate_online"
#: fixed reference losses (6 references x 4 slots) and a target's
X = np.array([
    [2.1, 0.4, 3.3, 1.0],
    [1.7, 0.9, 2.8, 1.4],
    [2.6, 0.2, 3.9, 0.7],
    [1.9, 0.6, 3.1, 1.9],
    [2.4, 0.5, 2.5, 1.1],
    [2.0, 1.1, 3.6, 0.9],
])  # fmt: skip
S = np.array([1.5, 0.3, 3.0, 0.6])


def frame(target, references, member, roles=None) -> pd.DataFrame:
    """An attack table of loss vectors: rows of (target vector, [reference vectors], [IN flags]),
    written as the score tables hold them (token_logp = −loss; per_pattern: the vector itself, one
    slot per pattern) with the energies (mean losses) univariate LiRA reads."""
    n = len(target)
    t = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i}" for i in range(n)]})
    t["role"] = roles or ["member"] * n
    t["target_token_logp"] = [list(-np.asarray(s, float)) for s in target]
    t["references_token_logp"] = [[list(-np.asarray(r, float)) for r in refs] for refs in references]
    t["target_per_pattern"] = [list(np.asarray(s, float)) for s in target]
    t["references_per_pattern"] = [[list(np.asarray(r, float)) for r in refs] for refs in references]
    t["references_in"] = [list(m) for m in member]
    t["target_energy"] = [float(np.mean(s)) for s in target]
    t["references_energy"] = [[float(np.mean(r)) for r in refs] for refs in references]
    return t


# ------------------------------------------------------------------ against scipy and scikit-learn


def test_log_densities_match_scipy():
    diagonal = diagonal_fit(X, 1e-9)
    expected = multivariate_normal(X.mean(0), np.diag(X.var(0))).logpdf(S)
    assert diagonal.log_density(S) == pytest.approx(expected, rel=1e-12)
    for shrinkage in ("oas", "ledoit_wolf"):
        g = shrunk_fit(X, 1e-9, shrinkage)
        assert g.log_density(S) == pytest.approx(multivariate_normal(g.mu, g.covariance).logpdf(S), rel=1e-12)


@pytest.mark.parametrize("shrinkage", ["oas", "ledoit_wolf"])
def test_online_statistic_is_scipys_log_density_ratio_with_sklearns_covariance(shrinkage):
    """IN: references 0 to 2, OUT: 3 to 5; each side's Σ = D C D with C scikit-learn's shrunk
    covariance of the slots standardised by their own standard deviations D (ddof 0)."""
    member = [True, True, True, False, False, False]
    t = frame([S], [X], [member])
    attack = get_attack(ONLINE, {"covariance": "shrinkage", "shrinkage": shrinkage})

    def fitted(x):
        sd = x.std(0)
        shrunk = ledoit_wolf(x / sd)[0] if shrinkage == "ledoit_wolf" else OAS().fit(x / sd).covariance_
        return multivariate_normal(x.mean(0), sd[:, None] * shrunk * sd[None, :])

    expected = fitted(X[:3]).logpdf(S) - fitted(X[3:]).logpdf(S)
    assert attack.statistic(t)[0] == pytest.approx(expected, rel=1e-10)
    diagonal = get_attack(ONLINE, {"covariance": "diagonal"}).statistic(t)[0]
    by_hand = multivariate_normal(X[:3].mean(0), np.diag(X[:3].var(0))).logpdf(S) - multivariate_normal(
        X[3:].mean(0), np.diag(X[3:].var(0))
    ).logpdf(S)
    assert diagonal == pytest.approx(by_hand, rel=1e-10)


def test_shrinkage_intensities_match_sklearn():
    rng = np.random.default_rng(3)
    for n, p in ((4, 30), (8, 30), (5, 10), (40, 6)):
        x = rng.normal(size=(n, 1)) * 0.8 + rng.normal(size=(n, p))
        y = x - x.mean(0)
        assert ledoit_wolf_intensity(y) == pytest.approx(ledoit_wolf_shrinkage(x), rel=1e-10, abs=1e-12)
        assert oas_intensity(y) == pytest.approx(OAS().fit(x).shrinkage_, rel=1e-10, abs=1e-12)
        sd = x.std(0)
        for name, reference in (("ledoit_wolf", ledoit_wolf(x / sd)[0]), ("oas", OAS().fit(x / sd).covariance_)):
            np.testing.assert_allclose(shrunk_fit(x, 1e-9, name).covariance, sd[:, None] * reference * sd[None, :])


def test_references_that_agree_keep_the_floor():
    """Slots where the references agree get σ = min_sigma; where they agree in every slot, Σ =
    min_sigma² I (the shrunk correlation of nothing is the identity)."""
    x = X.copy()
    x[:, 1] = 0.5
    g = shrunk_fit(x, 0.01, "oas")
    assert g.sigma[1] == 0.01 and g.covariance[1, 1] == pytest.approx(1e-4)
    same = shrunk_fit(np.ones((4, 3)), 0.01, "ledoit_wolf")
    np.testing.assert_allclose(same.covariance, 1e-4 * np.eye(3))
    t = frame([S + 0.1], [np.tile(S, (6, 1))], [[False] * 6])
    for covariance in COVARIANCES:
        assert np.isfinite(get_attack(OFFLINE, {"covariance": covariance}).statistic(t)).all()


# ------------------------------------------------------------------ the one-sided offline test


def brute_force_lower(z: np.ndarray, r: np.ndarray) -> float:
    """T⁻ = zᵀR⁻¹z − min over δ ≥ 0 of (z + δ)ᵀR⁻¹(z + δ), the minimum by trying every set of free
    coordinates (the optimum of a convex quadratic on the orthant is the unconstrained optimum on
    the face of its free coordinates)."""
    inverse = np.linalg.inv(r)
    best = float(z @ inverse @ z)
    for size in range(1, z.size + 1):
        for free in itertools.combinations(range(z.size), size):
            f = list(free)
            delta = np.zeros(z.size)
            delta[f] = np.linalg.solve(inverse[np.ix_(f, f)], -(inverse @ z)[f])
            if (delta[f] >= 0).all():
                best = min(best, float((z + delta) @ inverse @ (z + delta)))
    return float(z @ inverse @ z) - best


def test_one_sided_statistic_against_brute_force_and_closed_form():
    g = shrunk_fit(X, 1e-9, "ledoit_wolf")
    r = g.chol @ g.chol.T
    for target in (S, X.mean(0) + 0.5, X.mean(0) - 0.3, np.array([1.0, 1.2, 2.0, 2.5])):
        z = (target - g.mu) / g.sigma
        lower, higher = one_sided_lrt(z, g)
        assert lower == pytest.approx(brute_force_lower(z, r), abs=1e-9)
        assert higher == pytest.approx(brute_force_lower(-z, r), abs=1e-9)
    d = diagonal_fit(X, 1e-9)
    z = (S - d.mu) / d.sigma
    assert one_sided_lrt(z, d) == pytest.approx((sum(v * v for v in z if v < 0), sum(v * v for v in z if v > 0)))


def test_offline_is_one_sided():
    """A loss far below the OUT references in one slot is evidence of membership; the same distance
    above is not (the OUT log density cannot tell them apart)."""
    mu, sd = X.mean(0), X.std(0)
    low, high = mu.copy(), mu.copy()
    low[2] -= 3 * sd[2]
    high[2] += 3 * sd[2]
    t = frame([low, high], [X, X], [[False] * 6] * 2)
    for covariance in ("diagonal", "isotropic", "shrinkage", "patterns"):
        statistic = get_attack(OFFLINE, {"covariance": covariance}).statistic(t)
        assert statistic[0] < 0 < statistic[1]
    assert get_attack(OFFLINE, {"covariance": "diagonal"}).statistic(t) == pytest.approx([-3.0, 3.0])  # its z


# ------------------------------------------------------------------ one slot: univariate LiRA


@pytest.mark.parametrize("covariance", ["pooled", "isotropic", "diagonal", "shrinkage", "patterns"])
def test_one_slot_is_univariate_lira(covariance):
    rng = np.random.default_rng(1)
    n = 6
    targets = [rng.uniform(1, 3, 1) for _ in range(n)]
    references = [list(rng.uniform(1, 3, (8, 1))) for _ in range(n)]
    member = [[j % 2 == i % 2 for j in range(8)] for i in range(n)]
    roles = ["member", "nonmember"] * 3
    t = frame(targets, references, member, roles)
    offline = frame(targets, references, [[False] * 8] * n, roles)
    params = {"covariance": covariance}
    lira = {"variance": "global" if covariance == "pooled" else "per_sample"}  # pooled: LiRA's fix_variance
    np.testing.assert_allclose(
        get_attack(ONLINE, params).statistic(t), get_attack("lira_online", lira).statistic(t), rtol=1e-12
    )
    np.testing.assert_allclose(
        get_attack(OFFLINE, params).statistic(offline),
        get_attack("lira_offline", lira).statistic(offline),
        rtol=1e-12,
    )


# ------------------------------------------------------------------ refusals


def test_a_reference_of_another_length_is_refused():
    short = [X[0], X[1][:3], *X[2:]]
    t = frame([S], [short], [[True, True, True, False, False, False]])
    for name in (OFFLINE, ONLINE):
        with pytest.raises(UserError) as info:
            get_attack(name).statistic(t)
        message = str(info.value)
        assert "\n" not in message and name in message and "sample s0" in message
        assert "reference 2 of 6 lists 3 values and the target 4 (references_token_logp)" in message
    with pytest.raises(UserError, match=r"reference 2 of 6 lists 3 values and the target 4 \(references_per_pattern\)"):
        get_attack(ONLINE, {"covariance": "patterns"}).statistic(t)


def test_parameters_pools_and_roles():
    for key, value in (("covariance", "full"), ("shrinkage", "graphical_lasso"), ("min_sigma", -1.0)):
        with pytest.raises(UserError, match=f"config key attacks.{ONLINE}.{key}"):
            get_attack(ONLINE, {key: value})
    with pytest.raises(UserError, match=f"attacks.{OFFLINE}: unknown parameter.*variance"):
        get_attack(OFFLINE, {"variance": "global"})
    with pytest.raises(UserError, match=f"attacks.{OFFLINE}.min_sigma"):
        get_attack(OFFLINE, {"min_sigma": 0})
    # a per-sample covariance needs two references a side (online: a pool of 4), a pooled one a
    # sample IN for two of 3; online needs an online pool
    assert get_attack(OFFLINE).references_lack(2, False) is None
    assert "at least 4" in get_attack(ONLINE, {"covariance": "isotropic"}).references_lack(3, True)
    assert get_attack(ONLINE).references_lack(3, True) is None
    assert "references.online: true" in get_attack(ONLINE).references_lack(8, False)
    # the defaults: offline isotropic (row-local), online a σ pooled over the rows
    assert not get_attack(OFFLINE).reads_other_rows() and get_attack(ONLINE).reads_other_rows()
    # online: no statistic for rows no reference trained on; a per-sample Σ refuses one reference a side
    t = frame([S, S], [X, X], [[True, True, True, False, False, False]] * 2, ["member", "population"])
    statistic = get_attack(ONLINE).statistic(t)
    assert np.isfinite(statistic[0]) and np.isnan(statistic[1])
    with pytest.raises(UserError, match="sample s0 has 1 IN reference"):
        get_attack(ONLINE, {"covariance": "diagonal"}).statistic(frame([S], [X], [[True] + [False] * 5]))
    with pytest.raises(UserError, match="sample s0 has no OUT reference"):
        get_attack(OFFLINE).statistic(frame([S], [X], [[True] * 6]))


# ------------------------------------------------------------------ a sparse signal

#: members per class, slots, slots carrying the signal, the signal (in units of a model's per-slot
#: noise, 1) and the references (online: half IN), as the default pool's 8
N, SLOTS, SIGNAL, DELTA, REFERENCES = 2000, 40, 3, 3.0, 8


@functools.cache
def sparse_world(online: bool, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Each sample's slots have their own loss level (uniform on [1, 5]); every model adds its own
    noise N(0, 1) per slot; a model trained on the sample has its loss lower by DELTA at SIGNAL of
    the SLOTS slots (the same slots for every model), elsewhere unchanged."""
    rng = np.random.default_rng(seed)
    member = np.r_[np.ones(N, bool), np.zeros(N, bool)]
    targets, references, flags = [], [], []
    for i, is_member in enumerate(member):
        level = rng.uniform(1.0, 5.0, SLOTS)
        shift = np.zeros(SLOTS)
        shift[rng.choice(SLOTS, SIGNAL, replace=False)] = DELTA
        inside = np.array([online and j % 2 == i % 2 for j in range(REFERENCES)])
        references.append(list(level + rng.normal(0.0, 1.0, (REFERENCES, SLOTS)) - inside[:, None] * shift))
        targets.append(level + rng.normal(0.0, 1.0, SLOTS) - is_member * shift)
        flags.append(inside)
    roles = ["member" if m else "nonmember" for m in member]
    return frame(targets, references, flags, roles), member


@pytest.mark.parametrize("online", [False, True], ids=["offline", "online"])
@pytest.mark.parametrize("covariance", ["pooled", "isotropic"])  # the defaults: online, offline
def test_a_signal_in_few_slots_beats_the_summed_loss(online, covariance):
    """The summed loss carries SIGNAL · DELTA against noise over all SLOTS slots; the vector keeps it
    in its SIGNAL slots. The margin is the simulation's size only: an AUC from N members and N
    non-members has a standard error of at most 1 / (2 √N) (van Dantzig's bound, A (1 − A) / N ≤
    1 / (4N)), a difference of two at most 1 / √N; the multivariate AUC must beat univariate LiRA's
    (the better of its pooled and per-sample σ) by two of those, 0.045."""
    t, member = sparse_world(online)
    variant = "online" if online else "offline"
    univariate = max(
        auc(member, get_attack(f"lira_{variant}", {"variance": variance}).member_score(t))
        for variance in ("global", "per_sample")
    )
    multivariate = auc(member, get_attack(f"lira_multivariate_{variant}", {"covariance": covariance}).member_score(t))
    assert multivariate - univariate > 2 / math.sqrt(N)
