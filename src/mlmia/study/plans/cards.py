"""The audit cards (`snakemake audit_cards`, config `audit_cards`, rules/cards.smk; docs/audit_cards.md):
one page per audited model for a data owner, a report over what the other studies measured.

The audited models are the configured models that an experiment of the tables spec targets (whose
attack table the workflow builds: `Study.attack_experiments`), in the spec's order;
`audit_cards.models` chooses among them. What a card holds is decided here, from the config alone:

- membership inference: the attack table of one experiment of the model (`audit_cards.experiments`,
  else the one with the most attacks: `card_experiment`), the paper's attack (the likelihood ratio
  with the experiment's reference) and the strongest of that table's attacks; and which kinds of
  token carry the signal where the experiment has per-slot files (an attack with per-slot scores,
  InfoRMIA: `mlmia.study.plans.tokens.token_experiments`; none: the card says nothing of it);
- PHI extraction: for the model `extraction.target`, when the extraction study runs;
- canary exposure: for the model `canaries.shape`, whose shape and settings the canary target takes;
- the DP audit: for a model with a `dp` setting that the DP audit audits (`mlmia.study.plans.dp.dp_targets`);
- the vocabulary check: for every model, when the extraction study has identifying values (the
  embedded world's, or `extraction.phi`);
- provenance: always.

Each section the config does not run for the model is written "not run", with the reason; no section
depends on which files happen to exist."""

from __future__ import annotations

from mlmia.core.errors import UserError
from mlmia.core.provenance import config_digest
from mlmia.study.plans.base import RUN_ONLY_KEYS, Caption, Plan, Registration, Shown
from mlmia.study.plans.dp import dp_audit_outputs, dp_targets
from mlmia.study.plans.tokens import token_attacks, token_outputs

RULES = "rules/cards.smk"
#: the paper's attack, chosen before looking: the likelihood ratio with the experiment's reference
PAPER_ATTACK = "likelihood_ratio"
#: a card experiment's length bucket, preferred in this order (None: all samples)
LENGTH_ORDER = {None: 0, "long": 1, "short": 2}
CATEGORY = "Audit cards"
#: the report's label of a card and of its ROC figure (their `item`), and the figure's file beside the card
CARD_ITEM, ROC_ITEM = "card", "ROC curves"
ROC_SUFFIX = "_roc.png"


def audited_models(study) -> list[str]:
    """The configured models that an experiment of the tables spec targets, in the spec's order, as
    `audit_cards.models` chooses among them (null: all)."""
    targets = [study.experiments[name].target for name in study.attack_experiments()]
    audited = [model for model in dict.fromkeys(targets) if model in study.models]
    for model in study.config["audit_cards"]["experiments"]:
        if model not in audited:
            raise UserError(
                f"config key audit_cards.experiments.{model}: not an audited model (a configured model an experiment "
                f"of the tables spec targets: {', '.join(audited) or 'none'})"
            )
    chosen = study.config["audit_cards"]["models"]
    if chosen is None:
        return audited
    for model in chosen:
        if model not in audited:
            raise UserError(
                f"config key audit_cards.models: {model!r} is not an audited model (a configured model an experiment "
                f"of the tables spec targets: {', '.join(audited) or 'none'})"
            )
    return list(dict.fromkeys(chosen))


def card_experiment(study, model: str) -> str:
    """The experiment whose attack table a model's card reads: `audit_cards.experiments.<model>`, else
    among the model's experiments the one with the most attacks, then masked energy, then all samples,
    long, short, then the sample level, then the first in the spec (chosen from the config alone)."""
    given = study.config["audit_cards"]["experiments"].get(model)
    own = [name for name in study.attack_experiments() if study.experiments[name].target == model]
    if given is not None:
        if given not in own:
            raise UserError(
                f"config key audit_cards.experiments.{model}: {given!r} is not an experiment of the tables spec that "
                f"targets {model!r} ({', '.join(own)})"
            )
        return given

    def rank(item):
        index, name = item
        experiment = study.experiments[name]
        return (-len(study.experiment_attacks(name)), experiment.energy != "masked",
                LENGTH_ORDER.get(experiment.length, len(LENGTH_ORDER)), experiment.level != "sample", index)  # fmt: skip

    return min(enumerate(own), key=rank)[1]


def _origin(study, model: str) -> str:
    """Where a model comes from, in words (the card's first line)."""
    spec = study.models[model]
    if "path" in spec:
        return f"given by path ({spec['path']})"
    text = f"trained by the workflow on the corpus {spec['corpus']}"
    if spec.get("init"):
        text += f", continuing {spec['init']}"
    if spec.get("objective") not in (None, "mlm"):
        text += f" with the objective {spec['objective']}"
    return text


