"""The audit card of one model (`snakemake audit_cards`; docs/audit_cards.md): one page that answers a
data owner, a report over what the workflow measured.

`write_card` reads the files the card's plan names (`mlmia.study.plans.cards`: which sections the
config runs for the model, decided there, never by which files exist) and writes the card as
Markdown, its numbers as JSON and its ROC curves as a PNG:

- how to read the card (`mlmia.report.card_reading`): the threat model and each attack's access,
  that every number is a lower bound, the scale;
- membership inference (`mlmia.report.card_attacks`): the paper's attack and the strongest attack of
  the model's experiment, at the sample and the patient level, what would resolve the numbers the
  report half cannot, and the ROC curves of the sample level (`mlmia.report.figures.plot_card_roc`);
  where the experiment has an attack with per-slot scores (InfoRMIA), which kinds of token carry
  its signal (`token_kinds`, from `attack/<experiment>.token_kinds.csv`: kinds and numbers only);
- PHI extraction (the extraction study's rates and paired differences, all kinds pooled);
- canary exposure (the canary target's exposure per insertion count at its last epoch, and the
  canaries' membership test): a model of the audited one's shape, not the audited model;
- the DP audit (the target's audit record: the claimed and the accountant's epsilon, each audit's
  lower bound, the mechanism fit, the simulated power at its shape, the mechanism checks, the
  verdict: whether the audits refuted the claimed epsilon,
  `dp_verdict`);
- the vocabulary check (`mlmia.report.vocabulary`);
- the sections not run, and why; the provenance: the config's digest, the code's, every input's,
  the library's version and the date.

Counts, rates and digests only: nothing here reads a sample's text, and no value of a patient reaches a card.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.core.io import write_text
from mlmia.core.provenance import file_digest
from mlmia.report.card_attacks import REPORT, SELECTION, attack_label, membership_scores
from mlmia.report.card_reading import reading_lines, resolve_lines, to_resolve
from mlmia.report.figures import plot_card_roc
from mlmia.report.markdown import markdown_table
from mlmia.report.style import apply_style, save_figure
from mlmia.report.vocabulary import PUBLIC, is_public, is_separated, public_line, vocabulary_markdown
from mlmia.terms.scores import SLOT_UNITS

SECTIONS = {"extraction": "PHI extraction", "canaries": "Canary exposure", "dp": "Differential privacy",
            "vocabulary": "Vocabulary check"}  # fmt: skip
#: what a card's JSON holds for a section the config does not run
NOT_RUN = "not run"


def _number(value: float, digits: int = 3) -> str:
    return "n.a." if value is None or not math.isfinite(value) else f"{value + 0.0:.{digits}f}"


def _interval(value: float, interval, digits: int = 3, scale: float = 1.0, signed: bool = False) -> str:
    """A number with its interval in brackets (where it has one)."""
    sign = "+" if signed else ""
    text = f"{value * scale + 0.0:{sign}.{digits}f}"
    low, high = interval
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{low * scale + 0.0:.{digits}f}, {high * scale + 0.0:.{digits}f}]"
    return text


# --------------------------------------------------------------------------- membership


def _tpr_cell(measure: dict, nonmembers: int, signed: bool = False) -> str:
    if not math.isfinite(measure["value"]):
        return f"not resolvable with {nonmembers} non-members"
    return _interval(measure["value"], measure["interval"], 1, 100.0, signed)


def _role(name: str, found: dict, settings: dict) -> str:
    """An attack's role at one level: the paper's, the strongest, or a baseline that reads no model."""
    words = [word for word, holds in (("paper's", name == settings["paper_attack"]),
                                      ("strongest", name == found["strongest"])) if holds]  # fmt: skip
    return ", ".join(words) or "no model (baseline)"


def membership_lines(result: dict, settings: dict, roc_file: str | None = None) -> list[str]:
    """The membership section: which experiment, how the halves were drawn, then per level the
    paper's attack, the strongest and the baselines on the report half, what would resolve what the
    report half cannot (`result["to_resolve"]`), and the ROC figure (`roc_file`, beside the card)."""
    experiment, fprs, paper = settings["experiment"], settings["fprs"], settings["paper_attack"]
    split = result["split"]

    def count(half, role):
        found = split[half].get(role, {"patients": 0, "samples": 0})
        return f"{found['patients']} {role.replace('nonmember', 'non-member')} patients ({found['samples']} samples)"

    length = experiment["length"] or "all"
    lines = [
        f"Experiment `{experiment['name']}`: members against the non-members of source `{experiment['nonmembers']}`, "
        f"{length} samples of `{experiment['dataset']}`, {experiment['energy']} energy, reference "
        f"`{experiment['reference']}`. Each role's patients split in two halves (seed {settings['seed']}): the "
        f"selection half, {count(SELECTION, 'member')} and {count(SELECTION, 'nonmember')}, chooses the strongest of "
        f"{len(settings['attacks'])} attacks by AUC; the report half, {count(REPORT, 'member')} and "
        f"{count(REPORT, 'nonmember')}, measures it beside the paper's attack, "
        f"{attack_label(paper)}, chosen before looking. All members against all non-members of the half; 95% "
        f"patient-bootstrap intervals over the report half ({settings['bootstrap']} resamples, every attack on the "
        "same ones); TPR in percent.",
    ]
    header = ["level", "attack", "AUC", *(f"TPR at {100 * f:g}% FPR" for f in fprs), "members / non-members"]
    body = []
    for level, found in result["levels"].items():
        units = f"{found['members']} / {found['nonmembers']}"
        for name, measures in found["attacks"].items():
            role = _role(name, found, settings)
            cells = [_interval(measures["auc"]["value"], measures["auc"]["interval"])]
            cells += [_tpr_cell(measures[f"tpr@{f:g}"], found["nonmembers"]) for f in fprs]
            body.append([level, f"{attack_label(name)}: {role}", *cells, units])
        if found["difference"]:
            diff = found["difference"]
            cells = [_interval(diff["auc"]["value"], diff["auc"]["interval"], signed=True)]
            cells += [_tpr_cell(diff[f"tpr@{f:g}"], found["nonmembers"], signed=True) for f in fprs]
            separated = "separated" if diff["auc"]["separated"] else "not separated"
            body.append([level, f"strongest − paper's (paired; AUC {separated})", *cells, units])
    lines += ["", markdown_table(header, body), ""]
    for level, found in result["levels"].items():
        ranked = sorted(found["selection_auc"].items(), key=lambda item: -item[1])
        shown = ", ".join(f"`{name}` {value:.3f}" for name, value in ranked[:5])
        more = f" and {len(ranked) - 5} more" if len(ranked) > 5 else ""
        lines.append(f"- {level} level, AUC on the selection half: {shown}{more}.")
    needed = resolve_lines(result["to_resolve"], fprs)
    if needed:
        lines += ["", *needed]
    if roc_file:
        lines += ["", f"![ROC curves, log false-positive rate: the paper's attack, the strongest and the baselines on "
                      f"the report half, sample level; vertical lines: the FPRs of the table]({roc_file})"]  # fmt: skip
    if settings["other_experiments"]:
        lines += ["", f"This model's other experiments (the tables): {', '.join(settings['other_experiments'])}."]
    return lines


# --------------------------------------------------------------------------- which tokens carry the signal

#: what the card keeps of a kind's row of the summary by token kind
TOKEN_NUMBERS = ("kind", "slots", "samples", "member_mean", "nonmember_mean", "difference", "ci_low", "ci_high",
                 "minus_other", "minus_other_low", "minus_other_high", "member_top_share", "nonmember_top_share")  # fmt: skip


def _separated(low: float, high: float) -> bool:
    return bool(math.isfinite(low) and math.isfinite(high) and (low > 0 or high < 0))


def token_kinds(summary: pd.DataFrame, section: dict) -> dict:
    """The card's numbers of "which tokens carry the signal" from an experiment's summary by token kind
    (`mlmia.memorization.token_kinds.kind_summary`; `section`: the plan's, its "attacks"): per attack
    its kinds ordered by the difference members − non-members (largest first, n.a. last), each
    "separated" where its interval excludes 0; the kinds separated above and below 0; and, against
    `OTHER` (the ordinary words), the kinds whose difference less other's (`minus_other`, its interval
    from the same patient resamples: paired) is separated above 0, below 0, or not separated."""
    from mlmia.terms.scores import OTHER_KIND as OTHER

    out = {"phi_from": str(summary["phi_from"].iloc[0]) if len(summary) else "", "attacks": {}}
    for name in section["attacks"]:
        part = summary[summary["attack"] == name]
        rows = []
        for row in part.to_dict(orient="records"):
            kept = {key: row[key] for key in TOKEN_NUMBERS}
            rows.append(kept | {"separated": _separated(float(row["ci_low"]), float(row["ci_high"]))})
        rows.sort(key=lambda r: -r["difference"] if math.isfinite(r["difference"]) else math.inf)
        other = next((r for r in rows if r["kind"] == OTHER), None)
        kinds = [r for r in rows if r["kind"] != OTHER]
        found = {
            "members": int(part["members"].iloc[0]) if len(part) else 0,
            "nonmembers": int(part["nonmembers"].iloc[0]) if len(part) else 0,
            "kinds": rows,
            "separated_above": [r["kind"] for r in rows if r["separated"] and r["difference"] > 0],
            "separated_below": [r["kind"] for r in rows if r["separated"] and r["difference"] < 0],
        }
        if other is not None:
            paired = [r for r in kinds if _separated(r["minus_other_low"], r["minus_other_high"])]
            found["above_other"] = [r["kind"] for r in paired if r["minus_other"] > 0]
            found["below_other"] = [r["kind"] for r in paired if r["minus_other"] < 0]
            found["not_separated_from_other"] = [r["kind"] for r in kinds if r not in paired]
        out["attacks"][name] = found
    return out


def _share(value: float) -> str:
    return "n.a." if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _signed(value: float, low: float, high: float) -> str:
    return "n.a." if not math.isfinite(value) else _interval(value, (low, high), 2, signed=True)


def _kinds(names: list[str]) -> str:
    return ", ".join(names) or "none"


def token_kind_lines(found: dict) -> list[str]:
    """ "Which tokens carry the signal", the membership section's last part (`token_kinds`'s numbers)."""
    from mlmia.terms.scores import OTHER_KIND as OTHER

    lines = ["### Which tokens carry the signal", ""]
    phi = found["phi_from"] or "no PHI table"
    for name, attack in found["attacks"].items():
        label, unit = attack_label(name), SLOT_UNITS.get(name, "the attack's score units")
        if not attack["kinds"]:
            lines += [f"{label} gave no per-slot scores on this table.", ""]
            continue
        lines += [
            f"Which kinds of token carry the signal of {label}, per slot (a slot: one masked token of one masking "
            f"pattern): each slot's score ({unit}; higher: more member-like) under the kind of PHI its token falls "
            f"in (PHI kinds from {phi}; {OTHER}: a token in no PHI span, the ordinary words), over all "
            f"{attack['members']} member and {attack['nonmembers']} non-member samples of the experiment (both "
            "halves: no attack is chosen here). Per kind, largest first: the members' mean slot score less the "
            "non-members', with its 95% patient-bootstrap interval, separated where it excludes 0; that difference less "
            f"{OTHER}'s, its interval from the same resamples (paired); and the share of "
            "members, against non-members, whose highest-scoring slot is of that kind (each column sums to "
            "100%). Kinds and numbers only.",
            "",
        ]
        body = [[r["kind"], f"{int(r['slots']):,}", _signed(r["difference"], r["ci_low"], r["ci_high"]),
                 "separated" if r["separated"] else "not separated",
                 "–" if r["kind"] == OTHER else _signed(r["minus_other"], r["minus_other_low"], r["minus_other_high"]),
                 _share(r["member_top_share"]), _share(r["nonmember_top_share"])] for r in attack["kinds"]]  # fmt: skip
        header = ["kind", "slots", f"members − non-members ({unit})", "interval", f"less {OTHER}'s (paired)",
                  "top slot: members", "top slot: non-members"]  # fmt: skip
        lines += [markdown_table(header, body), ""]
        text = (f"Separated from 0: members' slots score higher for {_kinds(attack['separated_above'])}; lower for "
                f"{_kinds(attack['separated_below'])}.")  # fmt: skip
        other = next((r for r in attack["kinds"] if r["kind"] == OTHER), None)
        if [r["kind"] for r in attack["kinds"]] == [OTHER]:
            text += f" Every slot is {OTHER} (PHI kinds from {phi}): no kind to tell apart from the ordinary words."
        elif "above_other" in attack:
            shown = _interval(other["difference"], (other["ci_low"], other["ci_high"]), 2, signed=True)
            text += (f" Against the ordinary words ({OTHER}, {shown}), each kind's difference less {OTHER}'s, its "
                     "interval from the same patient resamples (paired): separated above for "
                     f"{_kinds(attack['above_other'])}, below for {_kinds(attack['below_other'])}, not separated for "
                     f"{_kinds(attack['not_separated_from_other'])}.")  # fmt: skip
        else:
            text += f" No {OTHER} slot: the card does not compare the kinds with the ordinary words."
        lines += [text, ""]
    return lines[:-1]


# --------------------------------------------------------------------------- the studies' sections


def _rate(rates: pd.DataFrame, model: str, role: str, level: str, metric: str) -> str:
    found = rates[(rates["model"] == model) & (rates["role"] == role) & (rates["level"] == level)
                  & (rates["metric"] == metric) & (rates["kind"] == "all")]  # fmt: skip
    if found.empty:
        return "–"
    row = found.iloc[0]
    if row["value"] == 0:
        return f"0 of {int(row['units'])}"
    return _interval(row["value"], (row["ci_low"], row["ci_high"]), 1, 100.0)


def extraction_lines(rates: pd.DataFrame, differences: pd.DataFrame, section: dict) -> list[str]:
    """PHI extraction, all kinds pooled: the target's rates on members and non-members and the
    reference's on members, and the two paired differences, per level and reading."""
    target, reference, top_k = section["target"], section["reference"], section["top_k"]
    body = []
    for level in ("sample", "patient"):
        for metric, reading in (("top1", "top-1"), ("topk", f"top-{top_k}")):
            cells = [_rate(rates, target, "member", level, metric), _rate(rates, target, "nonmember", level, metric),
                     _rate(rates, reference, "member", level, metric)]  # fmt: skip
            for name in ("members_vs_nonmembers", "target_vs_reference"):
                found = differences[(differences["comparison"] == name) & (differences["kind"] == "all")
                                    & (differences["level"] == level) & (differences["metric"] == metric)]  # fmt: skip
                row = found.iloc[0] if len(found) else None
                cells.append("–" if row is None else _interval(row["difference"], (row["ci_low"], row["ci_high"]), 1,
                                                               100.0, signed=True))  # fmt: skip
            body.append([level, reading, *cells])
    header = ["level", "reading", "members", f"non-members ({', '.join(section['sources'])})",
              f"`{reference}` on members", "members − non-members", "target − reference"]  # fmt: skip
    return [
        "Each PHI value of a patient masked where a sample holds it and read back by this model and by "
        f"`{reference}`, which never saw the patients; every kind pooled (tables/table_extraction.md has each kind). "
        'Rates in percent with 95% patient-bootstrap intervals, differences in points (paired); "0 of n": no unit '
        "gave its value back.",
        "",
        markdown_table(header, body),
    ]


