"""The simulation behind bench/dp_power.py (`mlmia.defences.fault_simulation`): the records it
simulates are the mechanism each trainer would produce, each check's rule flags what the audit's
own functions flag, and the cases a hand computation decides come out so, at the shipped recipe's
shape (n = 1,210 units, q = 1/5, T = 100, D = 256, 1,000 canaries and 64 sentinels)."""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from mlmia.defences.audit import TOLERANCE, gaussian_audit, one_run_canary_audit
from mlmia.defences.fault_simulation import (
    CHECKS,
    CORRECT,
    FAULTS,
    Claim,
    audit_power,
    fdp_threshold,
    flag_counts,
    flags,
    mildest_caught,
    target_power,
    trainer_record,
)
from mlmia.defences.gradient_canaries import canary_scores, mechanism_checks, normalised, simulated_record
from mlmia.defences.mechanism_fit import fit_mechanism

#: the shipped dp_eps8 and dp_eps1 claims (their train_info.json: sigma found by Opacus' RDP accountant)
EPS8 = Claim(epsilon=7.994899964175473, sigma=1.285400390625, rate=0.2, steps=100, delta=1 / 1210, units=1210,
             divisor=256.0)  # fmt: skip
EPS1 = dataclasses.replace(EPS8, epsilon=0.9931191915942899, sigma=6.09375)
FAULT = {t.label: t for t in FAULTS}


