"""The DP audit's tables and findings, from the per-target audit records
(`mlmia.defences.audit.audit_target`; results/<run>/dp/audit/<target>.json).

- `bounds_table` / `bounds_markdown`: one row per target: the accountant's epsilon, the fault
  the training records, the white-box and black-box one-run bounds with their ratio to the
  accountant's epsilon, the mechanism fit (a parameter check, never among the bounds) and the
  model-based lower limit beside it, the best attack bound, the mechanism checks and the verdict;
  then the strongest attack and the utility of the targets that the attacks audit.
- `one_run_table` / `one_run_markdown`: every one-run audit (white-box, black-box) of every
  target, and every mechanism check.
- `audit_findings`: the audit's checks as `mlmia.report.finding.Finding` records, written by the
  one renderer (`render_findings`).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from mlmia.defences.audit import AUDITS, BOUND_COLUMNS
from mlmia.report.finding import Finding, render_findings
from mlmia.report.markdown import markdown_table

NAN = float("nan")
ONE_RUN_COLUMNS = ["target", "audit", "score", "fault", "accountant_epsilon", "delta", "canaries", "inserted",
                   "guesses", "correct", "steinke_lb", "fdp_lb", "epsilon_lb", "ratio", "beta", "gauss_estimate",
                   "gauss_estimate_ratio", "gauss_lcl", "gauss_lcl_ratio", "gauss_mu", "gauss_mu_lb", "gauss_skew_in",
                   "gauss_skew_out", "gauss_sd_ratio", "gauss_null_scores", "gauss_normal_p", "gauss_normal_passed",
                   "gauss_same_p", "gauss_sim_trips", "gauss_fails", "mech_noise_multiplier",
                   "mech_noise_multiplier_low", "mech_noise_multiplier_high", "mech_claimed_noise_multiplier",
                   "mech_rate", "mech_rate_low", "mech_rate_high", "mech_claimed_rate", "mech_amplitude",
                   "mech_amplitude_low", "mech_amplitude_high", "mech_p_value", "mech_level", "mech_passed",
                   "mech_epsilon_lcl", "mech_epsilon_lcl_ratio"]  # fmt: skip
#: the Gaussian analysis' label wherever its number is printed: an estimate, not a bound
GAUSS_LABEL = "estimate (Gaussian assumption)"
#: the mechanism fit's label wherever it is printed: a check of the claim's parameters, neither a bound nor an estimate of ε
FIT_LABEL = "mechanism fit (parameter check)"
#: the model-based limit's label wherever its number is printed: a limit under the model, not a bound
MODEL_LIMIT_LABEL = "model-based lower limit (PRV, rests on the Gaussian model)"
#: the mechanism fit's keys that the per-target table carries (prefixed whitebox_)
FIT_KEYS = ("mech_noise_multiplier", "mech_noise_multiplier_low", "mech_noise_multiplier_high",
            "mech_claimed_noise_multiplier", "mech_rate", "mech_rate_low", "mech_rate_high", "mech_claimed_rate",
            "mech_amplitude", "mech_amplitude_low", "mech_amplitude_high", "mech_p_value", "mech_passed",
            "mech_epsilon_lcl")  # fmt: skip
CHECK_COLUMNS = ["target", "fault", "check", "observed", "expected", "p_value", "level", "passed", "detail"]


#: what a DP target's epsilon does not cover, said in every DP table: the tokenizer is
#: the world's, learnt without DP from every world corpus, the private text included
VOCABULARY_SCOPE = (
    "the weights given the tokenizer; the vocabulary is outside the guarantee (the tokenizer was learnt without DP "
    "from every world corpus, the private text included)"
)


def _format(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n.a."
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def _interval(row: pd.Series, key: str, digits: int = 3, scale: float = 1.0) -> str:
    value = row[key] * scale
    low, high = row[f"{key}_ci_low"] * scale, row[f"{key}_ci_high"] * scale
    if isinstance(value, float) and math.isnan(value):
        return "n.r."
    text = _format(value, digits)
    return text if math.isnan(low) else f"{text} [{_format(low, digits)}, {_format(high, digits)}]"


def _gain(row: pd.Series) -> str:
    if "mlm_loss_gain" not in row or math.isnan(row["mlm_loss_gain"]):
        return "n.a."
    return f"{_interval(row, 'mlm_loss_gain')} (of {_format(row['reference_mlm_loss'], 3)})"


def _ratio(bound: float, epsilon: float) -> float:
    return bound / epsilon if math.isfinite(epsilon) and epsilon > 0 else NAN


def _canary(audit: dict, kind: str) -> dict | None:
    return next((row for row in audit["canary_audits"] if row["audit"] == kind), None)


def _pooled(audits: list[dict]) -> bool:
    """Whether a white-box audit pools several runs (`dp_audit.gradient_canaries.runs` > 1): only
    then do the tables show a `runs` column, so that one run writes them as it always did."""
    return any("runs" in row for audit in audits for row in audit["canary_audits"])


def bounds_table(audits: list[dict]) -> pd.DataFrame:
    """One row per target (`bounds.csv`)."""
    rows = []
    for audit in audits:
        record = audit["accountant"]
        row = {"target": audit["target"], **record}
        for kind in AUDITS:
            found = _canary(audit, kind) or {}
            key = kind.replace("-", "")
            row |= {f"{key}_lb": found.get("epsilon_lb", NAN), f"{key}_steinke_lb": found.get("steinke_lb", NAN),
                    f"{key}_fdp_lb": found.get("fdp_lb", NAN),
                    f"{key}_ratio": _ratio(found.get("epsilon_lb", NAN), record["accountant_epsilon"])}  # fmt: skip
        white = _canary(audit, "white-box") or {}
        for key in ("gauss_estimate", "gauss_lcl", "mech_epsilon_lcl"):
            row |= {f"whitebox_{key}": white.get(key, NAN),
                    f"whitebox_{key}_ratio": _ratio(white.get(key, NAN), record["accountant_epsilon"])}  # fmt: skip
        row |= {f"whitebox_{key}": white.get(key, NAN) for key in FIT_KEYS}
        row["whitebox_gauss_normal_p"] = white.get("gauss_normal_p", NAN)
        failed = [c["check"] for c in audit["checks"] if not c["passed"]]
        row |= {"checks": "none" if not audit["checks"] else ("passed" if not failed else "failed: " + ", ".join(failed)),
                "verdict": "fails" if audit["failures"] else "passes", "failures": "; ".join(audit["failures"]),
                "guarantee_covers": VOCABULARY_SCOPE, **audit["attack_summary"]}  # fmt: skip
        if _pooled(audits):
            row["whitebox_runs"] = white.get("runs", 1) if white else NAN
        rows.append(row)
    return pd.DataFrame(rows)


def _runs(value) -> str:
    return "n.a." if not isinstance(value, (int, float)) or math.isnan(value) else str(int(value))


def _accountant(row) -> str:
    eps = row["accountant_epsilon"]
    return "no DP" if not math.isfinite(eps) else f"{_format(eps, 2)} ({row['delta']:.2g})"


def _fault(value) -> str:
    return value if isinstance(value, str) and value else "none"


def _bound(row, key: str, value_key: str | None = None) -> str:
    value = row.get(value_key or f"{key}_lb", NAN)
    if not isinstance(value, float) or math.isnan(value):
        return "n.a."
    ratio = row.get(f"{key}_ratio", NAN)
    return _format(value) + (f" ({ratio:.2f})" if isinstance(ratio, float) and math.isfinite(ratio) else "")


def bounds_markdown(table: pd.DataFrame, fpr: float, confidence: float) -> str:
    """The per-target table as Markdown: the audit, then the attacks and utility; notes say what
    each column means."""
    header = ["target", "accountant ε (δ)", "fault recorded", "patient-level ε (δ)", "white-box bound (/ε)",
              f"white-box {FIT_LABEL}: noise multiplier; rate [intervals] vs σ; q", f"{MODEL_LIMIT_LABEL} (/ε)",
              f"white-box {GAUSS_LABEL} (/ε)",
              "its lower limit (/ε)", "black-box canary bound (/ε)",
              "best attack bound (attack)", "mechanism checks", "audit"]  # fmt: skip
    pooled = "whitebox_runs" in table.columns
    if pooled:  # the white-box runs pooled (dp_audit.gradient_canaries.runs), before their bound
        header.insert(header.index("white-box bound (/ε)"), "runs")
    body = []
    for _, row in table.iterrows():
        patient = (
            "n.a." if not math.isfinite(row["patient_epsilon"])
            else f"{_format(row['patient_epsilon'], 2)} ({'vacuous' if row['patient_vacuous'] else format(row['patient_delta'], '.2g')})"
        )  # fmt: skip
        attack = row.get("epsilon_lb", NAN)
        attack = "n.a." if not isinstance(attack, float) or math.isnan(attack) else (
            f"{_format(attack)} ({row['bound_attack']})")  # fmt: skip
        body.append([row["target"], _accountant(row), _fault(row["fault"]), patient, _bound(row, "whitebox"),
                     _fit_cell(row, "whitebox_"),
                     _bound(row, "whitebox_mech_epsilon_lcl", "whitebox_mech_epsilon_lcl"),
                     _bound(row, "whitebox_gauss_estimate", "whitebox_gauss_estimate"),
                     _bound(row, "whitebox_gauss_lcl", "whitebox_gauss_lcl"),
                     _bound(row, "blackbox"), attack, row["checks"],
                     "passes" if row["verdict"] == "passes" else "**FAILS**"])  # fmt: skip
        if pooled:
            body[-1].insert(header.index("runs"), _runs(row["whitebox_runs"]))
    attacked = table[table["auc"].notna()] if "auc" in table.columns else table.iloc[:0]
    second = ["target", "accountant ε (δ)", "strongest attack", "AUC", f"TPR@{fpr:g}FPR (%)", "MLM loss",
              "gain over the reference", "pseudo-perplexity"]  # fmt: skip
    rows = [[row["target"], _accountant(row), row["strongest_attack"], _interval(row, "auc"), _interval(row, "tpr", 1),
             _interval(row, "mlm_loss"), _gain(row), _interval(row, "pseudo_perplexity", 2)]
            for _, row in attacked.iterrows()]  # fmt: skip
    notes = [
        "",
        "Accountant ε: the privacy accountant's epsilon (Opacus, Rényi DP) for what the training claims (σ, the "
        "sampling rate q, the steps) at δ = 1 / training lines; a faulty trainer (fault recorded) claims the intended "
        "ε while doing something else. Patient-level: the accountant's own for patient-level DP-SGD, else group "
        "privacy over the k lines of the patient with the most, (kε, k e^((k-1)ε) δ); vacuous when that δ is at "
        f"least 1. Every ε here covers {VOCABULARY_SCOPE}.",
        *(
            [
                "Runs: the training runs of the target whose gradient canaries the white-box audit pools (the target and "
                "its audit replicas, models/<target>~run<i>: the same settings, other seeds; k trainings), guessing as "
                "many as on one run."
            ]
            if pooled
            else []
        ),
        f"White-box bound: the one-run audit of the gradient canaries observed at every step; black-box: the one-run "
        f"audit of the new-token canaries on the final model (one_run.md); each the f-DP analysis' lower bound at the "
        f"accountant's δ, the families of a target (white-box, black-box, attacks) holding together with confidence "
        f"{confidence:g} (Bonferroni); "
        "in brackets the ratio to the accountant's ε.",
        f"White-box {FIT_LABEL}: the subsampled Gaussian mechanism that the canaries' observations fit by moments "
        "(mlmia.defences.mechanism_fit): the noise multiplier (the noise over the clipped canary's amplitude) and the "
        "rate it joins at, each with its Fieller interval at the white-box family's confidence, against the claim's σ "
        "and q; p: the test that the observations fit the claimed mechanism (two moment conditions, Bonferroni), "
        f"which FAILS the audit below the checks' level, as a mechanism check. A check of the parameters, not a "
        f"measure of ε. {MODEL_LIMIT_LABEL[0].upper()}{MODEL_LIMIT_LABEL[1:]}: the PRV accountant's lower bound on ε "
        "(Gopi, Lee and Wutschitz 2021) at the noise multiplier's upper and the rate's lower limit, a lower confidence "
        "limit that holds only under the model (Gaussian noise of one scale, one rate, independent observations); "
        "reported, it fails nothing.",
        f"White-box {GAUSS_LABEL}: ε of μ-GDP at the accountant's δ, μ the standardized difference of the included "
        "and excluded canaries' scores (Andrew et al., ICLR 2024; Dong, Roth and Su 2022): an ESTIMATE, not a bound, "
        "valid only as far as the scores are normal (one_run.md has the check); its lower limit: the noncentral-t "
        "lower confidence limit on μ at the white-box family's confidence, under the same assumption. A lower limit "
        "above the accountant's ε fails the audit only where 60 simulated runs of the claimed mechanism never put "
        "it there.",
        f"Best attack bound: the largest over the zoo's attacks of the empirical lower bound on ε (threshold chosen on "
        f"one half of members and non-members, bound on the other; Clopper-Pearson; all attacks of a target together "
        f"with confidence {confidence:g}, Bonferroni); bounds_by_attack.csv holds every attack's.",
        "Mechanism checks: the observed Poisson batches against q n and the noise on canary-free coordinates against "
        "σ C / expected batch (one_run.md). Audit: FAILS when a check or the mechanism fit's parameter check fails or "
        "a bound exceeds the accountant's ε; the target's check job then fails the run in one line.",
        "",
        markdown_table(second, rows) if rows else "No target is attacked by the zoo.",
        "",
        "Strongest attack: the attack with the highest AUC on that target; AUC and TPR (in %) are its, with the "
        "patient-bootstrap 95% interval in brackets (n.r.: FPR below 1 / non-members, not resolvable). MLM loss: mean "
        "masked energy of the non-member samples (held-out masked-LM loss, nats); gain over the reference: the "
        "experiment's reference's MLM loss on the same samples (in brackets after 'of'; for the DP targets the public "
        "model they start from) less the target's, positive where the target predicts the held-out notes better, its "
        "interval paired (n.a.: no attack reads the reference's masked energy); pseudo-perplexity: exp of the "
        "token-weighted mean normalized energy of the same samples; 95% patient-bootstrap intervals.",
    ]
    return "\n".join([markdown_table(header, body), *notes]) + "\n"


def by_attack_table(audits: list[dict]) -> pd.DataFrame:
    """Every attack's bound of every attacked target (`bounds_by_attack.csv`)."""
    rows = [row for audit in audits for row in audit["attacks"]]
    return pd.DataFrame(rows, columns=BOUND_COLUMNS)