def canary_lines(exposure: pd.DataFrame, membership_metrics: pd.DataFrame, section: dict) -> list[str]:
    """Canary exposure at the canary target's last epoch per insertion count (exact), and the
    canaries' membership test."""
    last = exposure[(exposure["epoch"] == section["epochs"]) & (exposure["estimate"] == "exact")]
    body = [[("never" if r.repetitions == 0 else f"{int(r.repetitions)}"), int(r.n_canaries), f"{r.mean:.2f}",
             f"{r.min:.2f} – {r.max:.2f}"] for r in last.sort_values("repetitions").itertuples()]  # fmt: skip
    space = float(last["log2_space"].iloc[0]) if len(last) else float("nan")
    lines = [
        f"**Measured on a canary target, not on this model:** a model the workflow trained in this model's shape and "
        f"settings (canaries.shape: `{section['shape']}`) on the world's target corpus, with secrets of "
        f"{section['digits']} digits inserted {', '.join(map(str, section['repetitions']))} times (and some never). "
        "It says how readily a model of this kind memorises a repeated secret, not what this model holds. The "
        f"secrets' exposure (Carlini et al. 2019, exact, in bits; at most log2 |R| = {space:.1f}) after "
        f"{section['epochs']} epochs:",
        "",
        markdown_table(["insertions", "canaries", "mean exposure", "min – max"], body),
        "",
    ]
    found = membership_metrics[(membership_metrics["canaries"].astype(str) == "all")
                               & (membership_metrics["metric"] == "auc") & membership_metrics["replicate"].isna()]  # fmt: skip
    for row in found.itertuples():
        lines.append(f"- membership test on the canary sentences (the canary target's), {attack_label(row.attack)} "
                     f"against `{section['reference']}`: AUC {_interval(row.value, (row.ci_low, row.ci_high))}.")  # fmt: skip
    return lines


