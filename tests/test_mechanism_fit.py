"""The mechanism fit of the white-box canaries (`mlmia.defences.mechanism_fit`), a parameter
check: its fitted values are the moment formulas, their intervals cover the simulated mechanism's
parameters and its test trips a correct mechanism at about its level, each faulty mechanism and a
broken audit fail it, and the model-based lower limit is the PRV accountant's lower bound at the
fitted parameters' limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from opacus.accountants import PRVAccountant
from opacus.accountants.utils import get_noise_multiplier
from scipy import stats

from mlmia.core.errors import UserError
from mlmia.defences.audit import audit_target
from mlmia.defences.dp_sgd import accountant_epsilon
from mlmia.defences.gradient_canaries import simulated_record
from mlmia.defences.mechanism_fit import PRV_FLOOR, fit_mechanism, model_epsilon_lcl
from mlmia.defences.report import (
    FIT_LABEL,
    MODEL_LIMIT_LABEL,
    audit_findings,
    bounds_markdown,
    bounds_table,
    checks_table,
    one_run_markdown,
    one_run_table,
)

BETA = 0.05 / 3  # the white-box family's share of 1 - 0.95
#: the shipped DP targets' recipe (config dp_eps8 / dp_eps4 / dp_eps1 of the default world): q = 0.2, 100 steps,
#: delta = 1 / 1,210 training lines, 1,000 gradient canaries and 64 sentinels
SHIPPED = {"rate": 0.2, "steps": 100, "delta": 1 / 1210, "units": 1210, "canaries": 1000}
#: the CI world's: 411 lines, q = 1/13, 26 steps
CI = {"rate": 1 / 13, "steps": 26, "delta": 1 / 411, "units": 411, "canaries": 500}
SETTINGS = {
    "confidence": 0.95,
    "check_level": 1e-6,
    "gradient_canaries": {"guess_share": 0.03, "score": "likelihood_ratio"},
}
#: the shipped eps 8 target's noise multiplier (models/dp_eps8/train_info.json: RDP eps 7.995 at q 0.2, 100 steps)
SIGMA_8 = 1.2854


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
    return record | {"units": claim["units"], "data_batch": rng.binomial(claim["units"], claim["rate"], claim["steps"])}


def test_the_fit_is_the_method_of_moments():
    """The fitted values are the moment formulas on the record itself: v = mean z^2 on the free
    coordinates, m1, m2 on the included canaries, a = (m2 - v) / m1, q = m1^2 / (m2 - v),
    s / a = sqrt(v) m1 / (m2 - v); each interval holds its estimate, and at the shipped eps 8
    target's shape they lie near the simulated 1, 0.2 and sigma."""
    record = record_of(SIGMA_8, SHIPPED, SHIPPED["canaries"], seed=1)
    fit = fit_mechanism(record, BETA, 1e-6)
    inside = record["observed"][:, : record["count"]][:, record["included"]]
    free = np.concatenate([record["observed"][:, : record["count"]][:, ~record["included"]],
                           record["observed"][:, record["count"] :]], axis=1)  # fmt: skip
    m1, m2, v = inside.mean(), np.mean(inside**2), np.mean(free**2)
    assert fit["mech_amplitude"] == pytest.approx((m2 - v) / m1)
    assert fit["mech_rate"] == pytest.approx(m1**2 / (m2 - v))
    assert fit["mech_noise_multiplier"] == pytest.approx(math.sqrt(v) * m1 / (m2 - v))
    assert fit["mech_noise"] == pytest.approx(math.sqrt(v)) and fit["mech_observations"] == inside.size
    for key, truth, within in (("mech_amplitude", 1.0, 0.25), ("mech_rate", 0.2, 0.05),
                               ("mech_noise_multiplier", SIGMA_8, 0.3)):  # fmt: skip
        assert fit[f"{key}_low"] < fit[key] < fit[f"{key}_high"], key
        assert abs(fit[key] - truth) < within, (key, fit[key])
    assert (fit["mech_claimed_noise_multiplier"], fit["mech_claimed_rate"]) == (SIGMA_8, 0.2)
    assert fit["mech_passed"] and fit["mech_p_value"] >= 1e-6 and fit["mech_level"] == 1e-6