def one_run_table(audits: list[dict]) -> pd.DataFrame:
    """Every one-run audit of every target (`one_run.csv`)."""
    rows = []
    for audit in audits:
        record = audit["accountant"]
        for found in audit["canary_audits"]:
            rows.append({"target": audit["target"], "fault": record.get("fault"),
                         "accountant_epsilon": record["accountant_epsilon"], **found,
                         "ratio": _ratio(found["epsilon_lb"], record["accountant_epsilon"]),
                         "gauss_estimate_ratio": _ratio(found.get("gauss_estimate", NAN), record["accountant_epsilon"]),
                         "gauss_lcl_ratio": _ratio(found.get("gauss_lcl", NAN), record["accountant_epsilon"]),
                         "mech_epsilon_lcl_ratio": _ratio(found.get("mech_epsilon_lcl", NAN),
                                                          record["accountant_epsilon"])})  # fmt: skip
    if not _pooled(audits):
        return pd.DataFrame(rows, columns=ONE_RUN_COLUMNS)
    # runs pooled (dp_audit.gradient_canaries.runs): how many, after the score (a black-box audit is one run's)
    columns = ONE_RUN_COLUMNS[:3] + ["runs"] + ONE_RUN_COLUMNS[3:]
    return pd.DataFrame([row | {"runs": row.get("runs", 1)} for row in rows], columns=columns)