def dp_verdict(record: dict, section: dict) -> str:
    """What the DP audit says of the claim, in words that claim no more than an audit can show: "the
    claimed ε = x was not refuted by these audits (largest lower bound y, z of ε)", or "refuted: ..."
    with what refutes it (`mlmia.defences.audit.target_failures`): a lower bound above ε, a
    mechanism check below its level. The lower bounds are the one-run audits' and the attacks'
    (`epsilon_lb`); ε the accountant's for the training's settings, which the audit tests against.
    An audit that finds nothing bounds ε from below; it never shows the claim holds."""
    eps = record["accountant"]["accountant_epsilon"]
    claimed = section["claimed"] is not None and math.isfinite(eps)
    bounds = [(row["epsilon_lb"], f"the {row['audit']} one-run audit") for row in record["canary_audits"]]
    bounds += [(row["epsilon_lb"], f"attack `{row['attack']}`") for row in record["attacks"]]
    bounds = [(float(value), by) for value, by in bounds if value is not None and math.isfinite(value)]
    if bounds:
        value, by = max(bounds, key=lambda bound: bound[0])
        ratio = f", {value / eps:.2f} of ε" if claimed and eps > 0 else ""
        largest = f"largest lower bound {value:.3f}{ratio}, by {by}"
    else:
        largest = "no audit gave a lower bound"
    if record["failures"]:
        claim = f"the claimed ε = {section['claimed']:g} does not hold: " if claimed else ""
        return f"refuted: {claim}{'; '.join(record['failures'])} ({largest})"
    if not claimed:
        return f"no ε is claimed (no DP), so there is nothing to refute ({largest})"
    return f"the claimed ε = {section['claimed']:g} was not refuted by these audits ({largest})"