def _sections(study, model: str) -> dict[str, dict]:
    """Which studies the card reports for `model`: {section: {"run": bool, "why": reason when not, ...}}."""
    from mlmia.study.plans import STUDIES

    config = study.config
    out = {}
    extraction_runs = STUDIES["extraction"].runs(study)
    target = config["extraction"]["target"]
    if not extraction_runs:
        out["extraction"] = {
            "run": False,
            "why": "no PHI to read back (the embedded world's patients, or extraction.phi)",
        }
    elif model != target:
        out["extraction"] = {"run": False, "why": f"the extraction study reads back extraction.target ({target})"}
    else:
        out["extraction"] = {"run": True, "target": target, "reference": config["extraction"]["reference"],
                             "top_k": config["extraction"]["top_k"], "sources": config["extraction"]["sources"]}  # fmt: skip
    shape = config["canaries"]["shape"]
    if not STUDIES["canaries"].runs(study):
        out["canaries"] = {"run": False, "why": "the canary study runs on the embedded world only"}
    elif model != shape:
        out["canaries"] = {"run": False, "why": f"the canary target takes the shape of canaries.shape ({shape})"}
    else:
        canaries = config["canaries"]
        out["canaries"] = {"run": True, "shape": shape, "digits": canaries["digits"], "epochs": max(canaries["epochs"]),
                           "repetitions": sorted(set(canaries["repetitions"])), "reference": canaries["reference"]}  # fmt: skip
    dp = study.models[model].get("dp")
    if dp is None:
        out["dp"] = {"run": False, "why": f"not a DP model (models.{model} has no dp setting)"}
    elif model not in dp_targets(study):
        out["dp"] = {"run": False, "why": "a DP model that the DP audit does not audit (no dp_audit section)",
                     "claimed": dp.get("epsilon")}  # fmt: skip
    else:
        out["dp"] = {"run": True, "claimed": dp.get("epsilon"), "fpr": config["dp_audit"]["fpr"],
                     "confidence": config["dp_audit"]["confidence"]}  # fmt: skip
    if extraction_runs:
        out["vocabulary"] = {"run": True, "kinds": config["audit_cards"]["vocabulary_kinds"],
                             "values": "extraction.phi" if config["extraction"].get("phi") else "the embedded world"}  # fmt: skip
    else:
        out["vocabulary"] = {"run": False, "why": "no identifying values (the embedded world's, or extraction.phi)"}
    return out


def _card_inputs(study, model: str, experiment: str, sections: dict) -> dict[str, str]:
    """The files a model's card reads, by what it is (the model's own directory: rules/cards.smk)."""
    inputs = {"attack": study.path("attack", f"{experiment}.parquet")}
    if sections["extraction"]["run"]:
        inputs |= {"extraction_rates": study.path("extraction", "rates.csv"),
                   "extraction_differences": study.path("extraction", "differences.csv")}  # fmt: skip
    if sections["canaries"]["run"]:
        inputs |= {"canary_exposure": study.path("canaries", "exposure_table.csv"),
                   "canary_membership": study.path("canaries", "membership.csv")}  # fmt: skip
    if sections["dp"]["run"]:
        inputs["dp_record"] = dp_audit_outputs(study, model)["record"]
    if sections["vocabulary"]["run"]:
        inputs["vocabulary"] = study.path("extraction", "vocabulary", f"{model}.csv")
    if _token_kinds(study, experiment):
        inputs["token_kinds"] = token_outputs(study, experiment)["kinds"]
    return inputs


def _token_kinds(study, experiment: str) -> dict | None:
    """The membership section's part "which tokens carry the signal": for an experiment with per-slot
    files (one of `token_experiments`: an attack of its table gives per-slot scores, InfoRMIA), the
    attacks whose summary by token kind the card shows; None otherwise (the card says nothing of it)."""
    attacks = token_attacks(study, experiment)
    return {"attacks": attacks} if attacks else None


def _threat(study, experiment) -> dict:
    """The models the card's attacks read beside the audited one, for the card's threat model
    (`mlmia.report.card_reading.access`): the experiment's reference, the reference pool, the
    neighbours' proposer."""
    reference = experiment.reference
    pool, neighbours = study.config.get("references"), study.config.get("neighbours") or {}
    return {
        "reference": {"name": reference, "origin": _origin(study, reference) if reference in study.models else None},
        "references": {"count": pool["count"], "online": pool.get("online", True)}
        if experiment.references and pool else None,
        "neighbours": {"count": neighbours.get("count"), "model": neighbours.get("model")}
        if experiment.neighbours else None,
    }  # fmt: skip