def checks_table(audits: list[dict]) -> pd.DataFrame:
    """Every mechanism check of every target (`checks.csv`)."""
    rows = [{"target": a["target"], "fault": a["accountant"].get("fault"), **c} for a in audits for c in a["checks"]]
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def one_run_markdown(one_run: pd.DataFrame, checks: pd.DataFrame, settings: dict) -> str:
    """The one-run audits and the mechanism checks as Markdown, with notes on what they measure."""
    header = ["target", "audit (score)", "accountant ε (δ)", "fault recorded", "canaries (inserted)", "guesses",
              "correct", "Steinke et al. bound", "f-DP bound", "bound / ε",
              f"{FIT_LABEL}: noise multiplier; rate [intervals] vs σ; q", "fitted amplitude [interval]", MODEL_LIMIT_LABEL,
              "/ ε", GAUSS_LABEL, "/ ε", "its lower limit", "/ ε", "null normal (p)", "skew in / out"]  # fmt: skip
    body = [[row.target, f"{row.audit} ({row.score})", _accountant(row._asdict()), _fault(row.fault),
             f"{row.canaries} ({row.inserted})", row.guesses, row.correct, _format(row.steinke_lb), _format(row.fdp_lb),
             _format(row.ratio, 2), _fit_cell(row._asdict()), _amplitude(row._asdict()),
             _format(row.mech_epsilon_lcl), _format(row.mech_epsilon_lcl_ratio, 2),
             _format(row.gauss_estimate), _format(row.gauss_estimate_ratio, 2),
             _format(row.gauss_lcl), _format(row.gauss_lcl_ratio, 2), _normality(row),
             f"{_format(row.gauss_skew_in, 2)} / {_format(row.gauss_skew_out, 2)}"
             if isinstance(row.gauss_skew_in, float) and not math.isnan(row.gauss_estimate) else "n.a."]
            for row in one_run.itertuples(index=False)]  # fmt: skip
    pooled = "runs" in one_run.columns
    if pooled:  # the runs pooled (dp_audit.gradient_canaries.runs), after the canaries of all of them
        at = header.index("canaries (inserted)") + 1
        header.insert(at, "runs")
        for line, runs in zip(body, one_run["runs"]):
            line.insert(at, _runs(runs))
    check_header = ["target", "fault recorded", "check", "observed", "expected", "p-value", "verdict"]
    check_body = [[row.target, _fault(row.fault), row.check, f"{row.observed:.4g}", f"{row.expected:.4g}",
                   f"{row.p_value:.2g}", "passes" if row.passed else f"**FAILS** (p < {row.level:g})"]
                  for row in checks.itertuples(index=False)]  # fmt: skip
    gradient, tokens = settings["gradient_canaries"], settings["canaries"]
    runs = gradient["runs"]
    opening = "One training run per target, m canaries each included with probability 1/2"
    if pooled:
        opening = (f"White-box: {runs} training runs per target (the target and its audit replicas "
                   "models/<target>~run<i>: the same settings, the training's and the canaries' seeds offset by "
                   "i - 1; k trainings), whose canaries are pooled (column runs; the canaries column counts all "
                   "of them) and guessed on as many as on one run, the mechanism checks per run; black-box: one "
                   "run; each run's m canaries included with probability 1/2")  # fmt: skip
    notes = [
        "",
        f"{opening} (Steinke, Nasr and Jagielski, "
        f"NeurIPS 2023). White-box: {gradient['count']} gradient canaries{' per run' if pooled else ''} of norm "
        f"{gradient['norm']:g} C on "
        f"coordinates of their own, sampled at each step with the training's Poisson rate, clipped and noised by the "
        f"DP optimizer with the model's gradient, observed after the noise at every step (empty batches included); "
        f"score: {gradient['score'].replace('_', ' ')} of the observations. Black-box: canaries of new tokens (the "
        f"tokens of all of them in the DP targets' vocabulary), each added to the training text once; score: the final "
        f"model's log-probability of a canary's own tokens, masked. The auditor guesses 'included' for the highest "
        f"scores and 'not included' for as many lowest ({gradient['guess_share']:g} and {tokens['guess_share']:g} of "
        f"the canaries), abstaining on the rest. Bounds at the accountant's δ: the f-DP analysis' (Mahloujifar, Melis "
        "and Chaudhuri, ICML 2025, with the (ε, δ) trade-off curve), the audit's bound; Steinke et al.'s of the same "
        "guesses at the same confidence beside it for comparison (its δ term grows with m δ), never in the failure "
        f"rule. The families of bounds of a target (white-box, black-box, attacks) hold together with confidence "
        f"{settings['confidence']:g} (Bonferroni; column beta: each family's error probability). The accountant's ε "
        f"covers {VOCABULARY_SCOPE}.",
        "",
        f"{FIT_LABEL[0].upper()}{FIT_LABEL[1:]} (white-box only): the subsampled Gaussian mechanism the canaries' "
        "observations fit by moments (mlmia.defences.mechanism_fit): the noise multiplier (the noise over the clipped "
        "canary's amplitude), the rate it joins at and the amplitude (1 for a trainer that clips to C), each with its "
        "Fieller interval at the white-box family's confidence (column beta; [0, ∞]: not identified; n.a.: no "
        "signal), against the claim's σ, q and 1; p: the test that the observations fit the claimed σ and q (two "
        f"moment conditions, Bonferroni), failing the audit below {settings['check_level']:g}. It checks the "
        f"parameters; it is no measure of ε. {MODEL_LIMIT_LABEL[0].upper()}{MODEL_LIMIT_LABEL[1:]}: the PRV "
        "accountant's lower error bound on ε (Gopi, Lee and Wutschitz, NeurIPS 2021) at the noise multiplier's upper "
        "and the rate's lower limit: a lower confidence limit at 1 - beta that holds only under the model (Gaussian "
        "noise of one scale, one rate and amplitude, independent observations); reported, it fails nothing.",
        "",
        f"{GAUSS_LABEL[0].upper()}{GAUSS_LABEL[1:]} (white-box only): ε of μ-GDP at the accountant's δ, μ the "
        "standardized mean difference (Cohen's d) of the included and the excluded canaries' scores (Andrew, Kairouz, "
        "Oh, Oprea, McMahan and Suriyakumar, ICLR 2024; μ-GDP: Dong, Roth and Su 2022). It is an ESTIMATE, not a "
        "bound: it holds only as far as both score distributions are normal with one variance. Its lower limit: the "
        "noncentral-t lower confidence limit on μ at the white-box family's confidence (column beta), exact under "
        "that assumption only; above the accountant's ε it fails the audit only where 60 simulated runs of the "
        "claimed mechanism never put it there, else it is reported only. Null normal: D'Agostino-Pearson's p-value "
        "of the same score on the canary-free coordinates (their null distribution; 'not normal' below "
        "0.05; it informs, it fails nothing); skew: the included and the excluded canaries' scores' skewness (0 "
        "for a normal).",
        "",
        markdown_table(check_header, check_body) if check_body else "No mechanism check (no gradient canaries).",
        "",
        "Poisson batch: the data units of all batches, Binomial(n T, q) under the accountant's q; noise: the "
        "canary-free coordinates' observations, N(0, (σ C / expected batch)^2) each (chi-square test); two-sided "
        f"p-values, a check fails below {settings['check_level']:g}.",
    ]
    return "\n".join([markdown_table(header, body), *notes]) + "\n"


