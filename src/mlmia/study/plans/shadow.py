"""The shadow-model protocol of Hisamoto et al. (TACL 2020), on the masked language model
(`snakemake shadow`, config `shadow`) and on a translation target (`snakemake shadow_mt`, config
`shadow_mt`): one set of rules (rules/shadow.smk) serves both, each protocol's plan giving its
files, settings, resources and models; the scripts run either through `mlmia.shadow.protocols`.
Alice's and Bob's models, the paper's Tables 2-6, Figure 7 and the findings in
results/<run>/shadow/ (results/<run>/shadow_mt/)."""

from __future__ import annotations

from mlmia.study.plans.base import Caption, Plan, Registration, shown
from mlmia.terms.layout import (
    SHADOW_MT_PREFIX,
    SHADOW_PREFIX,
    TOKENIZER,
    WIKIPEDIA_REGISTER,
    WORLD,
    model_dir,
)

RULES = "rules/shadow.smk"
#: what the shadow protocol writes (in shadow/, and for the translation target in shadow_mt/)
SHADOW_FILES = {"tables_md": "tables.md", "tables_csv": "tables.csv", "figure_png": "figure7.png",
                "figure_pdf": "figure7.pdf", "findings_md": "findings.md", "findings_csv": "findings.csv"}  # fmt: skip
#: the protocols by config section: their models' prefix
PREFIXES = {"shadow": SHADOW_PREFIX, "shadow_mt": SHADOW_MT_PREFIX}


def shadow_training_spec(study, name: str) -> dict:
    """How a shadow MLM trains (rules/train.smk; `Study.training_spec`): on its training text,
    Alice with the shape of the model `shadow.alice` names, Bob's shadows with the shape
    `shadow.bob` names (the shape Bob guesses), each shadow with its own seed."""
    from mlmia.shadow.split import shadow_model_settings

    who = name[len(SHADOW_PREFIX) :]
    shape = study.config["shadow"]["alice" if who == "alice" else "bob"]
    given = study.model_settings(shape)  # resolved: its seed is there
    settings = shadow_model_settings(given, who, seed=given["seed"])
    return {"text": study.path("shadow", f"{who}.text.parquet"), "settings": settings, "init": None}


def shadow_mt_settings(config: dict, name: str) -> dict:
    """A translation model's settings: Alice's `shadow_mt.model`, Bob's shadows that with
    `shadow_mt.shadow_model` over it (the shape Bob guesses)."""
    from mlmia.shadow.split import shadow_model_settings

    spec = config["shadow_mt"]
    who = name.removeprefix(SHADOW_MT_PREFIX)
    settings = spec["model"] if who == "alice" else {**spec["model"], **spec["shadow_model"]}
    return shadow_model_settings(settings, who, seed=settings["seed"])


def shadow_models(config: dict, section: str = "shadow") -> list[str]:
    """A shadow protocol's models (`section`: `shadow`, the MLM, or `shadow_mt`, the translation
    target): Alice's target and Bob's shadows."""
    spec = config.get(section)
    if not spec:
        return []
    prefix = PREFIXES[section]
    return [f"{prefix}alice"] + [f"{prefix}bob_{s}" for s in range(spec["shadows"])]


def shadow_plan(study, name: str = "shadow") -> Plan:
    """A shadow protocol's plan (`name`: `shadow`, the masked language model, or `shadow_mt`, the
    translation target): Alice's and Bob's models, the paper's Tables 2-6, Figure 7 and the
    findings in results/<run>/<name>/. Its rules (rules/shadow.smk) build the protocol's corpus
    (from `files["corpus_inputs"]` with `settings["corpus"]`), split it, query each model
    (`settings["features"]`), and write the tables; the masked language models train through the
    workflow's one training rule (rules/train.smk), the translation models through the shadow
    rules' own (each model's settings in `settings["models"]`)."""
    translation = name == "shadow_mt"
    config = study.config.get(name, {})
    prefix = PREFIXES[name]
    names = [model.removeprefix(prefix) for model in shadow_models(study.config, name)]
    tables = {key: study.path(name, file) for key, file in SHADOW_FILES.items()}
    texts = "pairs" if translation else "text"
    scoring = study.resources("scoring")
    if translation:
        corpus_inputs = {}
        corpus_settings = {"corpus": config["corpus"], "seed": study.config["corpus"]["seed"]}
        features = {}  # the device is the features jobs' resource (`resources["features"]`)
        models = {who: shadow_mt_settings(study.config, f"{prefix}{who}") for who in names}
    else:  # the world's registers, and real Wikipedia prose for the out-of-domain probes
        corpus_inputs = {"world": study.path(WORLD), "domain": study.corpus_table("domain"),
                         "general": study.corpus_table("general"), "wikipedia": study.path(WIKIPEDIA_REGISTER)}  # fmt: skip
        corpus_settings = {}
        features = {"seed": config["seed"]}
        models = {}
    shown_items = {"tables_md": "Tables 2-6", "figure_png": "Figure 7", "findings_md": "findings"}
    subcategory = "translation target" if translation else "masked language model"
    on = (
        " on the translation target (encoder-decoders on the world's parallel corpus)"
        if translation
        else " on the masked language model"
    )
    return Plan(
        target=name,
        targets=list(tables.values()),
        outputs={"tables": tables},
        files={
            "corpus_inputs": corpus_inputs,
            "corpus": study.path(name, "corpus.parquet"),
            "split": study.path(name, "split.parquet"),
            "pairs": study.path(name, "pairs.parquet"),
            "texts": [study.path(name, f"{who}.{texts}.parquet") for who in names],
            "features": [study.path(name, f"features_{who}.parquet") for who in names],
            # one model's: its directory, training text (pairs), features ({who}: alice, bob_<s>)
            "model": study.path(model_dir(f"{prefix}{{who}}")),
            "training_text": study.path(name, f"{{who}}.{texts}.parquet"),
            "model_features": study.path(name, "features_{who}.parquet"),
            "tokenizer": study.path(TOKENIZER),
        },
        settings={
            "protocol": config,
            "names": names,
            "corpus": corpus_settings,
            "features": features,
            "models": models,
            "style": study.figure_style,
        },
        resources={"train": study.resources("training"), "features": scoring},
        rules=(RULES,),
        report=shown(tables, shown_items, "Shadow models", subcategory),
        caption=Caption(
            f"The shadow-model protocol of Hisamoto et al. (TACL 2020){on}: the paper's Tables 2-6 (Bob's "
            "classifier on Alice's probes), Figure 7 (the top-N% sweep) and the findings, each with its "
            "bootstrap interval."
        ),
    )


REGISTRATIONS = (
    Registration(
        "shadow",
        runs=lambda study: bool(study.config.get("shadow")),
        plan=shadow_plan,
        # the MLM protocol's models train through the workflow's one training rule
        models=lambda study: shadow_models(study.config),
        training=shadow_training_spec,
    ),
    Registration(
        "shadow_mt",
        runs=lambda study: bool(study.config.get("shadow_mt")),
        plan=lambda study: shadow_plan(study, "shadow_mt"),
    ),
)
