"""How to read an audit card (`mlmia.report.cards`; docs/audit_cards.md): the section that opens
every card, and what would resolve the numbers the card cannot resolve.

- `reading_lines`: the threat model (who can query the model or holds its weights, and what each
  attack on the card reads: `access`, from the attack's declared inputs and the card's experiment),
  that every number is a lower bound on what that attack exposes, and the scale of AUC and TPR.
- `to_resolve` and `resolve_lines`: for an AUC whose interval holds 0.5, about how many patients on
  the report half would tell it from chance (`mlmia.metrics.intervals.patients_to_separate`); for a
  TPR at an FPR below 1 / non-members, how many non-members would resolve it
  (`mlmia.metrics.classification.nonmembers_to_resolve`).

Counts and attack names only: nothing here reads a sample.
"""

from __future__ import annotations

import math

from mlmia.attacks.base import MODEL_ROLES, get_attack
from mlmia.metrics.classification import nonmembers_to_resolve, resolvable
from mlmia.metrics.intervals import patients_to_separate
from mlmia.report.card_attacks import COMPARED, REPORT, attack_label

#: an AUC's chance level
CHANCE = 0.5


def _percent(fpr: float) -> str:
    return f"{100 * fpr:g}%"


def access(name: str, threat: dict) -> str:
    """What attack `name` reads, in words: one phrase per input role it declares (`Attack.inputs`),
    naming the models of the card's experiment (`threat`: `mlmia.study.plans.cards.card_settings`)."""
    phrases = []
    for role in get_attack(name).inputs:
        if role == "target":
            phrases.append("this model's masked-token probabilities")
        elif role == "reference":
            found = threat["reference"]
            origin = f", {found['origin']}" if found.get("origin") else ""
            phrases.append(f"a reference model's, `{found['name']}`{origin}")
        elif role == "references":
            pool = threat["references"] or {}
            online = " and of the tested patients (so, the tested notes themselves)" if pool.get("online") else ""
            phrases.append(f"{pool.get('count', 'several')} reference models the attacker trains, each on a random half "
                           f"of a pool of patients like the training data's{online}")  # fmt: skip
        elif role == "neighbours":
            found = threat["neighbours"] or {}
            phrases.append(f"this model's probabilities on {found.get('count', 'several')} neighbours of the note "
                           f"(copies with a token swapped, proposed by `{found.get('model', 'a masked LM')}`)")  # fmt: skip
        elif role == "sample":
            phrases.append("the note's text")
    if not set(get_attack(name).inputs) & set(MODEL_ROLES):
        phrases.append("no model: how far the members' notes differ from the non-members' without any model")
    return "; ".join(phrases)


def _roles(name: str, result: dict, settings: dict) -> str:
    """What an attack is on the card: the paper's, the strongest (at which levels), a baseline."""
    words = ["the paper's attack"] if name == settings["paper_attack"] else []
    levels = [level for level, found in result["levels"].items() if found["strongest"] == name]
    if levels:
        words.append(f"the strongest at the {' and '.join(levels)} level{'s' if len(levels) > 1 else ''}")
    if name in settings["baselines"]:
        words.append("a baseline")
    return ", ".join(words)