def _number(value) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "n.a."
    return "∞" if math.isinf(value) else f"{value:.3g}"


def _fitted(row: dict, key: str) -> str:
    low, high = row.get(key + "_low", NAN), row.get(key + "_high", NAN)
    return f"{_number(row.get(key, NAN))} [{_number(low)}, {_number(high)}]"


def _fit_cell(row, prefix: str = "") -> str:
    """The mechanism fit in one cell: noise multiplier [interval] vs σ; rate [interval] vs q; p and verdict."""
    values = {key[len(prefix) :]: value for key, value in dict(row).items() if key.startswith(prefix + "mech_")}
    low = values.get("mech_noise_multiplier_low", NAN)
    if not isinstance(low, (int, float)) or math.isnan(low):
        return "n.a."
    p = values["mech_p_value"]
    verdict = "no claim" if math.isnan(p) else f"p = {p:.2g}, " + ("passes" if values["mech_passed"] else "**FAILS**")
    return (f"{_fitted(values, 'mech_noise_multiplier')} vs {_number(values['mech_claimed_noise_multiplier'])}; "
            f"{_fitted(values, 'mech_rate')} vs {_number(values['mech_claimed_rate'])}; {verdict}")  # fmt: skip


def _amplitude(row: dict) -> str:
    low = row.get("mech_amplitude_low", NAN)
    return "n.a." if not isinstance(low, (int, float)) or math.isnan(low) else _fitted(row, "mech_amplitude")