def card_settings(study, model: str) -> dict:
    """Everything a model's card job passes to `mlmia.report.cards` (its params: a change reruns it)."""
    from mlmia.attacks.base import MODEL_ROLES, get_attack

    name = card_experiment(study, model)
    experiment = study.experiments[name]
    attacks = study.experiment_attacks(name)
    no_model = [a for a in attacks if not set(get_attack(a).inputs) & set(MODEL_ROLES)]
    return {
        "model": model,
        "run": study.run,
        "origin": _origin(study, model),
        "experiment": {
            "name": name,
            "dataset": experiment.dataset,
            "reference": experiment.reference,
            "nonmembers": experiment.nonmembers,
            "population": experiment.population,
            "length": experiment.length,
            "energy": experiment.energy,
        },  # fmt: skip
        "other_experiments": [
            e for e in study.attack_experiments() if study.experiments[e].target == model and e != name
        ],
        # the candidates for the strongest attack: every attack of the table that reads a model
        "attacks": [a for a in attacks if a not in no_model],
        "baselines": no_model,
        "paper_attack": PAPER_ATTACK,
        "attack_params": {a: study.attack_params(a) for a in attacks},
        "seed": study.config["audit_cards"]["seed"],
        "fprs": list(study.config["audit_cards"]["fprs"]),
        "bootstrap": study.metrics["bootstrap"],
        "bootstrap_seed": study.metrics["seed"],
        "sections": _sections(study, model),
        "token_kinds": _token_kinds(study, name),
        "threat": _threat(study, experiment),
        "style": study.figure_style,
    }


def cards_plan(study) -> Plan:
    """One card per audited model (`snakemake audit_cards`): results/<run>/cards/<model>.md and .json,
    and its ROC curves <model>_roc.png beside them (the card links it by name)."""
    models = audited_models(study)
    path = lambda file: study.path("cards", file)  # noqa: E731
    settings = {model: card_settings(study, model) for model in models}
    cards = {model: path(f"{model}.md") for model in models}
    numbers = {model: path(f"{model}.json") for model in models}
    rocs = {model: path(f"{model}{ROC_SUFFIX}") for model in models}
    return Plan(
        target="audit_cards",
        targets=[*cards.values(), *numbers.values(), *rocs.values()],
        outputs={"cards": cards, "numbers": numbers, "rocs": rocs},
        files={
            "card": path("{model}.md"),
            "numbers": path("{model}.json"),
            "roc": path("{model}" + ROC_SUFFIX),
            "inputs": {m: _card_inputs(study, m, s["experiment"]["name"], s["sections"]) for m, s in settings.items()},
        },
        settings={"models": models, "cards": settings, "config_digest": card_config_digest(study.config)},
        rules=(RULES,),
        report={
            **{card: Shown(CATEGORY, None, {"model": model, "item": CARD_ITEM}) for model, card in cards.items()},
            **{roc: Shown(CATEGORY, None, {"model": model, "item": ROC_ITEM}) for model, roc in rocs.items()},
        },
        caption=Caption(
            "Audit cards (docs/audit_cards.md): one page per audited model. Membership inference: the paper's "
            "likelihood ratio and the strongest attack of the model's experiment, chosen on one half of the patients "
            "and reported on the other, at the sample and the patient level (AUC, TPR at low FPR with "
            "patient-bootstrap intervals, or not resolvable, and what would resolve it), each a lower bound on what "
            "leaks; where the experiment has an attack with per-slot scores (InfoRMIA), which kinds of token (the PHI "
            "kinds, other words) carry its signal; the ROC curves of the paper's attack, the strongest and the "
            "baselines on the report half at the sample level, on a log false-positive axis with the card's FPRs "
            "marked; PHI extraction, canary exposure (on a model of the audited one's shape) and the DP audit "
            "(whether it refuted the claimed epsilon) where the config runs them for the model; the vocabulary check; "
            "the provenance (config, code and input digests). Counts and rates only."
        ),
    )


def card_inputs(study, plan: Plan, model: str) -> dict:
    """What a model's audit card reads (rules/cards.smk; `plan`: the cards'): the files the plan
    names, and the model's own directory (its digest is the card's provenance) unless it is a hub id."""
    own = study.model_input(model)
    return plan.files["inputs"][model] | ({"model": own} if own else {})


#: the config's sections a card's numbers are made from (its inputs' and its own settings): the
#: world or the user's files, the models, their scores, attacks and metrics, and the studies a
#: card reports. A section left out (the shadow studies, d-exposure, the figures' style, a study
#: added later) changes no card, so its edit reruns none.
CARD_SECTIONS = ("world", "tables_spec", "imported", "datasets", "raw", "audit", "corpus", "dp_corpus", "tokenizer",
                 "samples", "models", "training", "scoring", "references", "neighbours", "attacks", "metrics",
                 "extraction", "canaries", "dp_audit", "audit_cards")  # fmt: skip


def card_config_digest(config: dict) -> str:
    """The digest a card names as its config (`config_digest`): of the validated config's
    `CARD_SECTIONS` only, without the keys that choose how a job runs, not what it computes
    (`RUN_ONLY_KEYS`: the devices, the scoring batch size), so that changing one reruns no card."""
    sections = {key: config[key] for key in CARD_SECTIONS if key in config}
    for section, keys in RUN_ONLY_KEYS.items():
        if section in sections:
            sections[section] = {key: value for key, value in sections[section].items() if key not in keys}
    return config_digest(sections)


#: every config with a model that an experiment targets
REGISTRATION = Registration("audit_cards", lambda study: bool(audited_models(study)), cards_plan)
