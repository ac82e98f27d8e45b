"""Bring your own: the tables spec of an audit, generated from the `audit:` config section.

An audit crosses targets x references x non-member sources x length buckets x energy kinds x
levels; each combination is one experiment and one column of the table `audit`. Each experiment
carries the audit's attacks (`audit_attacks`): `audit.attacks`, or every built-in attack the
config gives its inputs without more scoring than the audit's energies (the paper's two, zlib,
Min-K%, Min-K%++ and the blind baseline; with a `references:` pool, LiRA and RMIA, and multivariate
LiRA and InfoRMIA where the pool's tokenizer is not known to differ from the targets'). The rows are the paper's overview rows, then the AUC and TPR at 1% FPR of every
other attack, then the counts; the figures are ROC curves of every sample-level experiment
(linear and log FPR) and the likelihood-ratio histogram of the first one. The result has the shape
of config/tables.yaml, so the one renderer draws it.
"""

from __future__ import annotations

import itertools
import re

from mlmia.attacks.base import MODEL_ROLES, builtin_attack_names, get_attack
from mlmia.core.errors import UserError
from mlmia.study.checks.refusal import rekeyed
from mlmia.study.checks.tokenization import pool_tokenizer, scoring_tokenizer, tokenizer_difference
from mlmia.study.plans.cards import PAPER_ATTACK
from mlmia.terms.scores import PATTERN_SIZES, TOKEN_COLUMNS