def dp_lines(record: dict, section: dict) -> list[str]:
    """The DP audit of the model: claimed and accountant epsilon, each audit's lower bound, checks, verdict."""
    accountant, private = record["accountant"], section["claimed"] is not None
    eps = accountant["accountant_epsilon"]
    if not private or not math.isfinite(eps):
        lines = [f"- claimed ε (models.{record['target']}.dp.epsilon): none, DP-SGD's loop without clipping or noise "
                 "(the audit's baseline)."]  # fmt: skip
    else:
        lines = [f"- claimed ε (models.{record['target']}.dp.epsilon): {section['claimed']:g}; the accountant's: "
                 f"{eps:.3f} at δ = {accountant['delta']:.3g} ({accountant['unit']} level)."]  # fmt: skip
    patient = accountant.get("patient_epsilon")
    if patient is not None and math.isfinite(patient):
        delta = "δ ≥ 1: vacuous" if accountant["patient_vacuous"] else f"δ = {accountant['patient_delta']:.3g}"
        lines.append(f"- patient level (the patient with the most lines, group privacy unless the training is per "
                     f"patient): ε = {patient:.3f}, {delta}; the membership section's patient level compares with "
                     "this.")  # fmt: skip
    for audit in record["canary_audits"]:
        lines.append(f"- {audit['audit']} one-run audit ({audit['guesses']} guesses, {audit['correct']} correct): "
                     f"ε ≥ {_number(audit['epsilon_lb'])}.")  # fmt: skip
    if record["attacks"]:
        best = max(record["attacks"], key=lambda row: row["epsilon_lb"])
        which = f" ({attack_label(best['attack'])})" if best["epsilon_lb"] > 0 else " (no attack bounds it above 0)"
        lines.append(f"- strongest attack bound over {len(record['attacks'])} attacks (threshold chosen on one half, "
                     f"bound on the other, at FPR {section['fpr']:g}): ε ≥ {_number(best['epsilon_lb'])}{which}.")  # fmt: skip
    failed = [check["check"] for check in record["checks"] if not check["passed"]]
    checks = "none" if not record["checks"] else ("passed" if not failed else "failed: " + ", ".join(failed))
    if private and math.isfinite(eps):
        lines += fit_lines(record) + power_lines(record)
    lines += [f"- mechanism checks: {checks}.",
              f"- verdict (confidence {section['confidence']:g}): {dp_verdict(record, section)}."]  # fmt: skip
    if private:
        lines.append("- ε covers the weights given the tokenizer: the vocabulary lies outside the guarantee (the "
                     "vocabulary check below).")  # fmt: skip
    return lines