#: simulated runs of a correct mechanism per claim, and the most trips (or misses) of a level-0.05 check
#: among them that pass: P(X <= 33 | Binomial(440, 0.05)) = 0.991, P(X <= 33 | Binomial(440, 0.10)) = 0.043
RUNS, ALPHA = 440, 0.05
NOMINAL_TRIPS = int(stats.binom.ppf(0.99, RUNS, ALPHA))


@pytest.mark.parametrize("epsilon", [8.0, 4.0])
def test_a_correct_mechanism_trips_the_check_and_escapes_the_intervals_at_about_the_level(epsilon):
    """440 seeded runs of the CORRECT mechanism at the shipped recipe (q = 0.2, T = 100, 1,000
    canaries, 64 sentinels; sigma 1.2854 for eps 8, the RDP accountant's for eps 4, 2.036), the
    intervals and the test at alpha = beta = 0.05. Each count (the test's trips; each of the three
    intervals missing its truth; the model-based limit's premise failing, sigma above the noise
    multiplier's upper or q below the rate's lower limit) is Binomial(440, p) with p at most 0.05
    for a check that holds its level: it must stay at or below 33, the 0.99 quantile of
    Binomial(440, 0.05). A check tripping at twice its level (p = 0.10, mean 44) passes with
    probability 0.043 (440 is about the fewest runs for which both hold: 425 with 32; 200 runs
    cannot tell 0.05 from 0.10 at these odds)."""
    assert stats.binom.cdf(NOMINAL_TRIPS, RUNS, ALPHA) >= 0.99 and stats.binom.cdf(NOMINAL_TRIPS, RUNS, 0.10) <= 0.05
    sigma = SIGMA_8 if epsilon == 8.0 else sigma_for(epsilon, SHIPPED)
    truth = {"mech_noise_multiplier": sigma, "mech_rate": SHIPPED["rate"], "mech_amplitude": 1.0}
    trips, misses, premise = 0, dict.fromkeys(truth, 0), 0
    for seed in range(RUNS):
        rng = np.random.default_rng([seed, 11])
        record = simulated_record(sigma, SHIPPED["rate"], SHIPPED["steps"], SHIPPED["canaries"], rng, sentinels=64)
        fit = fit_mechanism(record, ALPHA, ALPHA)
        trips += not fit["mech_passed"]
        for key, value in truth.items():
            misses[key] += not fit[f"{key}_low"] <= value <= fit[f"{key}_high"]
        premise += sigma > fit["mech_noise_multiplier_high"] or SHIPPED["rate"] < fit["mech_rate_low"]
    assert trips <= NOMINAL_TRIPS, trips
    assert all(count <= NOMINAL_TRIPS for count in misses.values()), misses
    assert premise <= NOMINAL_TRIPS, premise


@pytest.mark.parametrize(
    ("fault", "reading"),
    [({"noise_scale": 0.5}, "noise multiplier below sigma"), ({"amplitude": 4.0}, "noise multiplier below sigma"),
     ({"rate": 0.4}, "rate above q"), ({"noise_scale": 0.0}, "noise multiplier below sigma")],
    ids=["noise_half", "clipping_times_4", "rate_times_2", "no_noise"],
)  # fmt: skip
def test_each_faulty_mechanism_fails_the_audit(fault, reading):
    """The shipped eps 8 target's claim (sigma 1.2854, q 0.2): a trainer with half the noise,
    clipping to 4 C (the canary's amplitude 4), sampling at 2 q, or without noise fits a leakier
    mechanism, at p < 1e-6 (the checks' level), and the audit names the fit, the parameter off and
    the fitted values against the claim; the correct one passes."""
    info = {"dp": {"epsilon": 7.99, "delta": SHIPPED["delta"], "accountant": "rdp", "noise_multiplier": SIGMA_8}}
    correct = audit_target("t", info, SETTINGS, whitebox=record_of(SIGMA_8, SHIPPED, SHIPPED["canaries"], 0))
    assert not any("mechanism fit" in failure for failure in correct["failures"])
    audit = audit_target("t", info, SETTINGS, whitebox=record_of(SIGMA_8, SHIPPED, SHIPPED["canaries"], 0, **fault))
    row = audit["canary_audits"][0]
    assert row["mech_p_value"] < 1e-6 and not row["mech_passed"] and row["mech_side"] == "above"
    (failure,) = [f for f in audit["failures"] if f.startswith("the white-box mechanism fit (p = ")]
    assert f"leakier than claimed: {reading}" in failure and "against sigma 1.285, rate " in failure
    assert row["mech_epsilon_lcl"] > 8.0  # the model-based limit says as much, and fails nothing


