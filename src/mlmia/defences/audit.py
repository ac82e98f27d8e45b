"""The DP audit: empirical lower bounds on epsilon from the attacks' scores, the utility of each
target, and the check that no bound exceeds the accountant's epsilon.

Lower bounds (`attack_bounds`): for each attack, its member scores (`Attack.member_score`,
higher = member) of the experiment's members and non-members go to
`mlmia.metrics.privacy_bounds.threshold_then_bound`: each set shuffled and halved, the
threshold chosen on one half, the bound eps >= log((TPR_low - delta) / FPR_high) (and its
complement form) computed on the other with Clopper-Pearson limits (Jagielski, Ullman and
Oprea, "Auditing differentially private machine learning: How private is private SGD?",
NeurIPS 2020; Nasr, Song, Thakurta, Papernot and Carlini, "Adversary instantiation: Lower
bounds for differentially private machine learning", IEEE S&P 2021). A target's best bound is
the largest over its attacks; each is computed at confidence 1 - (1 - c) / (number of
attacks), so that all of them, and hence the best, hold together with confidence c
(Bonferroni). delta is the accountant's (1 / training lines).

What the bound assumes and what it does not (docs/dp.md): the Clopper-Pearson limits treat
the samples as independent trials, while here they come from one trained model and members
enter as whole patients; the bound is the usual single-run membership-inference audit, not a
certificate. A bound above the accountant's epsilon is nevertheless a bug (in the training,
the accounting or the bound), never a result: `check_bounds` fails the run.

Utility (`utility`): on the experiment's non-member samples, the held-out masked-LM loss is the
mean over samples of the masked energy (each sample's cross-entropy at ceil(0.15 T) masked
positions, averaged over the K masking patterns); the pseudo-perplexity is
exp(sum_i T_i E_i / sum_i T_i), E_i the normalized energy (each content position masked alone,
mean cross-entropy over the sample's T_i content tokens), i.e. exp of the per-token
pseudo-log-likelihood averaged over all tokens of all non-member samples (Salazar, Liang,
Nguyen and Kirchhoff, "Masked language model scoring", ACL 2020). Intervals: 95% percentile
intervals from the patient bootstrap (`mlmia.metrics.bootstrap`, the metrics' own replicates).

`one_run_canary_audit`: the one-run audit of Steinke, Nasr and Jagielski ("Privacy auditing
with one (1) training run", NeurIPS 2023) on canaries each inserted with probability 1/2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.intervals import percentile_interval
from mlmia.metrics.privacy_bounds import one_run_audit, threshold_then_bound
from mlmia.report.markdown import markdown_table

BOUND_COLUMNS = ["target", "attack", "label", "epsilon_lb", "threshold", "confidence", "delta", "members",
                 "nonmembers"]  # fmt: skip


def attack_bounds(
    table: pd.DataFrame,
    attacks: dict[str, dict | None],
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
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


def check_bounds(bounds: pd.DataFrame, accountant: dict[str, float | None], tolerance: float = 1e-9) -> None:
    """Every bound stays at or below its target's accountant epsilon (None or inf: no DP, no
    check); else one UserError line naming the target, the attack and both numbers."""
    for row in bounds.itertuples(index=False):
        epsilon = accountant.get(row.target)
        if epsilon is None or not math.isfinite(epsilon):
            continue
        if row.epsilon_lb > epsilon + tolerance:
            raise UserError(
                f"DP audit: target {row.target!r}, attack {row.attack!r}: empirical lower bound eps >= "
                f"{row.epsilon_lb:.4f} exceeds the accountant's eps = {epsilon:.4f}: a bug in the training, the "
                "accounting or the bound, not a result"
            )


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
) -> dict:
    """The held-out masked-LM loss (mean masked energy) and the pseudo-perplexity (exp of the
    token-weighted mean normalized energy) over the non-member rows of an attack table, each with
    its patient-bootstrap 95% interval (NaN without replicates)."""
    for column in (masked_column, normalized_column, "n_tokens"):
        if column not in table.columns:
            raise UserError(f"{where}: the attack table lacks column {column!r} (the utility needs it)")
    part = table[table["role"].astype(str) == "nonmember"].reset_index(drop=True)
    if part.empty:
        raise UserError(f"{where}: no non-member samples to measure the utility on")
    loss = part[masked_column].to_numpy(dtype=float)
    energy = part[normalized_column].to_numpy(dtype=float)
    tokens = part["n_tokens"].to_numpy(dtype=float)
    if not (np.all(np.isfinite(loss)) and np.all(np.isfinite(energy)) and np.all(tokens > 0)):
        raise UserError(f"{where}: a non-member's energy is not finite or its token count not positive")

    def values(rows: np.ndarray) -> tuple[float, float]:
        return float(loss[rows].mean()), float(math.exp(np.sum(tokens[rows] * energy[rows]) / np.sum(tokens[rows])))

    point = values(np.arange(len(part)))
    replicates = [values(rows) for rows in _resampled(part, universe, seed, bootstrap) if len(rows)]
    out = {"nonmember_samples": len(part), "nonmember_tokens": int(tokens.sum())}
    for i, key in enumerate(("mlm_loss", "pseudo_perplexity")):
        low, high = percentile_interval([r[i] for r in replicates]) if replicates else (math.nan, math.nan)
        out |= {key: point[i], f"{key}_ci_low": low, f"{key}_ci_high": high}
    return out


def one_run_canary_audit(
    scores: np.ndarray,
    included: np.ndarray,
    guess_share: float = 0.1,
    delta: float = 0.0,
    beta: float = 0.05,
) -> dict:
    """The one-run lower bound on epsilon of Steinke, Nasr and Jagielski (NeurIPS 2023) from m
    canaries each inserted into the training text independently with probability 1/2
    (`included`, the true bits) and the auditor's scores (higher = inserted; e.g. a member score
    of an attack). The auditor guesses "in" for the ceil(`guess_share` m / 2) highest scores and
    "out" for as many lowest, abstaining on the rest; `guess_share` is fixed before the scores
    are seen (trying several spends the confidence). Returns the counts and the bound
    (`mlmia.metrics.privacy_bounds.one_run_audit`), valid with probability 1 - `beta`; delta: the
    accountant's (per canary, i.e. per inserted line)."""
    scores = np.asarray(scores, dtype=float).ravel()
    bits = np.asarray(included).ravel()
    m = len(scores)
    if not 0 < guess_share <= 1:
        raise UserError(f"one_run_canary_audit: guess_share must lie in (0, 1], got {guess_share!r}")
    if m < 2 or len(bits) != m:
        raise UserError(
            f"one_run_canary_audit: need at least 2 canaries with one inclusion bit each, got {m}, {len(bits)}"
        )
    k = min(m // 2, math.ceil(guess_share * m / 2))
    epsilon = one_run_audit(scores, bits, k, k, delta=delta, beta=beta)
    order = np.argsort(-scores, kind="stable")
    bits = bits.astype(bool)
    correct = int(bits[order[:k]].sum()) + int((~bits[order[m - k :]]).sum())
    return {"canaries": m, "inserted": int(bits.sum()), "guesses": 2 * k, "correct": correct, "epsilon_lb": epsilon,
            "beta": beta, "delta": delta}  # fmt: skip


ONE_RUN_COLUMNS = ["target", "canaries", "inserted", "guesses", "correct", "epsilon_lb", "beta", "delta",
                   "accountant_epsilon"]  # fmt: skip


def one_run_audits(
    scores: dict[str, np.ndarray],
    included: np.ndarray,
    train_infos: dict[str, dict | None],
    guess_share: float,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """The one-run audit (`one_run_canary_audit`) of each DP target from its canary scores, at
    the target's accountant delta and confidence `confidence` per target; one row per target
    (`ONE_RUN_COLUMNS`). A bound above the accountant's epsilon fails (`check_bounds`)."""
    rows = []
    for target, score in scores.items():
        record = accountant_record(train_infos.get(target), target)
        found = one_run_canary_audit(score, included, guess_share, delta=record["delta"], beta=1.0 - confidence)
        rows.append({"target": target, **found, "accountant_epsilon": record["accountant_epsilon"]})
    table = pd.DataFrame(rows, columns=ONE_RUN_COLUMNS)
    check_bounds(table.assign(attack="one-run canaries"), dict(zip(table["target"], table["accountant_epsilon"])))
    return table


def one_run_markdown(table: pd.DataFrame, template: str, digits: int) -> str:
    """The one-run audit as Markdown, with a note on what it measures."""
    header = ["target", "accountant ε (δ)", "canaries (inserted)", "guesses", "correct", "lower bound on ε"]
    body = []
    for row in table.itertuples(index=False):
        eps = row.accountant_epsilon
        accountant = "no DP" if not math.isfinite(eps) else f"{_format(eps, 2)} ({row.delta:.2g})"
        body.append([row.target, accountant, f"{row.canaries} ({row.inserted})", row.guesses, row.correct,
                     _format(row.epsilon_lb)])  # fmt: skip
    notes = [
        "",
        f"One training run per target (Steinke, Nasr and Jagielski, NeurIPS 2023): canaries of the template "
        f"{template!r} with {digits}-digit secrets, each added to the target's training text once with probability "
        "1/2. Score: the log-probability of a canary's own secret with all its digits masked. The auditor guesses "
        "'inserted' for the highest scores and 'not inserted' for as many lowest (guesses), abstaining on the rest; "
        f"the bound holds with probability {1 - table['beta'].iloc[0]:g} at the accountant's δ."
        if len(table)
        else "",
    ]
    return "\n".join([markdown_table(header, body), *notes]) + "\n"


# ----------------------------------------------------------------------------------- the report


def _format(value: float, digits: int = 3) -> str:
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


def bounds_markdown(table: pd.DataFrame, fpr: float, confidence: float) -> str:
    """The per-target table as Markdown, with notes saying what each column means."""
    header = ["target", "accountant ε (δ)", "patient-level ε (δ)", "best lower bound on ε", "attack",
              "strongest attack", "AUC", f"TPR@{fpr:g}FPR (%)", "MLM loss", "pseudo-perplexity"]  # fmt: skip
    body = []
    for _, row in table.iterrows():
        eps = row["accountant_epsilon"]
        accountant = "no DP" if not math.isfinite(eps) else f"{_format(eps, 2)} ({row['delta']:.2g})"
        patient = (
            "n.a." if not math.isfinite(row["patient_epsilon"])
            else f"{_format(row['patient_epsilon'], 2)} ({'vacuous' if row['patient_vacuous'] else format(row['patient_delta'], '.2g')})"
        )  # fmt: skip
        cells = [row["target"], accountant, patient, _format(row["epsilon_lb"]), row["bound_attack"],
                 row["strongest_attack"], _interval(row, "auc"), _interval(row, "tpr", 1),
                 _interval(row, "mlm_loss"), _interval(row, "pseudo_perplexity", 2)]  # fmt: skip
        body.append(cells)
    notes = [
        "",
        "Accountant ε: the privacy accountant's epsilon (Opacus, Rényi DP) of the DP-SGD run at δ = 1 / training "
        "lines (sample-level). Patient-level: the accountant's own for patient-level DP-SGD, else group privacy over "
        "the k lines of the patient with the most, (kε, k e^((k-1)ε) δ); vacuous when that δ is at least 1.",
        f"Best lower bound: the largest over the attacks of the empirical lower bound on ε (threshold chosen on one "
        f"half of members and non-members, bound on the other; Clopper-Pearson; all attacks of a target hold together "
        f"with confidence {confidence:g}, Bonferroni), at the accountant's δ; attack: the attack that gave it "
        "(bounds_by_attack.csv holds every attack's). A bound above the accountant's ε fails the run.",
        "Strongest attack: the attack with the highest AUC on that target; AUC and TPR (in %) are its, with the "
        "patient-bootstrap 95% interval in brackets (n.r.: FPR below 1 / non-members, not resolvable).",
        "MLM loss: mean masked energy of the non-member samples (held-out masked-LM loss, nats); pseudo-perplexity: "
        "exp of the token-weighted mean normalized energy of the same samples; 95% patient-bootstrap intervals.",
    ]
    return "\n".join([markdown_table(header, body), *notes]) + "\n"


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


# ----------------------------------------------------------------------------------- one run of the audit


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
        "unit": dp.get("unit", "sample"),
        "noise_multiplier": float(dp.get("noise_multiplier", math.nan)),
        "max_grad_norm": math.nan if dp.get("max_grad_norm") is None else float(dp["max_grad_norm"]),
        "clipped_share": math.nan if dp.get("clipped_share") is None else float(dp["clipped_share"]),
        "training_units": int(dp.get("units", 0)),
        "samples_per_patient_max": patient.get("k"),
        "patient_epsilon": patient_eps,
        "patient_delta": patient_delta,
        "patient_vacuous": bool(patient.get("vacuous", not patient_delta < 1)) if math.isfinite(patient_eps) else False,
    }


def run_audit(
    plan: dict[str, dict],
    attack_tables: dict[str, pd.DataFrame],
    metrics_tables: dict[str, pd.DataFrame],
    train_infos: dict[str, dict | None],
    universes: dict[str, dict],
    settings: dict,
    log=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The audit of every DP target of `plan` (`mlmia.defences.workflow.audit_plan`): (one row per
    target, one row per target and attack). `settings`: confidence, seed, fpr (config
    `dp_audit`), bootstrap and bootstrap_seed (the metrics'). Fails (`check_bounds`) when a bound
    exceeds its target's accountant epsilon, after logging every bound."""
    summary, bounds = [], []
    for target, item in plan.items():
        where = f"DP audit: target {target!r} (experiment {item['experiment']!r})"
        record = accountant_record(train_infos.get(target), target)
        table = attack_tables[target]
        found = attack_bounds(table, item["attacks"], record["delta"], settings["confidence"], settings["seed"], target)
        bounds.append(found)
        best = found.loc[found["epsilon_lb"].idxmax()] if found["epsilon_lb"].max() > 0 else None
        row = {"target": target, "experiment": item["experiment"], **record,
               "epsilon_lb": float(found["epsilon_lb"].max()),
               "bound_attack": best["attack"] if best is not None else "none (all 0)",
               "bound_threshold": float(best["threshold"]) if best is not None else math.nan,
               "members": int(found["members"].iloc[0]), "nonmembers": int(found["nonmembers"].iloc[0]),
               **strongest(metrics_tables[target], list(item["attacks"]), settings["fpr"]),
               **utility(table, item["masked_column"], item["normalized_column"], universes.get(target),
                         settings["bootstrap_seed"], settings["bootstrap"], where)}  # fmt: skip
        summary.append(row)
    summary = pd.DataFrame(summary)
    bounds = pd.concat(bounds, ignore_index=True)
    if log is not None:
        for row in bounds.itertuples(index=False):
            eps = summary.set_index("target").loc[row.target, "accountant_epsilon"]
            log.info("%s / %s: eps >= %.4f (accountant eps %s)", row.target, row.attack, row.epsilon_lb, eps)
    check_bounds(bounds, dict(zip(summary["target"], summary["accountant_epsilon"])))
    return summary, bounds