def _fitted(row: dict, key: str) -> str:
    """A fitted parameter of the mechanism fit with its interval: n.a. where it has no estimate, not
    identified where an end of its interval is not finite."""
    value, low, high = (row[f"{key}{end}"] for end in ("", "_low", "_high"))
    shown = "n.a." if value is None or math.isnan(value) else f"{value:.3g}"
    finite = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
    return f"{shown} [{low:.3g}, {high:.3g}]" if finite else f"{shown} (interval not identified)"


def fit_lines(record: dict) -> list[str]:
    """The white-box mechanism fit (`mechanism_fit.fit_mechanism`: the record's mech_* keys): the
    fitted noise multiplier and rate against the claim, its p-value and whether its check passed."""
    row = next((a for a in record["canary_audits"] if "mech_p_value" in a), None)
    if row is None:
        return []
    p = row["mech_p_value"]
    shown = "n.a." if p is None or math.isnan(p) else f"{p:.2g}"
    return [f"- mechanism fit (a check of the claim's parameters, not a bound): noise multiplier "
            f"{_fitted(row, 'mech_noise_multiplier')} against σ = {row['mech_claimed_noise_multiplier']:.4g}; rate "
            f"{_fitted(row, 'mech_rate')} against q = {row['mech_claimed_rate']:.4g}; p = {shown}, "
            f"{'passed' if row['mech_passed'] else 'FAILS'} (level {row['mech_level']:g})."]  # fmt: skip