def _normality(row) -> str:
    p = getattr(row, "gauss_normal_p", NAN)
    if not isinstance(p, float) or math.isnan(p):
        return "n.a."
    return f"{'normal' if row.gauss_normal_passed else 'not normal'} ({p:.2g})"


# ----------------------------------------------------------------------------------- findings


def _note(audit: dict) -> str:
    fault = audit["accountant"].get("fault")
    return f"fault recorded: {fault}" if fault else "no fault recorded"


def _pooled_runs(found: dict) -> str:
    return f" on the canaries of {found['runs']} runs" if "runs" in found else ""


def audit_findings(audits: list[dict], confidence: float) -> list[Finding]:
    """The audit's checks as findings: per DP target, each one-run bound against the accountant's
    epsilon (with their ratio), each mechanism check, and whether the target passes; the claims
    are that every trainer without a recorded fault passes and every faulty one is caught. The
    bounds are one-sided confidence limits and the checks tests, so no verdict has an interval."""
    interval = f"one-sided lower bound, confidence {confidence:g}"
    out: list[Finding] = []
    for audit in audits:
        record = audit["accountant"]
        eps = record["accountant_epsilon"]
        if not math.isfinite(eps):
            continue
        faulty = bool(record.get("fault"))
        failures = len(audit["failures"])
        claim = "A faulty trainer fails its audit" if faulty else "A trainer without a recorded fault passes its audit"
        out.append(Finding(
            finding="faulty_caught" if faulty else "correct_passes", claim=claim, kind="finding",
            scope=audit["target"], measure="failing checks and bounds", first="failures", first_value=float(failures),
            second="none", second_value=0.0, difference=float(failures), difference_ci_low=NAN,
            difference_ci_high=NAN, interval="a check, no interval", n=len(audit["canary_audits"]) + len(audit["checks"]),
            margin=0.0, holds=(failures > 0) == faulty, verdict="not resolvable",
            note=(f"{_note(audit)}; caught by: " + "; ".join(f.split(" (")[0] for f in audit["failures"])) if failures
            else f"{_note(audit)}; nothing fails", number_format=".0f",
        ))  # fmt: skip
        for found in audit["canary_audits"]:
            out.append(Finding(
                finding=f"{found['audit']}_within_claim", kind="baseline", scope=audit["target"],
                claim=f"The {found['audit']} one-run bound stays at or below the accountant's ε",
                measure="lower bound on ε at the accountant's δ", first=f"{found['audit']} bound",
                first_value=found["epsilon_lb"], second="accountant ε", second_value=eps,
                difference=found["epsilon_lb"] - eps, difference_ci_low=NAN, difference_ci_high=NAN,
                interval=interval, n=found["guesses"], margin=0.0, holds=found["epsilon_lb"] <= eps + 1e-9,
                verdict="not resolvable",
                note=f"a one-sided bound, not an interval; ratio {found['epsilon_lb'] / eps:.2f}; {found['correct']} of "
                     f"{found['guesses']} guesses right"
                     f"{_pooled_runs(found)}; {_note(audit)}",
            ))  # fmt: skip
        for found in audit["canary_audits"]:
            if "mech_passed" in found and not math.isnan(found["mech_p_value"]):
                out.append(_fit_finding(found, audit))
        for check in audit["checks"]:
            out.append(Finding(
                finding=f"check_{re.sub('[^a-z0-9]+', '_', check['check'].lower()).strip('_')}", kind="baseline", scope=audit["target"],
                claim=f"The {check['check']} check agrees with the accountant's claim", measure=check["check"],
                first="observed", first_value=check["observed"], second="claimed", second_value=check["expected"],
                difference=check["observed"] - check["expected"], difference_ci_low=NAN, difference_ci_high=NAN,
                interval=f"two-sided test at level {check['level']:g}", n=1, margin=0.0, holds=check["passed"],
                verdict="not resolvable", note=f"p = {check['p_value']:.2g}; {_note(audit)}", number_format=".4g",
            ))  # fmt: skip
    return out