def test_a_broken_audit_whose_canaries_add_nothing_fails():
    """Included canaries that never reach the observations (amplitude 0): no signal, so the fitted
    values are NaN and the intervals wide; the first moment is 0 where the claim implies
    q / sigma x s = 0.2, and the audit fails, naming a broken audit."""
    info = {"dp": {"epsilon": 7.99, "delta": SHIPPED["delta"], "noise_multiplier": SIGMA_8}}
    audit = audit_target("t", info, SETTINGS, whitebox=record_of(SIGMA_8, SHIPPED, SHIPPED["canaries"], 3, 0.0))
    row = audit["canary_audits"][0]
    assert row["mech_p_value"] < 1e-6 and row["mech_side"] == "below" and row["mech_mean_z"] < -10
    assert row["mech_epsilon_lcl"] == 0.0
    (failure,) = [f for f in audit["failures"] if "mechanism fit" in f]
    assert "the canaries reach the observations at a rate below q, or with less than their norm: the audit itself is " \
           "broken" in failure and "n.a. (no signal)" in failure  # fmt: skip


def test_a_claim_without_noise_is_not_checked_and_the_epsilon_1_shape_is_not_identified():
    """No DP (sigma 0): nothing to test. At eps 1 (sigma 6.1) the second moment cannot tell q from
    a: the intervals of q and s / a are unbounded where the excess second moment is not resolved
    from 0 (seed 0), and the check still passes."""
    record = record_of(0.0, SHIPPED, 200, 2, amplitude=10.0)
    fit = fit_mechanism(record, BETA, 1e-6)
    assert math.isnan(fit["mech_p_value"]) and fit["mech_passed"] and fit["mech_noise_multiplier"] == 0.0
    assert fit["mech_amplitude"] == pytest.approx(10.0)
    sigma = sigma_for(1.0, SHIPPED)
    fit = fit_mechanism(record_of(sigma, SHIPPED, SHIPPED["canaries"], 0), BETA, 1e-6)
    assert math.isinf(fit["mech_noise_multiplier_high"]) and math.isinf(fit["mech_rate_high"])
    assert fit["mech_passed"] and model_epsilon_lcl(fit, SHIPPED["steps"], SHIPPED["delta"]) == 0.0


def test_a_record_without_included_canaries_and_bad_input_are_refused():
    record = record_of(1.0, CI, 500, 3)
    with pytest.raises(UserError, match=r"^mechanism fit: target 'dp_eps8': no included canary in its white-box "
                                        r"record \(500 canaries, 0 included, 26 steps\)"):  # fmt: skip
        fit_mechanism(record | {"included": np.zeros(500, bool)}, BETA, 1e-6, "dp_eps8")
    with pytest.raises(UserError, match="beta must lie in"):
        fit_mechanism(record, 1.5, 1e-6)
    with pytest.raises(UserError, match="level must lie in"):
        fit_mechanism(record, BETA, 0.0)
    with pytest.raises(UserError, match="the claim needs sigma >= 0 and a rate in"):
        fit_mechanism(record | {"sample_rate": 0.0}, BETA, 1e-6)
    few = record | {"observed": record["observed"][:1, :3], "included": np.array([True, False, True]), "count": 3}
    with pytest.raises(UserError, match="at least 20 observations"):
        fit_mechanism(few, BETA, 1e-6)
    with pytest.raises(UserError, match="delta must lie in"):
        model_epsilon_lcl(fit_mechanism(record, BETA, 1e-6), 26, 0.0)


