"""The DP audit of one target: every check that can catch a DP claim that is not true, and the
rule that a target fails when one does.

What is checked (`audit_target`), each against the accountant's epsilon at its delta (from the
target's train_info.json, `accountant_record`):

- the white-box one-run audit (`mlmia.defences.gradient_canaries`): the gradient canaries'
  scores, guesses on the highest and lowest (`one_run_canary_audit`), and the f-DP analysis'
  lower bound on epsilon at the accountant's delta (Mahloujifar, Melis and Chaudhuri, ICML
  2025), with Steinke, Nasr and Jagielski's (NeurIPS 2023) of the same guesses beside it at the
  same confidence, for comparison only (it never feeds the failure rule, so it takes no share
  of the confidence); with `dp_audit.gradient_canaries.runs` k > 1, on the canaries of k training
  runs of the target pooled (`pooled_record`: k m canaries, each run's own bits, the guesses of
  one run; the fit and the Gaussian analysis below on all observations, the checks per run);
- the mechanism checks of the same run (`mechanism_checks`: the Poisson batches against q n,
  the noise on canary-free coordinates against sigma C / expected batch, the noise against the
  step's batch), each failing below its level (`dp_audit.check_level`);
- the mechanism fit of the same observations (`mlmia.defences.mechanism_fit`): a parameter
  check, the noise multiplier, rate and amplitude of the subsampled Gaussian mechanism they fit,
  each with its interval at the white-box family's confidence, against the claim's sigma, q and
  1, and the test that the observations fit the claimed mechanism, failing the target below the
  checks' level like a mechanism check; beside it, reported only, the model-based lower limit on
  epsilon (the PRV accountant at the fitted parameters' limits, resting on the Gaussian model);
- the Gaussian analysis of the canaries' scores (`gaussian_audit`; an estimate of mu-GDP);
- the black-box one-run audit on the final model (`mlmia.defences.token_canaries`: canaries of
  new tokens, the same guesses and bounds);
- for the targets of the tables spec's group dp, every attack of the zoo
  (`attack_bounds`: threshold chosen on one half of members and non-members, the bound
  eps >= log((TPR_low - delta) / FPR_high) and its complement form computed on the other with
  Clopper-Pearson limits; Jagielski, Ullman and Oprea, NeurIPS 2020; Nasr, Song, Thakurta,
  Papernot and Carlini, IEEE S&P 2021; all attacks of a target together at confidence c,
  Bonferroni), with the target's utility (`utility`) and strongest attack (`strongest`).

A bound above the accountant's epsilon, or a failed mechanism check, is a bug in the training,
the accounting or the bound, never a result: `target_failures` names each, `check_target`
fails the target's check job in one line naming the target, every failing check or bound and
the accountant's epsilon. The families of bounds a target has (white-box, black-box canaries,
attacks) share the confidence (`joint_confidence`, Bonferroni), so that all its bounds hold
together with confidence c: a correct trainer fails the bound rule with probability at most
1 - c, and a mechanism check with probability at most its level.

What the attack bounds assume and what they do not (docs/dp.md): the Clopper-Pearson limits
treat the samples as independent trials, while here they come from one trained model and
members enter as whole patients. The one-run bounds need no such assumption: the canaries'
inclusion is randomised independently.

Utility (`utility`): on the experiment's non-member samples, the held-out masked-LM loss is the
mean over samples of the masked energy (each sample's cross-entropy at ceil(0.15 T) masked
positions, averaged over the K masking patterns); the pseudo-perplexity is
exp(sum_i T_i E_i / sum_i T_i), E_i the normalized energy (each content position masked alone,
mean cross-entropy over the sample's T_i content tokens), i.e. exp of the per-token
pseudo-log-likelihood averaged over all tokens of all non-member samples (Salazar, Liang,
Nguyen and Kirchhoff, "Masked language model scoring", ACL 2020). Intervals: 95% percentile
intervals from the patient bootstrap (`mlmia.metrics.bootstrap`, the metrics' own replicates).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.defences.gradient_canaries import canary_scores, mechanism_checks, sentinel_scores, simulated_record
from mlmia.defences.mechanism_fit import describe_fit, fit_failure, fit_mechanism, model_epsilon_lcl
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.gaussian_audit import gaussian_one_run
from mlmia.metrics.intervals import percentile_interval
from mlmia.metrics.privacy_bounds import fdp_one_run_epsilon, one_run_correct, one_run_epsilon, threshold_then_bound

#: the one-run audits of a target: gradient canaries during training, token canaries on the final model
AUDITS = ("white-box", "black-box")
TOLERANCE = 1e-9
#: simulated runs of the claimed mechanism behind a failure of the Gaussian lower limit (`gaussian_audit`)
GAUSS_SIM_REPS = 60
#: the level of the Gaussian analysis' normality check (it informs; it fails nothing)
NORMALITY_LEVEL = 0.05

BOUND_COLUMNS = ["target", "attack", "label", "epsilon_lb", "threshold", "confidence", "delta", "members",
                 "nonmembers"]  # fmt: skip


def attack_bounds(
    table: pd.DataFrame,
    attacks: dict[str, dict | None],
    delta: float,
    confidence: float,
    seed: int,
    target: str = "",
) -> pd.DataFrame:
    """One row per attack: its lower bound on epsilon (`threshold_then_bound` on the member and
    non-member rows of an attack table, at confidence 1 - (1 - `confidence`) / len(attacks)), the
    threshold chosen, and the counts. `attacks`: {name: its parameters (None: defaults)}."""
    if not attacks:
        raise UserError(f"DP audit: target {target!r}: no attack to bound with")
    role = table["role"].astype(str).to_numpy()
    members, nonmembers = role == "member", role == "nonmember"
    each = 1.0 - (1.0 - confidence) / len(attacks)
    rows = []
    for name, params in attacks.items():
        attack = get_attack(name, params)
        score = np.asarray(attack.member_score(table.reset_index(drop=True)), dtype=float)
        try:
            bound, threshold = threshold_then_bound(score[members], score[nonmembers], delta, each, seed)
        except UserError as exc:
            raise UserError(f"DP audit: target {target!r}, attack {name!r}: {exc}") from None
        rows.append((target, name, attack.label or name, bound, threshold, each, delta, int(members.sum()),
                     int(nonmembers.sum())))  # fmt: skip
    return pd.DataFrame(rows, columns=BOUND_COLUMNS)


def _resampled(table: pd.DataFrame, universe: dict | None, seed: int, bootstrap: int):
    """The rows of each patient-bootstrap replicate (the metrics' replicates: same seed, strata, universe)."""
    strata = list(zip(table["role"].astype(str), table["source"].astype(str)))
    resampler = PatientResampler(strata, table["group_id"].to_numpy(), seed, universe)
    for b in range(bootstrap):
        yield resampler.rows(b)


def utility(
    table: pd.DataFrame,
    masked_column: str,
    normalized_column: str,
    universe: dict | None = None,
    seed: int = 0,
    bootstrap: int = 0,
    where: str = "DP audit",
    reference_column: str | None = None,
) -> dict:
    """The held-out masked-LM loss (mean masked energy) and the pseudo-perplexity (exp of the
    token-weighted mean normalized energy) over the non-member rows of an attack table, each with
    its patient-bootstrap 95% interval (NaN without replicates). With `reference_column` (the
    experiment's reference's masked energy; for the DP targets the public model they start from):
    the reference's loss on the same rows (`reference_mlm_loss`) and the gain, the reference's loss
    less the target's (`mlm_loss_gain`, positive where the target predicts the held-out notes
    better), its interval paired (both from the same replicates)."""
    for column in (masked_column, normalized_column, "n_tokens", *([reference_column] if reference_column else [])):
        if column not in table.columns:
            raise UserError(f"{where}: the attack table lacks column {column!r} (the utility needs it)")
    part = table[table["role"].astype(str) == "nonmember"].reset_index(drop=True)
    if part.empty:
        raise UserError(f"{where}: no non-member samples to measure the utility on")
    loss = part[masked_column].to_numpy(dtype=float)
    energy = part[normalized_column].to_numpy(dtype=float)
    tokens = part["n_tokens"].to_numpy(dtype=float)
    public = part[reference_column].to_numpy(dtype=float) if reference_column else np.full(len(part), math.nan)
    if not (np.all(np.isfinite(loss)) and np.all(np.isfinite(energy)) and np.all(tokens > 0)):
        raise UserError(f"{where}: a non-member's energy is not finite or its token count not positive")
    if reference_column and not np.all(np.isfinite(public)):
        raise UserError(f"{where}: a non-member's reference energy is not finite")

    def values(rows: np.ndarray) -> tuple[float, float, float, float]:
        return (float(loss[rows].mean()), float(math.exp(np.sum(tokens[rows] * energy[rows]) / np.sum(tokens[rows]))),
                float(public[rows].mean()), float(public[rows].mean() - loss[rows].mean()))  # fmt: skip

    point = values(np.arange(len(part)))
    replicates = [values(rows) for rows in _resampled(part, universe, seed, bootstrap) if len(rows)]
    out = {"nonmember_samples": len(part), "nonmember_tokens": int(tokens.sum())}
    for i, key in enumerate(("mlm_loss", "pseudo_perplexity", "reference_mlm_loss", "mlm_loss_gain")):
        if i >= 2 and not reference_column:
            out |= {key: math.nan, f"{key}_ci_low": math.nan, f"{key}_ci_high": math.nan}
            continue
        low, high = percentile_interval([r[i] for r in replicates]) if replicates else (math.nan, math.nan)
        out |= {key: point[i], f"{key}_ci_low": low, f"{key}_ci_high": high}
    return out


def one_run_canary_audit(
    scores: np.ndarray,
    included: np.ndarray,
    guess_share: float,
    delta: float = 0.0,
    beta: float = 0.05,
    runs: int = 1,
) -> dict:
    """The one-run audit of m canaries each included with probability 1/2 (`included`, the true
    bits) from the auditor's scores (higher = included). The auditor guesses "in" for the
    ceil(`guess_share` m / 2) highest scores and "out" for as many lowest, abstaining on the rest;
    `guess_share` is fixed before the scores are seen (trying several spends the confidence).
    With `runs` k > 1 the m canaries are those of k runs pooled (`pooled_record`) and the guesses
    stay those of one run: ceil(`guess_share` m / (2 k)) on each side, counted from one run's
    m / k canaries (bench/canary_design.py's `--runs` divides the share by k, the same count up to
    the float rounding of share / k x k).
    The bound `epsilon_lb` is `fdp_lb`, the f-DP analysis' lower bound on epsilon at `delta` (the
    accountant's, per canary; `fdp_one_run_epsilon`), valid with probability 1 - `beta`.
    `steinke_lb` (Steinke, Nasr and Jagielski, NeurIPS 2023, `one_run_epsilon`) of the same
    guesses at the same `beta` is reported beside it, never combined with it: taking the larger
    of the two would need each at `beta` / 2, and the f-DP analysis is the tighter one
    (Mahloujifar et al.; with delta > 0, where Steinke et al.'s 2 m delta term dominates, by far:
    tests/test_dp.py). Halving `beta` for a bound that adds nothing is what left the CI world's
    eps = 8 audit at 0 (161 of 200 guesses right, m delta = 1.7)."""
    scores = np.asarray(scores, dtype=float).ravel()
    bits = np.asarray(included).ravel()
    m = len(scores)
    if not 0 < guess_share <= 1:
        raise UserError(f"one_run_canary_audit: guess_share must lie in (0, 1], got {guess_share!r}")
    if m < 2 or len(bits) != m:
        raise UserError(
            f"one_run_canary_audit: need at least 2 canaries with one inclusion bit each, got {m}, {len(bits)}"
        )
    if runs < 1 or m % runs:
        raise UserError(f"one_run_canary_audit: {m} canaries are not {runs} runs of as many each")
    k = min(m // 2, math.ceil(guess_share * (m // runs) / 2))
    correct = one_run_correct(scores, bits, k, k)
    steinke = one_run_epsilon(m, 2 * k, correct, delta, beta)
    fdp = fdp_one_run_epsilon(m, 2 * k, correct, delta, beta)
    return {"canaries": m, "inserted": int(bits.astype(bool).sum()), "guesses": 2 * k, "correct": correct,
            "steinke_lb": steinke, "fdp_lb": fdp, "epsilon_lb": fdp, "beta": beta,
            "delta": delta}  # fmt: skip


def gaussian_false_alarms(record: dict, score: str, epsilon: float, delta: float, beta: float,
                          reps: int = GAUSS_SIM_REPS, seed: int = 0) -> int:  # fmt: skip
    """In how many of `reps` simulated runs of the mechanism a white-box record claims (its sigma,
    q, steps and canary count; `simulated_record`) the Gaussian analysis' lower limit (`score`,
    `beta`, at `delta`) exceeds `epsilon`: how often a correct mechanism trips it."""
    steps, count = record["observed"].shape[0], record["count"]
    rng = np.random.default_rng([seed, 43])
    trips = 0
    for _ in range(reps):
        sim = simulated_record(record["sigma"], record["sample_rate"], steps, count, rng)
        scores, bits = canary_scores(sim, score=score), sim["included"]
        found = gaussian_one_run(scores[bits], scores[~bits], delta, beta)
        trips += found["gauss_lcl"] > epsilon + TOLERANCE
    return trips


def gaussian_audit(record: dict, scores: np.ndarray, score: str, epsilon: float, delta: float, beta: float) -> dict:
    """The Gaussian analysis of the white-box canaries (`mlmia.metrics.gaussian_audit`): the
    estimate of epsilon at `delta` (an ESTIMATE under the Gaussian assumption, never a bound), its
    lower confidence limit at 1 - `beta` (the white-box family's), and the normality check on the
    sentinels' scores (`sentinel_scores`; the excluded canaries' where a record has none).

    Whether a lower limit above the accountant's `epsilon` fails the target (gauss_fails): only
    where `GAUSS_SIM_REPS` simulated runs of the claimed mechanism (`gaussian_false_alarms`) never
    trip it. A correct mechanism then fails with probability below 5%: if its trip rate p is below
    5%, the limit trips with probability p; if not, the simulation shows no trip with probability
    (1 - p)^60 <= 0.95^60 = 0.046 (and both together with at most max_p p (1 - p)^60 < 0.01).
    Where a simulated run trips, the Gaussian assumption is not good enough for this claim and the
    limit is reported only (gauss_fails False, gauss_sim_trips the count)."""
    bits = np.asarray(record["included"]).astype(bool)
    null = sentinel_scores(record, score=score)
    found = gaussian_one_run(scores[bits], scores[~bits], delta, beta, null if len(null) else None, NORMALITY_LEVEL)
    found |= {"gauss_sim_trips": None, "gauss_sim_reps": 0, "gauss_fails": False}
    if math.isfinite(epsilon) and found["gauss_lcl"] > epsilon + TOLERANCE:
        trips = gaussian_false_alarms(record, score, epsilon, delta, beta)
        found |= {"gauss_sim_trips": trips, "gauss_sim_reps": GAUSS_SIM_REPS, "gauss_fails": trips == 0}
    return found


#: what every run of one target pooled by `pooled_record` must share (the claim and the normalisation)
POOLED_FACTS = ("count", "sigma", "sample_rate", "units", "divisor", "unit", "steps")


def pooled_record(records: list[dict], target: str = "") -> dict:
    """The white-box records of k training runs of one target (`gradient_canaries.read_record`:
    the target and its audit replicas, `dp_audit.gradient_canaries.runs`) as one record of k m
    canaries (bench/canary_design.py's `simulated_audit` pools its simulated runs with it): the
    canaries' observation columns of every run side by side, then every run's sentinels; each
    run's own inclusion bits (each run's batches stay in its own record, `pooled_checks`). The runs
    must share the claim and the
    normalisation (`POOLED_FACTS`: the same settings, other seeds), so that a canary's score, the
    fit and the Gaussian analysis read the pooled observations as one run of k m canaries
    (canaries are independent given the mechanism, within a run and across runs). One record is
    returned as it is."""
    if not records:
        raise UserError(f"DP audit: target {target!r}: no white-box record to pool")
    first = records[0]
    if len(records) == 1:
        return first
    for run, record in enumerate(records[1:], start=2):
        for key in POOLED_FACTS:
            if record.get(key) != first.get(key):
                raise UserError(f"DP audit: target {target!r}: run {run} has {key} {record.get(key)!r} where run 1 has "
                                f"{first.get(key)!r}; the pooled runs must be trained with the same settings")  # fmt: skip
    count = first["count"]
    observed = [r["observed"][:, :count] for r in records] + [r["observed"][:, count:] for r in records]
    return {**first, "observed": np.concatenate(observed, axis=1),
            "included": np.concatenate([np.asarray(r["included"]).astype(bool) for r in records]),
            "count": count * len(records)}  # fmt: skip


def pooled_checks(records: list[dict], level: float) -> list[dict]:
    """The mechanism checks (`gradient_canaries.mechanism_checks`) of each pooled run, named by run
    ("noise (run 2)") where there are several; one run's as they are."""
    if len(records) == 1:
        return mechanism_checks(records[0], level=level)
    return [row | {"check": f"{row['check']} (run {run})"}
            for run, record in enumerate(records, start=1) for row in mechanism_checks(record, level=level)]  # fmt: skip


def strongest(metrics: pd.DataFrame, attacks: list[str], fpr: float) -> dict:
    """The attack with the highest AUC (corrected protocol, point estimate) and its AUC and TPR at `fpr`."""
    est = metrics[(metrics["protocol"] == "corrected") & metrics["replicate"].isna()]

    def cell(metric: str, attack: str, at: float | None = None) -> tuple[float, float, float]:
        part = est[(est["metric"] == metric) & (est["attack"] == attack)]
        if at is not None:
            part = part[np.isclose(part["fpr"].astype(float), at)]
        if len(part) != 1:
            raise UserError(f"DP audit: the metrics hold {len(part)} rows of {metric} of attack {attack!r}")
        row = part.iloc[0]
        return float(row["value"]), float(row["ci_low"]), float(row["ci_high"])

    aucs = {attack: cell("auc", attack)[0] for attack in attacks}
    best = max(attacks, key=lambda a: (aucs[a], a))
    auc, tpr = cell("auc", best), cell("tpr_at_fpr", best, fpr)
    return {"strongest_attack": best, "auc": auc[0], "auc_ci_low": auc[1], "auc_ci_high": auc[2],
            "tpr": tpr[0], "tpr_ci_low": tpr[1], "tpr_ci_high": tpr[2]}  # fmt: skip


# ----------------------------------------------------------------------------------- one target


def read_train_info(model_dir) -> dict | None:
    """A trained model's train_info.json (`mlmia.models.training`), None where it has none."""
    path = Path(model_dir) / "train_info.json"
    return json.loads(path.read_text()) if path.is_file() else None


def accountant_record(info: dict | None, target: str) -> dict:
    """A target's privacy facts from its train_info.json: the accountant's epsilon (inf: trained
    without DP), delta and the patient-level guarantee. A model without a `dp` record is refused."""
    dp = (info or {}).get("dp")
    if not dp:
        raise UserError(
            f"DP audit: target {target!r}: its train_info.json has no dp record (train it with a dp setting)"
        )
    patient = dp.get("patient_level") or {}
    epsilon = math.inf if dp.get("epsilon") is None else float(dp["epsilon"])
    patient_eps = math.inf if patient.get("epsilon") is None else float(patient["epsilon"])
    patient_delta = math.nan if patient.get("delta") is None else float(patient["delta"])
    return {
        "accountant_epsilon": epsilon,
        "target_epsilon": math.nan if dp.get("target_epsilon") is None else float(dp["target_epsilon"]),
        "delta": float(dp["delta"]),
        "accountant": dp.get("accountant", "rdp"),
        "unit": dp.get("unit", "sample"),
        "fault": dp.get("fault"),
        "noise_multiplier": float(dp.get("noise_multiplier", math.nan)),
        "max_grad_norm": math.nan if dp.get("max_grad_norm") is None else float(dp["max_grad_norm"]),
        "clipped_share": math.nan if dp.get("clipped_share") is None else float(dp["clipped_share"]),
        "training_units": int(dp.get("units", 0)),
        "samples_per_patient_max": patient.get("k"),
        "patient_epsilon": patient_eps,
        "patient_delta": patient_delta,
        "patient_vacuous": bool(patient.get("vacuous", not patient_delta < 1)) if math.isfinite(patient_eps) else False,
    }


def attack_audit(
    item: dict,
    table: pd.DataFrame,
    metrics: pd.DataFrame,
    record: dict,
    universe: dict | None,
    settings: dict,
    target: str,
) -> tuple[dict, pd.DataFrame]:
    """The attacks' part of a target's audit (`mlmia.study.plans.dp.audit_plan`'s `item`): one
    row per attack (`attack_bounds`), and the target's best bound, strongest attack and utility.
    `settings`: confidence, seed, fpr (config `dp_audit`), bootstrap and bootstrap_seed (the metrics')."""
    where = f"DP audit: target {target!r} (experiment {item['experiment']!r})"
    found = attack_bounds(table, item["attacks"], record["delta"], settings["confidence"], settings["seed"], target)
    best = found.loc[found["epsilon_lb"].idxmax()] if found["epsilon_lb"].max() > 0 else None
    summary = {"experiment": item["experiment"], "epsilon_lb": float(found["epsilon_lb"].max()),
               "bound_attack": best["attack"] if best is not None else "none (all 0)",
               "bound_threshold": float(best["threshold"]) if best is not None else math.nan,
               "members": int(found["members"].iloc[0]), "nonmembers": int(found["nonmembers"].iloc[0]),
               **strongest(metrics, list(item["attacks"]), settings["fpr"]),
               **utility(table, item["masked_column"], item["normalized_column"], universe,
                         settings["bootstrap_seed"], settings["bootstrap"], where,
                         item.get("reference_column"))}  # fmt: skip
    return summary, found


def audit_target(
    target: str,
    info: dict | None,
    settings: dict,
    *,
    whitebox: dict | list[dict] | None = None,
    blackbox: tuple[np.ndarray, np.ndarray] | None = None,
    attacks: tuple[dict, pd.DataFrame] | None = None,
) -> dict:
    """Everything the audit checks of one DP target (module docstring), as one JSON-ready record:
    target, accountant (`accountant_record`), canary_audits (one per `AUDITS` run), checks (the
    mechanism checks), attacks (rows of `attack_bounds`) and attack_summary, failures
    (`target_failures`). `whitebox`: the gradient canaries' observations
    (`mlmia.defences.gradient_canaries.read_record`), or a list of those of k runs of the target
    (`dp_audit.gradient_canaries.runs`), pooled (`pooled_record`): the one-run audit of all k m
    canaries with the guesses of one run, the Gaussian analysis and the mechanism fit of all
    observations, the mechanism checks of each run (`pooled_checks`); the white-box row then says
    `runs` (absent: one run); `blackbox`: (scores, inclusion bits) of the token canaries;
    `attacks`: (summary, bounds) of `attack_audit`. `settings`: confidence, check_level, and the
    canaries' guess_share and score (config `dp_audit`)."""
    record = accountant_record(info, target)
    beta = 1.0 - settings["confidence"]
    audits, checks = [], []
    if whitebox is not None:
        runs = [whitebox] if isinstance(whitebox, dict) else list(whitebox)
        pooled = pooled_record(runs, target)
        score = settings["gradient_canaries"]["score"]
        scores = canary_scores(pooled, score=score)
        found = one_run_canary_audit(scores, pooled["included"], settings["gradient_canaries"]["guess_share"],
                                     record["delta"], beta, runs=len(runs))  # fmt: skip
        gauss = gaussian_audit(pooled, scores, score, record["accountant_epsilon"], record["delta"], beta)
        fit = fit_mechanism(pooled, beta, settings["check_level"], target)
        fit["mech_epsilon_lcl"] = model_epsilon_lcl(fit, pooled["steps"], record["delta"])
        pooling = {"runs": len(runs)} if len(runs) > 1 else {}  # one run: the record as it always was
        audits.append({"audit": "white-box", "score": score, **pooling, **found, **gauss, **fit})
        checks = pooled_checks(runs, settings["check_level"])
    if blackbox is not None:
        found = one_run_canary_audit(blackbox[0], blackbox[1], settings["canaries"]["guess_share"], record["delta"],
                                     beta)  # fmt: skip
        audits.append({"audit": "black-box", "score": "token log-probability", **found})
    summary, bounds = attacks if attacks is not None else ({}, pd.DataFrame(columns=BOUND_COLUMNS))
    out = {"target": target, "accountant": record, "canary_audits": audits, "checks": checks,
           "attacks": bounds.to_dict(orient="records"), "attack_summary": summary}  # fmt: skip
    out["failures"] = target_failures(out)
    return out


def joint_confidence(confidence: float, families: int) -> float:
    """The confidence of each of `families` families of bounds so that all hold together with
    `confidence` (Bonferroni: each misses with probability (1 - confidence) / families)."""
    return 1.0 - (1.0 - float(confidence)) / max(1, int(families))


def target_failures(audit: dict) -> list[str]:
    """What fails a target's audit, one phrase each: a mechanism check below its level; a canary
    or attack bound above the accountant's epsilon, the mechanism fit's parameter check below its
    level (`mechanism_fit.fit_mechanism`: the fitted values and intervals against the claim), or
    the Gaussian lower limit where it may fail (none of these without DP: no claim)."""
    failures = [f"the {row['check']} check ({row['detail']}; p = {row['p_value']:.2g} < {row['level']:g})"
                for row in audit["checks"] if not row["passed"]]  # fmt: skip
    epsilon = audit["accountant"]["accountant_epsilon"]
    if not math.isfinite(epsilon):
        return failures
    for row in audit["canary_audits"]:
        if row["epsilon_lb"] > epsilon + TOLERANCE:
            failures.append(f"the {row['audit']} one-run bound eps >= {row['epsilon_lb']:.4f} (f-DP; "
                            f"Steinke et al.'s {row['steinke_lb']:.4f}; {row['correct']} of {row['guesses']} guesses)")  # fmt: skip
    for row in audit["canary_audits"]:
        if row.get("mech_passed") is False:
            failures.append(f"the {row['audit']} mechanism fit (p = {row['mech_p_value']:.2g} < {row['mech_level']:g} "
                            f"that the observations fit the claimed mechanism; {fit_failure(row)}: "
                            f"{describe_fit(row)})")  # fmt: skip
        if row.get("gauss_fails"):
            failures.append(f"the {row['audit']} Gaussian lower limit eps >= {row['gauss_lcl']:.4f} (estimate "
                            f"{row['gauss_estimate']:.4f}, Gaussian assumption; no trip in {row['gauss_sim_reps']} "
                            "simulated runs of the claimed mechanism)")  # fmt: skip
    for row in audit["attacks"]:
        if row["epsilon_lb"] > epsilon + TOLERANCE:
            failures.append(f"attack {row['attack']!r}: empirical lower bound eps >= {row['epsilon_lb']:.4f}")
    return failures


def check_target(audit: dict) -> None:
    """A target's audit passes, or one UserError line naming the target, its accountant epsilon and
    every failure (`target_failures`)."""
    failures = audit["failures"]
    if not failures:
        return
    record = audit["accountant"]
    claim = f"accountant's eps = {record['accountant_epsilon']:.4f} at delta {record['delta']:.2g}"
    if not math.isfinite(record["accountant_epsilon"]):
        claim = "trained without DP"
    recorded = f"; train_info.json records fault {record['fault']!r}" if record.get("fault") else ""
    raise UserError(
        f"DP audit: target {audit['target']!r} ({claim}{recorded}) fails {len(failures)} check(s): "
        f"{'; '.join(failures)}: a bug in the training, the accounting or the bound, not a result"
    )
