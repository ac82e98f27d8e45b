"""The mechanism fit of the white-box canaries (`mlmia.defences.mechanism_fit`): it recovers the
simulated mechanism's amplitude, noise and rate, its estimate is the accountant's epsilon for the
mechanism simulated (the goal of issue 43: within 20% at the default claims of epsilon 8 and 4),
its lower limit stays below a correct mechanism's epsilon, and each faulty mechanism makes it
fail the audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from opacus.accountants.utils import get_noise_multiplier
from scipy import stats

from mlmia.core.errors import UserError
from mlmia.defences.audit import audit_target
from mlmia.defences.dp_sgd import accountant_epsilon
from mlmia.defences.gradient_canaries import simulated_record
from mlmia.defences.mechanism_fit import fit_mechanism

BETA = 0.05 / 3  # the white-box family's share of 1 - 0.95
#: the default DP targets' claim (an earlier recipe's, docs/dp_canary_design.md): q = 1/7, 35 steps, delta = 1 / 6,446 lines
DEFAULT = {"rate": 1 / 7, "steps": 35, "delta": 1 / 6446}
#: the CI world's: 411 lines, q = 1/13, 26 steps
CI = {"rate": 1 / 13, "steps": 26, "delta": 1 / 411}
SETTINGS = {
    "confidence": 0.95,
    "check_level": 1e-6,
    "gradient_canaries": {"guess_share": 0.03, "score": "likelihood_ratio"},
}


def sigma_for(epsilon: float, claim: dict) -> float:
    return get_noise_multiplier(target_epsilon=epsilon, target_delta=claim["delta"], sample_rate=claim["rate"],
                                steps=claim["steps"], accountant="rdp")  # fmt: skip


def record_of(sigma, claim, count, seed, amplitude=1.0, rate=None, noise_scale=1.0):
    """The library's simulated record of a mechanism claiming sigma and the claim's q (included
    canaries join at `rate`, default q, and add `amplitude`; the noise noise_scale x sigma; 64
    sentinels), with the data units of each step's Poisson batch that the mechanism checks read."""
    rng = np.random.default_rng(seed)
    record = simulated_record(sigma, claim["rate"], claim["steps"], count, rng, sentinels=64,
                              noise_scale=noise_scale, amplitude=amplitude, join_rate=rate)  # fmt: skip
    return record | {"units": 6446, "data_batch": rng.binomial(6446, claim["rate"], claim["steps"])}


def test_the_fit_recovers_the_simulated_mechanism():
    """amplitude 1, noise sigma, rate q: each within 5 of its standard errors, which are small
    (140,000 observations of included canaries: the rate within a few percent)."""
    sigma = sigma_for(8.0, DEFAULT)
    fit = fit_mechanism(record_of(sigma, DEFAULT, 8000, seed=1), "rdp", DEFAULT["delta"], BETA)
    assert fit["mech_noise"] == pytest.approx(sigma, rel=0.01)
    assert abs(fit["mech_rate"] - DEFAULT["rate"]) < 5 * fit["mech_rate_se"] and fit["mech_rate_se"] < 0.01
    assert abs(1 / fit["mech_noise_multiplier"] - 1 / sigma) < 5 * fit["mech_rho_se"]
    assert abs(fit["mech_amplitude"] - 1) < 0.1
    # the estimate is the accountant's epsilon at the fitted (noise multiplier, rate)
    assert fit["mech_estimate"] == pytest.approx(
        accountant_epsilon("rdp", fit["mech_noise_multiplier"], fit["mech_rate"], DEFAULT["steps"], DEFAULT["delta"])
    )


@pytest.mark.parametrize("epsilon", [8.0, 4.0])
def test_the_estimate_is_within_a_fifth_of_epsilon_at_the_default_claim(epsilon):
    """The issue's goal, on 8 simulated runs of the default DP targets' claim with their 8,000
    canaries: every estimate within 20% of the accountant's epsilon."""
    sigma = sigma_for(epsilon, DEFAULT)
    claimed = accountant_epsilon("rdp", sigma, DEFAULT["rate"], DEFAULT["steps"], DEFAULT["delta"])
    for seed in range(8):
        fit = fit_mechanism(record_of(sigma, DEFAULT, 8000, seed), "rdp", DEFAULT["delta"], BETA)
        assert abs(fit["mech_estimate"] / claimed - 1) < 0.2, (seed, fit["mech_estimate"])
        assert fit["mech_lcl"] < fit["mech_estimate"]


