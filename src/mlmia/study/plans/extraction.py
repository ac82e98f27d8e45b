"""PHI extraction by infilling (`snakemake extraction`, config `extraction`, rules/extraction.smk):
each PHI value of a patient (the embedded world's, or the spans a user names: `extraction.phi`)
masked where its samples hold it and read back by the target and a reference; beside its rates, where
`extraction.token_kinds` names experiments, the membership signal of each PHI kind's tokens under
their per-slot attacks (`mlmia.memorization.extraction_kinds`; the names checked by
`mlmia.study.plans.tokens.check_extraction_token_kinds`); and the vocabulary
check (`mlmia.memorization.vocabulary_check`): how many of the patients' identifying values are whole
entries of a model's vocabulary, for the target and the reference here and for every audited model
in its audit card (`mlmia.study.plans.cards`). Counts and rates only."""

from __future__ import annotations

from mlmia.study.plans.base import Caption, Plan, Registration, shown
from mlmia.terms.layout import samples, token_files

RULES = "rules/extraction.smk"
#: where the vocabulary check's values come from in the embedded world (mlmia.world.patient_phi.identifying_values)
VOCABULARY_FROM_WORLD = "the embedded world's first names, surnames, physicians and states"


def extraction_plan(study) -> Plan:
    """PHI extraction by infilling (`snakemake extraction`): the target's and a reference's
    infills, rates, differences, the table, figure and findings."""
    config = study.config["extraction"]
    path = lambda file: study.path("extraction", file)  # noqa: E731
    models = [config["target"], config["reference"]]
    report = {
        "rates": path("rates.csv"),
        "differences": path("differences.csv"),
        "by_count": path("by_count.csv"),
        "findings_csv": path("findings.csv"),
        "findings": path("findings.md"),
        "table": study.path("tables", "table_extraction.md"),
        "figure": study.path("figures", "fig_extraction.png"),
    }
    shown_items = {"table": "rates table", "figure": "rates figure", "findings": "findings"}
    vocabulary = {"csv": path("vocabulary.csv"), "table": study.path("tables", "table_vocabulary.md")}
    # the membership signal of each PHI kind's tokens beside its rates: the named experiments' summaries by kind
    experiments = config["token_kinds"]
    kinds = {"csv": path("token_kinds.csv"), "table": study.path("tables", "table_extraction_kinds.md")}
    kinds = kinds if experiments else {}
    phi = config.get("phi")
    return Plan(
        target="extraction",
        targets=[*report.values(), *vocabulary.values(), *kinds.values()],
        outputs={"report": report, "vocabulary": vocabulary} | ({"kinds": kinds} if kinds else {}),
        files={
            "samples": study.path(samples(config["dataset"])),
            # the values job's inputs: the user's PHI table and the samples it is checked against before any
            # model is read (none: the embedded world's patients, built again in memory)
            "values_inputs": {"phi": phi, "samples": study.path(samples(config["dataset"]))} if phi else {},
            # the values themselves: temporary, so that no file the study leaves holds one
            "values": path("phi.parquet"),
            "infilled": [path(f"infill/{model}.parquet") for model in models],
            "infill": path("infill/{model}.parquet"),
            # the vocabulary check: each patient's identifying values with its role (temporary, as the values),
            # and each model's counts (any configured model: the audit cards read every audited model's)
            "identifiers": path("identifiers.parquet"),
            "vocabulary": path("vocabulary/{model}.csv"),
            "vocabularies": [path(f"vocabulary/{model}.csv") for model in models],
            # the PHI kinds beside the membership signal: the rates' differences, each experiment's summary by kind
            "kinds_inputs": {
                "differences": report["differences"],
                "token_kinds": [study.path(token_files(name)["kinds"]) for name in experiments],
            },
        },
        settings={
            "models": models,
            "extraction": config,
            "corpus": study.config.get("corpus"),
            "phi": phi,
            # where the values come from, as messages name it (the user's file under its key: naming_keys)
            "where": phi if phi else "the world's PHI",
            "style": study.figure_style,
            # the vocabulary check's values, in words
            "vocabulary_from": f"the PHI table {phi}" if phi else VOCABULARY_FROM_WORLD,
            # the vocabulary check's kinds (null: every kind of the values) and its bootstrap: extraction's
            "vocabulary": {
                "kinds": study.config["audit_cards"]["vocabulary_kinds"],
                "bootstrap": config["bootstrap"],
                "seed": config["seed"],
            },
            "kinds": {"experiments": experiments, "target": config["target"], "top_k": config["top_k"]},
        },
        resources={"infill": study.resources("scoring")},
        rules=(RULES,),
        report=shown(report, shown_items, "PHI extraction")
        | shown(vocabulary, {"table": "vocabulary check"}, "PHI extraction")
        | (shown(kinds, {"table": "PHI kinds and the membership signal"}, "PHI extraction") if kinds else {}),
        caption=Caption(
            "PHI extraction by infilling: each PHI value masked where its samples hold it and read back by the "
            f"target (``{models[0]}``) and the reference (``{models[1]}``); rates, their paired difference and the "
            "findings; and the vocabulary check: how many of the patients' identifying values are whole entries of each "
            "model's vocabulary, by role; where named (extraction.token_kinds), each PHI kind's extraction beside the "
            "membership signal its tokens carry under the named experiments' per-slot attacks. Counts, rates and "
            "scores only: no value is shown."
        ),
    )


def tokenizer_source(study, model: str) -> str:
    """The tokenizer a model ships with: the one its config names (`models.<name>.tokenizer`), else
    its own directory's (or hub id's)."""
    return study.model_tokenizer(model) or study.model_dir(model)


def vocabulary_inputs(study, plan: Plan, model: str) -> dict:
    """What one model's vocabulary check reads (rules/extraction.smk; `plan`: the extraction's): the
    identifying values (none for a tokenizer the config marks public: nothing is counted), and its
    tokenizer's directory or file unless that is a hub id."""
    source = study.local_input(tokenizer_source(study, model))
    tokenizer = {"tokenizer": source} if source else {}
    if study.public_tokenizer(model):
        return tokenizer
    return {"identifiers": plan.files["identifiers"]} | tokenizer


#: the embedded world's patients, or a user's PHI table
REGISTRATION = Registration(
    "extraction", lambda study: "corpus" in study.config or bool(study.config["extraction"].get("phi")), extraction_plan
)
