"""PHI extraction by infilling (`snakemake extraction`, config `extraction`, rules/extraction.smk):
each PHI value of a patient (the embedded world's, or the spans a user names: `extraction.phi`)
masked where its samples hold it and read back by the target and a reference. Counts and rates only."""

from __future__ import annotations

from mlmia.study.plans.base import Caption, Plan, Registration, shown
from mlmia.vocabulary.layout import samples

RULES = "rules/extraction.smk"


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
    phi = config.get("phi")
    return Plan(
        target="extraction",
        targets=list(report.values()),
        outputs={"report": report},
        files={
            "samples": study.path(samples(config["dataset"])),
            # the values job's inputs: the user's PHI table and the samples it is checked against before any
            # model is read (none: the embedded world's patients, built again in memory)
            "values_inputs": {"phi": phi, "samples": study.path(samples(config["dataset"]))} if phi else {},
            # the values themselves: temporary, so that no file the study leaves holds one
            "values": path("phi.parquet"),
            "infilled": [path(f"infill/{model}.parquet") for model in models],
            "infill": path("infill/{model}.parquet"),
        },
        settings={
            "models": models,
            "extraction": config,
            "corpus": study.config.get("corpus"),
            "phi": phi,
            # where the values come from, as messages name it (the user's file under its key: naming_keys)
            "where": phi if phi else "the world's PHI",
            "style": study.figure_style,
        },
        resources={"infill": study.resources("scoring")},
        rules=(RULES,),
        report=shown(report, shown_items, "PHI extraction"),
        caption=Caption(
            "PHI extraction by infilling: each PHI value masked where its samples hold it and read back by the "
            f"target (``{models[0]}``) and the reference (``{models[1]}``); rates, their paired difference and the "
            "findings. Counts and rates only: no value is shown."
        ),
    )


#: the embedded world's patients, or a user's PHI table
REGISTRATION = Registration(
    "extraction", lambda study: "corpus" in study.config or bool(study.config["extraction"].get("phi")), extraction_plan
)