def power_lines(record: dict) -> list[str]:
    """What the audit's checks catch at the target's shape, simulated (the record's `power`,
    `fault_simulation.target_power`); nothing for a record written before it was measured."""
    if "power" not in record:
        return []
    found, head = record["power"], "- simulated power at this target's shape"
    if found is None:
        return [f"{head}: not simulated (the target trains without gradient canaries)."]
    if not found["runs"]:
        return [f"{head}: not measured (dp_audit.power_runs: 0)."]
    runs, ladders = found["runs"], found["ladder"]
    caught = []
    for kind, value in found["mildest"].items():
        if not value:
            caught.append(f"no {kind} fault up to {ladders[kind][-1]}")
            continue
        milder = ladders[kind][: ladders[kind].index(value["size"])]
        caught.append(f"{kind} {value['size']}" + (f" (not {', '.join(milder)})" if milder else ""))
    firsts = ", ".join(f"{kind} {ladder[0]}" for kind, ladder in ladders.items())
    flagged = round(found["false_positive"] * runs)
    return [f"{head} ({runs} simulated runs per fault, one training run's record, each check at its level): the "
            f"checks together flag {', '.join(caught)} in at least {found['power']:g} of the runs; nothing milder "
            f"than {firsts} was simulated; a simulated correct trainer is flagged in {flagged} of {runs} runs."]  # fmt: skip