def test_the_model_based_limit_is_the_prv_lower_bound_at_the_limits():
    """At the shipped eps 8 claim's own parameters the limit is the PRV accountant's lower error
    bound, 7.00 (its estimate 7.01, upper bound 7.02), below the RDP accountant's 7.99, which is an
    upper bound on the mechanism's epsilon; it falls with the noise multiplier, rises with q, is
    computed at `PRV_FLOOR` below it, infinite without noise and 0 without a rate."""
    claim = {"mech_noise_multiplier_high": SIGMA_8, "mech_rate_low": 0.2}
    steps, delta = SHIPPED["steps"], SHIPPED["delta"]
    limit = model_epsilon_lcl(claim, steps, delta)
    prv = PRVAccountant()
    prv.history = [(SIGMA_8, 0.2, steps)]
    upper = prv.get_epsilon(delta)
    assert limit == pytest.approx(7.00, abs=0.01) and upper - 0.03 < limit < upper
    assert limit < accountant_epsilon("rdp", SIGMA_8, 0.2, steps, delta) - 0.9
    assert model_epsilon_lcl(claim | {"mech_noise_multiplier_high": 2.0}, steps, delta) < limit
    assert model_epsilon_lcl(claim | {"mech_rate_low": 0.25}, steps, delta) > limit
    floor = model_epsilon_lcl(claim | {"mech_noise_multiplier_high": PRV_FLOOR}, steps, delta)
    assert model_epsilon_lcl(claim | {"mech_noise_multiplier_high": 0.1}, steps, delta) == floor > 40
    assert math.isinf(model_epsilon_lcl(claim | {"mech_noise_multiplier_high": 0.0}, steps, delta))
    assert model_epsilon_lcl(claim | {"mech_rate_low": 0.0}, steps, delta) == 0.0
    assert model_epsilon_lcl(claim | {"mech_noise_multiplier_high": math.inf}, steps, delta) == 0.0


def test_the_tables_and_findings_show_the_fit_as_a_parameter_check():
    """The per-target table prints the fit as the fitted noise multiplier and rate with their
    intervals against the claimed sigma and q, p and the verdict, in its own column, never as a
    share of epsilon; the model-based limit in a column of its own; the findings check the fit."""
    sigma = sigma_for(8.0, CI)
    info = {"dp": {"epsilon": 8.0, "delta": CI["delta"], "noise_multiplier": sigma}}
    audits = [audit_target(name, info, SETTINGS, whitebox=record_of(sigma, CI, CI["canaries"], 0, noise_scale=scale))
              for name, scale in (("ok", 1.0), ("half_noise", 0.5))]  # fmt: skip
    table = bounds_table(audits)
    assert list(table["whitebox_mech_passed"]) == [True, False] and list(table["verdict"]) == ["passes", "fails"]
    header, _, *rows = bounds_markdown(table, 0.01, 0.95).splitlines()[:4]
    columns = header.split(" | ")
    fit_column = next(i for i, name in enumerate(columns) if FIT_LABEL in name)
    assert columns[fit_column + 1] == f"{MODEL_LIMIT_LABEL} (/ε)"
    ok, broken = (row.split(" | ")[fit_column] for row in rows)
    fitted = audits[0]["canary_audits"][0]
    assert ok.startswith(f"{fitted['mech_noise_multiplier']:.3g} [{fitted['mech_noise_multiplier_low']:.3g}, ")
    assert f"] vs {sigma:.3g}; " in ok and f"] vs {CI['rate']:.3g}; p = " in ok and ok.endswith(", passes")
    assert broken.endswith("**FAILS**")
    text = one_run_markdown(
        one_run_table(audits),
        checks_table(audits),
        {
            **SETTINGS,
            "gradient_canaries": {**SETTINGS["gradient_canaries"], "count": 500, "norm": 10.0, "runs": 1},
            "canaries": {"guess_share": 0.2},
        },
    )
    assert "fitted amplitude [interval]" in text and "mechanism fit estimate" not in text
    findings = {(f.finding, f.scope): f for f in audit_findings(audits, 0.95)}
    assert findings[("mechanism_fit", "ok")].holds and not findings[("mechanism_fit", "half_noise")].holds