def p_values(claim: Claim, trainer, runs: int, seed: int, check: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(runs):
        rows = mechanism_checks(trainer_record(claim, trainer, rng), level=claim.level)
        found.append(next(row["p_value"] for row in rows if row["check"] == check))
    return np.array(found)


def test_a_correct_trainer_s_noise_check_p_values_are_uniform():
    """Under the claim the sentinels' sum of squares over (sigma C / D)^2 is chi-square(T e) exactly,
    so the two-sided p-value is U(0, 1): 200 runs against it by Kolmogorov-Smirnov, at a loose level."""
    p = p_values(EPS8, CORRECT, 200, 1, "noise")
    assert stats.kstest(p, "uniform").pvalue > 1e-3
    assert np.sum(p < 0.05) <= stats.binom.ppf(0.999, 200, 0.05)


def test_the_faults_a_hand_computation_decides():
    """noise x 0.25: the sentinels' T e = 6,400 squares sum to about 6,400 / 16 = 400 claimed
    variances, where chi-square(6,400) lies within 6,400 +- 5 x 113: p far below 1e-6 in every run.
    Sampling at 2 q: the data units of 100 batches are Binomial(121,000, 0.4), mean 48,400, against
    q n T = 24,200 +- 139 (sd): z near 170, flagged in every run. The step's batch as divisor: the
    noise sd follows 1 / B_t, a slope of -1 on log batch (about 10 sds of its estimate; docs/dp.md)."""
    for label, check in [("noise multiplier × 0.25", "noise"), ("sampling rate × 2", "Poisson batch"),
                         ("divisor the step's batch", "noise by batch")]:  # fmt: skip
        assert np.all(p_values(EPS8, FAULT[label], 20, 2, check) < EPS8.level), label


def test_the_clipping_fault_is_invisible_to_the_noise_check():
    """Units clipped to 4 C with the noise still sigma C: the sentinels see the correct trainer's
    noise, drawn from the same stream (the canaries' amplitude takes no draw), so the noise check's
    p-values are the correct trainer's, run for run, and flag at its nominal level."""
    clipped = p_values(EPS8, FAULT["clipping norm × 4"], 100, 3, "noise")
    assert np.array_equal(clipped, p_values(EPS8, CORRECT, 100, 3, "noise"))
    assert np.sum(clipped < 0.05) <= stats.binom.ppf(0.999, 100, 0.05)


def test_a_record_is_what_the_trainer_writes():
    """The data batches come last (the observations are those of a record without them); Opacus'
    divisor recorded as the plan scales the normalised observations by D / floor(n q) = 256 / 242,
    recorded as itself it gives the correct trainer's; a clipping norm of k C makes the canary's
    step k and leaves the sentinels alone."""
    args = (EPS8.sigma, EPS8.rate, EPS8.steps, 300)
    plain = simulated_record(*args, np.random.default_rng(4), sentinels=64)
    full = simulated_record(*args, np.random.default_rng(4), sentinels=64, units=1210)
    assert np.array_equal(plain["observed"], full["observed"]) and "data_batch" not in plain
    assert full["data_batch"].shape == (EPS8.steps,) and abs(full["data_batch"].mean() - 242) < 6
    records = {label: trainer_record(EPS8, trainer, np.random.default_rng(5))
               for label, trainer in [("correct", CORRECT), *FAULT.items()]}  # fmt: skip
    correct = normalised(records["correct"])
    assert records["divisor floor(n q), records D"]["divisor"] == 256.0
    np.testing.assert_allclose(normalised(records["divisor floor(n q), records D"]), correct * 256 / 242, rtol=1e-12)
    assert records["divisor floor(n q), records floor(n q)"]["divisor"] == 242.0
    np.testing.assert_allclose(normalised(records["divisor floor(n q), records floor(n q)"]), correct, rtol=1e-12)
    clipped = normalised(records["clipping norm × 4"])
    joined = (clipped - correct)[:, : EPS8.count]
    assert set(np.round(np.unique(joined), 9)) == {0.0, 3.0}  # a joining canary adds 4 where it added 1
    assert np.array_equal(clipped[:, EPS8.count :], correct[:, EPS8.count :])


def test_each_rule_flags_what_the_audit_s_own_functions_flag():
    """The rules that take shortcuts (the f-DP bound by its threshold of right guesses, the
    Gaussian analysis by the claim's cached simulated trips) and the mechanism fit's against
    `one_run_canary_audit`, `gaussian_audit` and `fit_mechanism`, on records
    each rule flags and records it does not."""
    rng = np.random.default_rng(6)
    guesses, fewest = fdp_threshold(EPS8)
    assert guesses == 100 and fewest == 201  # at eps 8 even 200 right guesses certify less
    seen = {name: set() for name in CHECKS}
    cases = [(EPS1, CORRECT), (EPS1, FAULT["noise multiplier × 0.25"]), (EPS8, FAULT["noise multiplier × 0.5"]),
             (EPS8, FAULT["clipping norm × 1.5"])]  # the last: a fit limit the accountant must decide  # fmt: skip
    for claim, trainer in cases:
        record = trainer_record(claim, trainer, rng)
        scores = canary_scores(record, score=claim.score)
        bound = one_run_canary_audit(scores, record["included"], claim.guess_share, claim.delta, claim.beta)
        gauss = gaussian_audit(record, scores, claim.score, claim.epsilon, claim.delta, claim.beta)
        fit = fit_mechanism(record, claim.beta, claim.level)
        expected = {"f-DP bound": bound["epsilon_lb"] > claim.epsilon + TOLERANCE,
                    "Gaussian analysis": gauss["gauss_fails"],
                    "mechanism fit": fit["mech_p_value"] < claim.level}  # fmt: skip
        for name, flagged in expected.items():
            assert CHECKS[name](record, claim) == flagged, (trainer.label, claim.epsilon, name)
            seen[name].add(flagged)
    assert all(seen[name] == {True, False} for name in ("f-DP bound", "Gaussian analysis", "mechanism fit")), seen


def test_the_bench_writes_its_page(tmp_path):
    """bench/dp_power.py end to end on one claim and one run per trainer: the page's tables, and
    counts that are the same on a second call with the same seed."""
    import dp_power

    out = tmp_path / "power.md"
    dp_power.main(["--models", "dp_eps8", "--runs", "1", "--null-runs", "1", "--out", str(out)])
    text = out.read_text()
    for heading in ("## False positives: the correct trainer", "### ε = 7.99 (σ = 1.2854)",
                    "## The goal: noise multiplier × 0.5 at ε = 7.99", "- command: `python bench/dp_power.py"):  # fmt: skip
        assert heading in text, heading
    assert "| sampling rate × 2 | 18.10 | 1.00 [0.03, 1.00] |" in text  # Poisson batch flags it, its unit's eps
    counts = flag_counts(EPS8, FAULT["sampling rate × 2"], 3, 0, (0.05,))
    assert counts == flag_counts(EPS8, FAULT["sampling rate × 2"], 3, 0, (0.05,))
    assert counts[None]["Poisson batch"] == 3 and counts[None]["any check"] == 3 and counts[None]["f-DP bound"] == 0


def test_the_mildest_caught_fault_of_each_kind_at_a_target_s_shape():
    """`target_power` on a small claim (200 canaries, 30 steps, 20 runs), every check at level and
    beta 1e-6. Noise x 0.25: the 30 x 64 = 1,920 sentinels' squares sum to about 1,920 / 16 = 120
    claimed variances, where chi-square(1,920) lies within 1,920 +- 5 x 62: the noise check flags
    every run, so the noise ladder is caught at x 0.25 or milder. Sampling at 2 q: the data units
    of 30 batches, Binomial(36,300, 0.4), mean 14,520, against q n T = 7,260 +- 76 (sd): the
    Poisson batch check flags every run. The correct trainer: each of the 6 checks is a test at
    level <= 1e-6 (the bounds at confidence 1 - 1e-6), so any flag in 20 runs has probability <=
    6 x 20 x 1e-6."""
    claim = dataclasses.replace(EPS8, count=200, steps=30).at(1e-6)
    found = target_power(claim, 20)
    assert found["runs"] == 20 and found["power"] == 0.8 and found["false_positive"] == 0.0
    assert set(found["mildest"]) == {"noise multiplier", "clipping norm", "sampling rate"}
    noise, rate = found["mildest"]["noise multiplier"], found["mildest"]["sampling rate"]
    assert noise is not None and noise["power"] >= 0.8 and noise["checks"]
    assert rate is not None and rate["power"] >= 0.8 and rate["checks"]
    assert found["ladder"]["noise multiplier"] == ["× 0.95", "× 0.9", "× 0.75", "× 0.5", "× 0.25"]
    if noise["size"] == "× 0.25":
        assert "noise" in noise["checks"]
    if rate["size"] == "× 2":
        assert "Poisson batch" in rate["checks"]


def test_the_mildest_caught_is_the_first_of_each_kind_at_the_power():
    """`mildest_caught` (the bench's and the audit record's rule): the first size in each ladder
    whose count reaches 0.8 of the runs; kinds with none, and faults not simulated, left out."""
    counts = {"noise multiplier × 0.95": {"noise": 7}, "noise multiplier × 0.9": {"noise": 8},
              "noise multiplier × 0.5": {"noise": 10}, "clipping norm × 1.5": {"noise": 0}}  # fmt: skip
    found = mildest_caught(counts, 10, "noise")
    assert {kind: t.label for kind, t in found.items()} == {"noise multiplier": "noise multiplier × 0.9"}


def test_audit_power_skips_a_target_without_a_claim_or_canaries():
    """No dp record or sigma 0: no claim to simulate; no gradient canaries: no white-box audit to
    simulate; power_runs 0: not measured, and the record says so."""
    audit = {"gradient_canaries": {"count": 200, "sentinels": 64, "norm": 10.0, "guess_share": 0.2,
                                   "score": "likelihood_ratio"},
             "check_level": 1e-6, "confidence": 0.95, "power_runs": 0}  # fmt: skip
    dp = {"epsilon": 8.0, "noise_multiplier": 1.2854, "sample_rate": 0.2, "steps": 30, "delta": 1e-3, "units": 1210,
          "gradient_divisor": 256.0, "max_grad_norm": 1.0, "accountant": "rdp"}  # fmt: skip
    assert audit_power(None, audit, 3) is None and audit_power({"dp": None}, audit, 3) is None
    assert audit_power({"dp": {**dp, "noise_multiplier": 0.0}}, audit, 3) is None
    assert audit_power({"dp": dp}, {**audit, "gradient_canaries": {"count": 0}}, 3) is None
    assert audit_power({"dp": dp}, audit, 3) == {"runs": 0}
    assert audit_power({"dp": dp}, {**audit, "power_runs": 2}, 3)["runs"] == 2


#: runs of a correct trainer per nominal-level test, and the most trips among them that pass: a check
#: at level 0.05 trips Binomial(440, p) times, P(X <= 33 | p = 0.05) = 0.991, P(X <= 33 | p = 0.10) = 0.043
#: (tests/test_mechanism_fit.py holds the fit to the same bound)
RUNS, ALPHA = 440, 0.05
NOMINAL_TRIPS = int(stats.binom.ppf(0.99, RUNS, ALPHA))


def test_each_check_flags_a_correct_trainer_at_most_at_its_level():
    """440 records of the correct trainer at the shipped eps-8 shape, every check of the audit at the
    nominal level 0.05 (`Claim.at`: 0.05 for the mechanism checks and the fit, confidence 0.95 for
    the f-DP bound and the Gaussian analysis): each check's flags stay at or below 33, so a check
    that flags a correct trainer at twice its level fails this test with probability 0.96. The
    mechanism checks and the fit are tests of size 0.05 and must flag at least once in 440
    (P(X = 0 | 0.05) = 1.6e-10), so that one that never rejects (a p-value stuck at 1) fails too;
    the bounds are conservative (a correct trainer's sits far below the claim) and may never."""
    assert stats.binom.cdf(NOMINAL_TRIPS, RUNS, ALPHA) >= 0.99 and stats.binom.cdf(NOMINAL_TRIPS, RUNS, 0.10) <= 0.05
    claim = EPS8.at(ALPHA)
    rng = np.random.default_rng(17)
    counts = dict.fromkeys(CHECKS, 0)
    for _ in range(RUNS):
        for name, flagged in flags(trainer_record(claim, CORRECT, rng), claim).items():
            if name in counts:
                counts[name] += flagged
    assert all(count <= NOMINAL_TRIPS for count in counts.values()), counts
    assert all(counts[name] > 0 for name in ("Poisson batch", "noise", "noise by batch", "mechanism fit")), counts


def test_the_gaussian_rule_s_guard_keeps_a_correct_mechanism_below_its_level():
    """The Gaussian analysis fails a target only where its lower limit exceeds the accountant's
    epsilon and 60 simulated runs of the claimed mechanism never put it there
    (`audit.gaussian_audit`). Its guard, on a claim where the limit of a correct mechanism trips
    often: an epsilon set at the 0.85 quantile of the limit over 200 runs, so that it trips in
    about 0.15 of runs, three times the rule's 5%. The limit alone would fail about 66 of 440
    correct runs (more than 33, or the case is too mild to test the guard: asserted); the rule
    fails at most 0.15 x 0.85^60 = 9e-6 of them, and must stay at or below 33.
    Each run's guard draws its own 60 runs (its seed), as a new claim would."""
    from mlmia.defences.audit import gaussian_false_alarms

    sigma, q, steps, count, delta, beta = 1.0, 0.1, 20, 500, 1e-5, 0.05 / 3
    rng = np.random.default_rng(23)

    def run():
        record = simulated_record(sigma, q, steps, count, rng, sentinels=64)
        return record, canary_scores(record, score="likelihood_ratio")

    limits = []
    for _ in range(200):
        record, scores = run()
        limits.append(gaussian_audit(record, scores, "likelihood_ratio", np.inf, delta, beta)["gauss_lcl"])
    epsilon = float(np.quantile(limits, 0.85))
    tripped, failed = 0, 0
    for seed in range(RUNS):
        record, scores = run()
        found = gaussian_audit(record, scores, "likelihood_ratio", np.inf, delta, beta)
        if found["gauss_lcl"] > epsilon + TOLERANCE:
            tripped += 1
            failed += gaussian_false_alarms(record, "likelihood_ratio", epsilon, delta, beta, seed=seed) == 0
    assert tripped > NOMINAL_TRIPS and failed <= NOMINAL_TRIPS, (tripped, failed)
    # the audit's own path: the limit above epsilon, the guard's runs trip, the limit is reported only
    record, scores = run()
    found = gaussian_audit(record, scores, "likelihood_ratio", float(np.quantile(limits, 0.05)), delta, beta)
    assert found["gauss_lcl"] > np.quantile(limits, 0.05) and found["gauss_sim_reps"] == 60
    assert found["gauss_sim_trips"] > 0 and not found["gauss_fails"]