def vocabulary_lines(rows: pd.DataFrame, section: dict) -> list[str]:
    first = rows.iloc[0]
    if is_public(rows):
        return [public_line(first["tokenizer"])]
    separated = sorted({r.kind for r in rows[rows["row"] == "difference"].itertuples() if is_separated(r.separated)})
    return [
        f"How many of the patients' identifying values ({section['values']}) this model's tokenizer "
        f"({first['tokenizer']}, {int(first['vocabulary_size'])} entries) reads as one entry of its vocabulary: whole "
        "entries / values per role (share in percent, 95% patient-bootstrap interval), and the paired differences in "
        "points. The vocabulary ships with the model; a value kept whole because the training text repeats it tells "
        f"members from others. Separated (interval excludes 0): {', '.join(separated) or 'none'}.",
        "",
        *vocabulary_markdown(rows),
    ]


# --------------------------------------------------------------------------- the card


def _read(inputs: dict, key: str):
    path = Path(inputs[key])
    return json.loads(path.read_text()) if path.suffix == ".json" else pd.read_csv(path)


def card(
    settings: dict, inputs: dict[str, str], provenance: dict, roc_file: str | None = None
) -> tuple[str, dict, dict]:
    """The card's Markdown, its numbers and the report half's scores of the attacks it shows ({level:
    {attack: frame}}, for its ROC figure `roc_file`), from the files `inputs` names (`_card_inputs`
    of the plan)."""
    model, sections = settings["model"], settings["sections"]
    result, scores = membership_scores(pd.read_parquet(inputs["attack"]), settings)
    result["to_resolve"] = to_resolve(result, settings["fprs"])
    numbers = {"model": model, "membership": result}
    lines = [f"# Audit card: {model}", "", f"Model `{model}`, {settings['origin']}; run `{settings['run']}`."]
    lines += ["", "## How to read this card", "", *reading_lines(result, settings)]
    lines += ["", "## Summary", "", *_summary(result, settings, sections, inputs)]
    lines += ["", "## Membership inference", "", *membership_lines(result, settings, roc_file)]
    if settings.get("token_kinds"):
        result["token_kinds"] = token_kinds(_read(inputs, "token_kinds"), settings["token_kinds"])
        lines += ["", *token_kind_lines(result["token_kinds"])]
    for key, title in SECTIONS.items():
        section = sections[key]
        lines += ["", f"## {title}", ""]
        if not section["run"]:
            lines.append(f"Not run: {section['why']}.")
            numbers[key] = NOT_RUN
        elif key == "extraction":
            rates, differences = _read(inputs, "extraction_rates"), _read(inputs, "extraction_differences")
            lines += extraction_lines(rates, differences, section)
            numbers[key] = rates[rates["kind"] == "all"].to_dict(orient="records")
        elif key == "canaries":
            exposure = _read(inputs, "canary_exposure")
            lines += canary_lines(exposure, _read(inputs, "canary_membership"), section)
            numbers[key] = exposure[exposure["epoch"] == section["epochs"]].to_dict(orient="records")
        elif key == "dp":
            record = _read(inputs, "dp_record")
            lines += dp_lines(record, section)
            numbers[key] = {k: record[k] for k in ("accountant", "canary_audits", "checks", "failures")}
        else:
            rows = _read(inputs, "vocabulary")
            lines += vocabulary_lines(rows, section)
            numbers[key] = rows.to_dict(orient="records")
    not_run = [f"{SECTIONS[k]}: {sections[k]['why']}" for k in SECTIONS if not sections[k]["run"]]
    lines += ["", "## Not run", "", "; ".join(not_run) + "." if not_run else "Every section ran for this model."]
    lines += ["", "## Provenance", "", *_provenance_lines(provenance)]
    numbers["provenance"] = provenance
    return "\n".join(lines) + "\n", numbers, scores