#: the paper's attacks, (A) and (B), by the tag the paper's rows print
PAPER_TAGS = {"loss": "(A)", "likelihood_ratio": "(B)"}
PAPER_ROWS = [
    {"metric": "auc", "attack": "loss", "label": "AUC (A)"},
    {"metric": "auc", "attack": "likelihood_ratio", "label": "AUC (B)"},
    {"metric": "precision", "attack": "loss", "threshold": "population", "label": "Prec. (A, pop.)"},
    {"metric": "recall", "attack": "loss", "threshold": "population", "label": "Rec. (A, pop.)"},
    {"metric": "precision", "attack": "likelihood_ratio", "threshold": "population", "label": "Prec. (B)"},
    {"metric": "recall", "attack": "likelihood_ratio", "threshold": "population", "label": "Rec. (B)"},
    {"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.01, "label": "TPR@1%FPR (B)"},
    {"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.1, "label": "TPR@10%FPR (B)"},
]
COUNT_ROWS = [
    {"metric": metric, "role": role, "label": f"{what} ({role.replace('nonmember', 'non-member')})"}
    for role in ("member", "nonmember", "population")
    for metric, what in (("n_samples", "samples"), ("n_patients", "patients"))
]
#: what every attack of an audit gets a row of, beyond the paper's rows: (metric, FPR, printed as)
ATTACK_ROWS = (("auc", None, "AUC"), ("tpr_at_fpr", 0.01, "TPR@1%FPR"))
_NAME = re.compile(r"^[A-Za-z0-9_+-]+$")


#: the score-table columns whose entries follow the sample's tokens (its slots, its masking patterns)
SLOT_COLUMNS = (*TOKEN_COLUMNS, "per_pattern", PATTERN_SIZES)


def reads_reference_slots(attack) -> bool:
    """Whether an attack reads the reference pool's per-token (or per-pattern) evidence, which
    lines up with the target's only where each reference tokenizes the sample as the target."""
    return any(column.split("@")[0] in SLOT_COLUMNS for column in attack.inputs.get("references", ()))


def _other_tokenizer(config: dict) -> str | None:
    """Where the config shows the reference pool's tokenizer is not an audited target's, in words
    naming the models (no file's content); None where they are the same or the config cannot tell
    (`mlmia.study.checks.tokenization`: a hub id not in the local cache, a model the workflow has
    yet to train), and then an attack reading the slots refuses per sample at attack time."""
    pool = pool_tokenizer(config)
    for target in config["audit"]["targets"]:
        own = scoring_tokenizer(config, target)
        reason = pool and own and tokenizer_difference(pool, own)
        if reason:
            init = config["references"]["init"]
            return (
                f"a pool that tokenizes each sample as the target (it reads the references' evidence slot by slot): "
                f"the tokenizer of the pool's init {init!r} (references.init) is not the one of target {target!r} "
                f"({reason})"
            )
    return None


def _lacks(name: str, params: dict | None, config: dict) -> str | None:
    """What the config cannot give attack `name` on an audit's experiments, in words (None: it
    gives everything): a reference pool (`references:`) with what the attack needs of it, and
    for an attack that reads the pool's evidence per token or pattern (`reads_reference_slots`:
    multivariate LiRA, InfoRMIA) a pool whose tokenizer (its `references.init`'s) is the targets'
    (`_other_tokenizer`; where the files cannot tell, the attack refuses per sample when it runs);
    and the neighbour texts' model. Per-sample features come from the text, other energy kinds
    from more scoring of the same models: always there."""
    attack = get_attack(name, params)
    references = config.get("references")
    if "references" in attack.inputs:
        if not references:
            return "a reference pool (a references: section), which this config lacks"
        lack = attack.references_lack(int(references["count"]), bool(references["online"]))
        if lack:
            return lack
        if reads_reference_slots(attack):
            lack = _other_tokenizer(config)
            if lack:
                return lack
    if "neighbours" in attack.inputs:
        model = config["neighbours"]["model"]
        if model not in config.get("models", {}):
            return f"neighbour texts from neighbours.model ({model!r} is not a configured model)"
    return None


def _default(name: str, params: dict | None, config: dict) -> bool:
    """Whether an audit carries attack `name` by default: it reads the experiment's energy kind
    only (no other scoring pass, no neighbour texts) and the config gives it all (`_lacks`)."""
    attack = get_attack(name, params)
    own_kind = all("@" not in column for columns in attack.inputs.values() for column in columns)
    return own_kind and "neighbours" not in attack.inputs and _lacks(name, params, config) is None


def reads_a_model(name: str) -> bool:
    """Whether attack `name` reads some model's scores (the blind baseline reads none)."""
    return bool(set(get_attack(name).inputs) & set(MODEL_ROLES))


def audit_attacks(config: dict) -> list[str]:
    """The attacks of an audit's experiments: `audit.attacks` as given, each refused in one line
    naming its item when the config cannot give its inputs, and with the paper's attack among
    them (the audit card reports it); by default (null) every built-in attack that fits
    (`_default`): the paper's two first, then the others in the registry's order, those that read
    no model last."""
    params = config.get("attacks") or {}
    given = config["audit"].get("attacks")
    if given is None:
        fitting = [name for name in builtin_attack_names() if _default(name, params.get(name), config)]
        ordered = [
            *PAPER_TAGS,
            *(n for n in fitting if reads_a_model(n)),
            *(n for n in fitting if not reads_a_model(n)),
        ]
        return list(dict.fromkeys(ordered))
    for i, name in enumerate(given):
        key = f"audit.attacks[{i}]"
        try:
            lack = _lacks(name, params.get(name), config)
        except UserError as exc:
            raise (exc if str(exc).startswith("config key ") else rekeyed(exc, key)) from None
        if lack:
            raise UserError(f"config key {key}: {name!r} needs {lack}")
    if PAPER_ATTACK not in given:
        raise UserError(
            f"config key audit.attacks: leaves out {PAPER_ATTACK}, the paper's attack that every audit card reports "
            "beside the strongest; list it"
        )
    return list(given)


def audit_rows(attacks: list[str]) -> list[dict]:
    """The audit table's rows: the paper's rows of the attacks carried, then for every attack the
    `ATTACK_ROWS` the paper's do not already hold (one block per metric), then the counts."""
    paper = [row for row in PAPER_ROWS if row["attack"] in attacks]
    held = {(row["metric"], row["attack"], row.get("fpr")) for row in paper}
    extra = []
    for metric, fpr, what in ATTACK_ROWS:
        for name in attacks:
            if (metric, name, fpr) in held:
                continue
            tag = PAPER_TAGS.get(name)
            label = f"{what} {tag}" if tag else f"{what}: {get_attack(name).label}"
            extra.append({"metric": metric, "attack": name, **({"fpr": fpr} if fpr else {}), "label": label})
    return paper + extra + COUNT_ROWS


def _check_pool(config: dict, targets: list[str]) -> None:
    """An audit's reference pool trains on halves of the audit's own sample table (its members and
    non-members, never its population or held-in members: `mlmia.data.splits`), and never
    continues a model under audit (it would have seen the members)."""
    references, audit = config["references"], config["audit"]
    if references["dataset"] != audit["dataset"]:
        raise UserError(
            f"config key references.dataset: {references['dataset']!r} is not the audit's dataset "
            f"{audit['dataset']!r} (audit.dataset): the pool's splits are drawn on the audited patients"
        )
    if references.get("init") in targets:
        raise UserError(
            f"config key references.init: {references['init']!r} is an audited target (audit.targets); a reference "
            "continued from it would have seen its members: name a model that never did"
        )


def audit_spec(config: dict) -> dict:
    """Experiments, one table (`audit`) and three figures for the audit that `config`'s `audit:`
    section describes (its `datasets`, `models`, `references`, `attacks` and `neighbours` read too)."""
    audit, datasets, models = config["audit"], config.get("datasets", {}), config.get("models", {})
    dataset = audit["dataset"]
    if dataset in config.get("imported", {}).get("datasets", {}):
        raise UserError(
            f"config key audit.dataset: {dataset!r} is an imported score set (imported.datasets); an audit scores the "
            f"text of a dataset of sample files with its models (datasets: {', '.join(datasets) or 'none'})"
        )
    if dataset not in datasets:
        raise UserError(
            f"config key audit.dataset: {dataset!r} is not a configured dataset "
            f"(datasets: {', '.join(datasets) or 'none'})"
        )
    for key in ("targets", "references"):
        for name in audit[key]:
            if name not in models:
                raise UserError(
                    f"config key audit.{key}: {name!r} is not a configured model "
                    f"(models: {', '.join(models) or 'none'})"
                )
            if not _NAME.match(name):
                raise UserError(f"config key audit.{key}: model name {name!r} may hold only letters, digits, _ + -")
    same = sorted(set(audit["targets"]) & set(audit["references"]))
    if same:
        raise UserError(
            f"config key audit.references: {same[0]!r} is also a target (a model against itself: every ratio 0)"
        )
    attacks = audit_attacks(config)
    pool = any("references" in get_attack(name).inputs for name in attacks)
    if pool:
        _check_pool(config, list(audit["targets"]))
    neighbours = any("neighbours" in get_attack(name).inputs for name in attacks)
    axes = {
        "target": list(audit["targets"]),
        "reference": list(audit["references"]),
        "nonmembers": list(audit["nonmembers"]),
        "length": list(audit["lengths"]),
        "energy": list(audit["energies"]),
        "level": list(audit["levels"]),
    }
    alpha = float(audit["alpha"])
    varying = [axis for axis, values in axes.items() if len(values) > 1]
    experiments, columns = {}, []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        name = "__".join(str(values[axis]) for axis in axes)
        experiments[name] = {
            "dataset": dataset,
            "target": values["target"],
            "reference": values["reference"],
            "nonmembers": values["nonmembers"],
            "population": audit["population"],
            "energy": values["energy"],
            "length": None if values["length"] == "all" else values["length"],
            "level": values["level"],
            **({"references": "pool"} if pool else {}),
            **({"neighbours": True} if neighbours else {}),
        }
        header = ", ".join(str(values[axis]) for axis in varying) or f"{values['target']} vs {values['reference']}"
        columns.append({"id": name, "header": header, "experiment": name, "alpha": alpha})
    samples = [name for name, e in experiments.items() if e["level"] == "sample"]
    title = f"Audit of {', '.join(axes['target'])} on dataset {dataset}"
    others = [get_attack(name).label for name in attacks if name not in PAPER_TAGS]
    caption = (
        f"Reference(s): {', '.join(axes['reference'])}; non-members from source(s) "
        f"{', '.join(axes['nonmembers'])}; population (threshold) from {audit['population']}; "
        f"threshold at alpha = {alpha:g}. (A) the target's loss, (B) the likelihood ratio"
        + (f"; also {', '.join(others)}" if others else "")
        + (" (reference pool: the references: section's models)" if pool else "")
        + "."
    )
    figures = {}
    if samples:
        labels = {name: next(c["header"] for c in columns if c["id"] == name) for name in samples}
        drawn = [name for name in ("likelihood_ratio", "loss") if name in attacks]
        figures = {
            "audit_roc": {
                "kind": "roc",
                "title": f"ROC: {title}",
                "experiments": samples,
                "labels": labels,
                "attacks": drawn,
            },
            "audit_roc_log": {
                "kind": "roc",
                "title": f"ROC, log-scale FPR: {title}",
                "experiments": samples,
                "labels": labels,
                "log_x": True,
                "attacks": drawn,
            },
            "audit_hist": {
                "kind": "histogram",
                "title": f"Likelihood ratio L, members vs non-members ({labels[samples[0]]})",
                "experiment": samples[0],
                "attack": "likelihood_ratio",
                "alpha": alpha,
                "protocol": "corrected",
                **({} if "loss" in attacks else {"mark": "none"}),
            },
        }
    return {
        "experiments": experiments,
        "row_sets": {"overview": audit_rows(attacks)},
        "tables": {"audit": {"title": title, "caption": caption, "rows": "overview", "columns": columns}},
        "figures": figures,
    }