@pytest.mark.parametrize(("claim", "count", "epsilon"), [(CI, 500, 8.0), (DEFAULT, 2000, 8.0), (DEFAULT, 2000, 1.0)])
def test_the_lower_limit_stays_below_a_correct_mechanism(claim, count, epsilon):
    """40 simulated runs of a correct mechanism: the limit at 1 - beta above the accountant's
    epsilon in at most the binomial margin of beta (0.1% tail); the limit at the checks' level never."""
    sigma = sigma_for(epsilon, claim)
    claimed = accountant_epsilon("rdp", sigma, claim["rate"], claim["steps"], claim["delta"])
    trips, check_trips = 0, 0
    for seed in range(40):
        fit = fit_mechanism(record_of(sigma, claim, count, seed), "rdp", claim["delta"], BETA, 1e-6)
        trips += fit["mech_lcl"] > claimed
        check_trips += fit["mech_check_lcl"] > claimed
    assert trips <= int(stats.binom.ppf(0.999, 40, BETA)) and check_trips == 0


@pytest.mark.parametrize(
    "fault",
    [{"noise_scale": 0.0}, {"noise_scale": 0.1}, {"amplitude": 10.0}, {"rate": 10 / 13}],
    ids=["no_noise", "noise_tenth", "no_clipping", "ten_times_the_rate"],
)
def test_each_faulty_mechanism_fails_the_audit(fault):
    """A mechanism claimed at epsilon 1 on the CI world's shape: without noise, with sigma / 10,
    without clipping (the canary of norm 10 C passes whole) or sampling at 10 q (the accountant told
    q): the fit's limit at the checks' level is above 1, and the audit names it; the correct one passes."""
    sigma = sigma_for(1.0, CI)
    info = {"dp": {"epsilon": 1.0, "delta": CI["delta"], "accountant": "rdp", "noise_multiplier": sigma}}
    correct = audit_target("t", info, SETTINGS, whitebox=record_of(sigma, CI, 500, 0))
    assert not any("mechanism fit" in failure for failure in correct["failures"])
    audit = audit_target("t", info, SETTINGS, whitebox=record_of(sigma, CI, 500, 0, **fault))
    row = audit["canary_audits"][0]
    assert row["mech_check_lcl"] > 1.0 and row["mech_estimate"] > 2.0
    assert any(failure.startswith("the white-box mechanism fit's lower limit eps >= ") for failure in audit["failures"])
    if fault == {"noise_scale": 0.0}:
        assert math.isinf(row["mech_estimate"])


def test_no_signal_estimates_zero_and_bad_input_is_refused():
    """Canaries that never reach the observations (amplitude 0): no signal, estimate 0."""
    fit = fit_mechanism(record_of(1.0, CI, 500, 3, amplitude=0.0), "rdp", CI["delta"], BETA)
    assert fit["mech_estimate"] == 0.0 and fit["mech_lcl"] == 0.0
    record = record_of(1.0, CI, 500, 3)
    with pytest.raises(UserError, match="beta must lie in"):
        fit_mechanism(record, "rdp", CI["delta"], 1.5)
    with pytest.raises(UserError, match="delta must lie in"):
        fit_mechanism(record, "rdp", 0.0, BETA)
    few = record | {"observed": record["observed"][:1, :3], "included": np.array([True, False, True]), "count": 3}
    with pytest.raises(UserError, match="at least 20 observations"):
        fit_mechanism(few, "rdp", CI["delta"], BETA)


def test_simulated_record_of_the_library_is_the_claimed_mechanism():
    """The library's simulation (used by the bench and the Gaussian analysis' rule) fits as it should."""
    sigma = sigma_for(4.0, DEFAULT)
    record = simulated_record(sigma, DEFAULT["rate"], DEFAULT["steps"], 4000, np.random.default_rng(2), sentinels=64)
    fit = fit_mechanism(record, "rdp", DEFAULT["delta"], BETA)
    assert fit["mech_noise"] == pytest.approx(sigma, rel=0.02) and abs(fit["mech_rate"] - 1 / 7) < 0.02