def _summary(result: dict, settings: dict, sections: dict, inputs: dict) -> list[str]:
    """The card's first lines: the strongest attack's AUC at each level, the DP verdict, the vocabulary's separation."""
    lines = []
    for level, found in result["levels"].items():
        strongest = found["attacks"][found["strongest"]]["auc"]
        paper = found["attacks"].get(settings["paper_attack"])
        text = (f"- {level} level: the strongest attack, `{found['strongest']}`, reaches AUC "
                f"{_interval(strongest['value'], strongest['interval'])} on the report half")  # fmt: skip
        if paper is not None and found["strongest"] != settings["paper_attack"]:
            text += f"; the paper's attack {_interval(paper['auc']['value'], paper['auc']['interval'])}"
        for name in (b for b in settings["baselines"] if b in found["attacks"]):
            baseline = found["attacks"][name]["auc"]
            text += f"; `{name}`, which reads no model, {_interval(baseline['value'], baseline['interval'])}"
        lines.append(text + " (0.5: chance).")
    if sections["dp"]["run"]:
        record = _read(inputs, "dp_record")
        lines.append(f"- DP audit: {dp_verdict(record, sections['dp'])}.")
    if sections["vocabulary"]["run"] and is_public(_read(inputs, "vocabulary")):
        lines.append(f"- vocabulary: the tokenizer is {PUBLIC}.")
    elif sections["vocabulary"]["run"]:
        rows = _read(inputs, "vocabulary")
        kinds = sorted({r.kind for r in rows[rows["row"] == "difference"].itertuples()
                        if is_separated(r.separated) and r.value > 0})  # fmt: skip
        lines.append(f"- vocabulary: members' values are whole entries more often than others' for "
                     f"{', '.join(kinds) or 'no kind'}.")  # fmt: skip
    return lines


def provenance(inputs: dict[str, str], config_digest: str, code_digest: str) -> dict:
    """What the card was made from: the config's and the code's digests, each input's, the library's
    version and the date (UTC)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = version("mlmia")
    except PackageNotFoundError:
        library = "unknown"
    return {"config": config_digest, "code": code_digest, "mlmia": library,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "inputs": {key: {"path": str(path), "sha256": file_digest(path)} for key, path in inputs.items()}}  # fmt: skip


def _provenance_lines(found: dict) -> list[str]:
    body = [[key, f"`{item['path']}`", item["sha256"]] for key, item in found["inputs"].items()]
    return [
        f"Config digest {found['config']} (the validated config's sections a card is made from, defaults filled in); code digest {found['code']} "
        f"(the library code the card's job runs); mlmia {found['mlmia']}; made {found['date']}. Inputs (sha256, first "
        "16 hex digits; a directory: its files' names and bytes):",
        "",
        markdown_table(["input", "path", "sha256"], body),
    ]


def write_card(settings: dict, inputs: dict[str, str], outputs: dict[str, str], config_digest: str, code: str) -> None:
    """The card of one model: `outputs["card"]` (Markdown), `outputs["numbers"]` (JSON) and
    `outputs["roc"]` (its ROC curves, PNG, linked from the Markdown by its name: they lie side by side)."""
    roc_file = Path(outputs["roc"]).name
    text, numbers, scores = card(settings, inputs, provenance(inputs, config_digest, code), roc_file)
    write_roc(scores, numbers["membership"], settings, outputs["roc"])
    write_text(text, outputs["card"])
    write_text(json.dumps(_plain(numbers), indent=1) + "\n", outputs["numbers"])


def write_roc(scores: dict, result: dict, settings: dict, path: str) -> None:
    """The card's ROC curves (`mlmia.report.figures.plot_card_roc`): the sample level's attacks on the
    report half, as the card's table shows them (the paper's, the strongest, the baselines), with the
    card's FPRs marked. Scores and the attacks' names only reach the figure, never a sample's text."""
    found = result["levels"].get("sample")
    shown = scores.get("sample", {}) if found else {}  # no level without a candidate attack: the axes only
    curves = {
        name: ((frame["role"] == "member").to_numpy(), frame["score"].to_numpy()) for name, frame in shown.items()
    }
    labels = {name: f"{get_attack(name).label}: {_role(name, found, settings)}" for name in shown}
    title = (f"{settings['model']}: report half, sample level\n{found['members']} members, {found['nonmembers']} "
             "non-members" if found else f"{settings['model']}: no attack at the sample level")  # fmt: skip
    style = apply_style(settings["style"])
    save_figure(plot_card_roc(curves, labels, settings["fprs"], style, title), [path], style)


def _plain(value):
    """`value` as plain JSON: numpy numbers as numbers, tuples as lists, NaN and infinity as null."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    return None if value is None or value is pd.NA else value