def reading_lines(result: dict, settings: dict) -> list[str]:
    """The card's opening section: who can attack and with what, lower bounds, the scale."""
    shown = dict.fromkeys(name for found in result["levels"].values() for name in found["attacks"])
    fprs = sorted(settings["fprs"], reverse=True)
    one_in = "; ".join(f"at {_percent(f)} FPR, 1 in {nonmembers_to_resolve(f):,}" for f in fprs)
    lines = [
        "**Who could attack, and with what.** Anyone who can query this model for its masked-token probabilities "
        "(a service that returns them, or anyone who holds its weights: a released model's weights give that and "
        "more) and who holds a note, or a patient's notes, whose presence in the training data they want to test. "
        "What each attack on this card reads:",
        "",
        *(
            f"- {attack_label(name)}, {_roles(name, result, settings)}: {access(name, settings['threat'])}."
            for name in shown
        ),  # fmt: skip
        "",
        "**Each number is a lower bound** on what leaks: it is what that attack exposes. A stronger attack (more "
        "reference models, the weights' gradients, an attack not yet published) may expose more; a high number "
        "shows leakage, a low one is not proof of safety.",
        "",
        "**The scale.** AUC: the chance that the attack ranks a random member above a random non-member; 0.5 is "
        "chance (it tells nothing), 1 tells every member apart. TPR at an FPR: the share of members the attack "
        f"exposes with a threshold that accuses at most that share of non-members ({one_in}); at "
        f"{_percent(fprs[-1])} almost no non-member is accused, and the TPR there is the number for the most exposed "
        "patients. Sample level: one note at a time; patient level: a patient's notes together. Intervals: 95%, "
        "patients resampled.",
        "",
        "**What the data cannot yet say.** An AUC whose interval holds 0.5 is not told apart from chance; a TPR at "
        "an FPR below 1 / non-members is not resolvable. Under the membership table the card says what would "
        "resolve each: for an AUC, about n × (half-width / |AUC − 0.5|)² patients on the report half (n: its "
        "patients now; an approximation: the interval's half-width shrinks like 1/√n); for a TPR at FPR f, at "
        "least 1 / f non-members on the report half.",
    ]
    sections = settings["sections"]
    if sections["canaries"]["run"]:
        lines += ["", "**Canary exposure** is measured on a model the workflow trained in this model's shape "
                      "(canaries.shape), not on this model itself."]  # fmt: skip
    if sections["dp"]["run"]:
        lines += ["", "**The DP verdict** says whether these audits refuted the claimed ε: \"not refuted\" means no "
                      "audit found more leakage than ε allows, not that the claim is proven."]  # fmt: skip
    return lines


def to_resolve(result: dict, fprs) -> dict:
    """Per level, what would resolve what the report half cannot: {"patients": on the report half,
    "nonmembers": units of the level, "auc": {attack: patients, or None at exactly chance} for each
    AUC whose interval holds 0.5, "tpr@<f>": non-members needed} for each TPR not resolvable."""
    split = result["split"][REPORT]
    patients = sum(split.get(role, {"patients": 0})["patients"] for role in COMPARED)
    out = {}
    for level, found in result["levels"].items():
        auc = {}
        for name, measures in found["attacks"].items():
            value, (low, high) = measures["auc"]["value"], measures["auc"]["interval"]
            if patients and all(map(math.isfinite, (value, low, high))) and low <= CHANCE <= high:
                auc[name] = patients_to_separate(value, (low, high), patients, CHANCE)
        tpr = {f"tpr@{f:g}": nonmembers_to_resolve(f) for f in fprs if not resolvable(f, found["nonmembers"])}
        out[level] = {"patients": patients, "nonmembers": found["nonmembers"], "auc": auc, **tpr}
    return out


def resolve_lines(needed: dict, fprs) -> list[str]:
    """`to_resolve` in words, one line per AUC and per TPR (none when everything is resolved)."""
    lines = []
    for level, found in needed.items():
        for name, patients in found["auc"].items():
            text = f"- {level} level, `{name}`: its AUC interval holds 0.5; "
            if patients is None:
                text += "no number of patients: the estimate sits at chance."
            else:
                text += (f"about {patients:,} patients on the report half would tell it from chance if the "
                         f"estimate held (it has {found['patients']:,}).")  # fmt: skip
            lines.append(text)
        for f in fprs:
            if f"tpr@{f:g}" in found:
                unit = "non-member patients" if level == "patient" else "non-member samples"
                lines.append(f"- {level} level, TPR at {_percent(f)} FPR: not resolvable; at least "
                             f"{found[f'tpr@{f:g}']:,} {unit} on the report half would resolve it (it has "
                             f"{found['nonmembers']:,}).")  # fmt: skip
    if not lines:
        return []
    return [
        "What would resolve what the report half cannot (an AUC: about n × (half-width / |AUC − 0.5|)² patients, "
        "n those of the report half, an approximation since the half-width shrinks like 1/√n; a TPR at FPR f: at "
        "least 1 / f non-members; the whole experiment needs about twice as many, half of them on the selection "
        "half):",
        "",
        *lines,
    ]