def _fit_finding(found: dict, audit: dict) -> Finding:
    """The mechanism fit's parameter check as a finding: the fitted noise multiplier against the
    claimed σ; a test, so no interval of the difference: the fitted values' intervals, the rate and
    the p-value in the note."""
    sigma, fitted = found["mech_claimed_noise_multiplier"], found["mech_noise_multiplier"]
    return Finding(
        finding="mechanism_fit", kind="baseline", scope=audit["target"],
        claim=f"The {found['audit']} {FIT_LABEL} agrees with the claimed noise multiplier and rate",
        measure="noise multiplier (noise / clipped canary)", first="fitted", first_value=fitted, second="claimed σ",
        second_value=sigma, difference=fitted - sigma, difference_ci_low=NAN, difference_ci_high=NAN,
        interval=f"two moment conditions, two-sided tests at level {found['mech_level']:g} (Bonferroni)",
        n=found["mech_observations"], margin=0.0, holds=bool(found["mech_passed"]), verdict="not resolvable",
        note=f"noise multiplier {_fitted(found, 'mech_noise_multiplier')}, rate {_fitted(found, 'mech_rate')} against "
             f"q = {found['mech_claimed_rate']:.3g}, amplitude {_fitted(found, 'mech_amplitude')} against 1 (Fieller "
             f"intervals at 1 - {found['beta']:.3g}); "
             f"p = {found['mech_p_value']:.2g} that the observations fit the claimed mechanism; {_note(audit)}",
        number_format=".4g",
    )  # fmt: skip


def findings_markdown(findings: list[Finding], confidence: float) -> str:
    """The audit's findings in the one layout of every study's findings."""
    method = (
        "Each DP target's audit (`snakemake dp`; docs/dp.md): the white-box one-run audit of gradient canaries, the "
        "black-box one-run audit of new-token canaries, and the mechanism checks, against what the training claims "
        f"(the accountant's ε at its δ). The bounds are one-sided lower confidence limits (confidence {confidence:g}) "
        "and the checks are tests, so no finding has an interval of a difference: each is a pass or a failure, the "
        "notes give the ratio of bound to claim and the p-values. The accountant's ε covers "
        f"{VOCABULARY_SCOPE}."
    )
    return render_findings(findings, "Findings of the DP audit", method)
