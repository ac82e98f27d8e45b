"""d-exposure of a de-identification tagger (Helali, Kleinbauer and Klakow, TSD 2020) on the
embedded world's PHI-labelled notes or on the i2b2 2014 XML (`snakemake dexposure`, config
`dexposure`, rules/dexposure.smk)."""

from __future__ import annotations

from mlmia.study.plans.base import Caption, Plan, Registration, Resources, shown
from mlmia.terms.layout import TOKENIZER

RULES = "rules/dexposure.smk"
#: the config keys of dexposure that make the PHI-labelled notes (mlmia.world.phi)
DEXPOSURE_PHI_KEYS = ("seed", "patients", "sentences_per_patient", "i2b2_share", "phi_share", "hospitals",
                      "ambiguous", "occurrences", "valid_share", "phrase", "classes", "entities")  # fmt: skip
#: the rows of Table 2 (the classes' d-exposure at each repetition count)
TABLE2_ROWS = 8


def dexposure_plan(study) -> Plan:
    """d-exposure of a de-identification tagger (`snakemake dexposure`): one tagger per (seed,
    repetitions) of each experiment, Tables 1-3, Figures 1-2, the overfitting experiment and the
    findings in results/<run>/dexposure/."""
    from mlmia.memorization.dexposure import main_design, main_runs
    from mlmia.memorization.overfitting import overfit_design, overfit_runs

    config = study.config["dexposure"]
    path = lambda file: study.path("dexposure", file)  # noqa: E731
    report = {f"{name}_{kind}": path(f"{name}.{kind}")
              for name in ("table1", "table2", "table3", "overfit", "findings") for kind in ("md", "csv")}  # fmt: skip
    report |= {f"figure{n}_{kind}": path(f"figure{n}.{kind}") for n in (1, 2) for kind in ("png", "pdf")}
    report |= {
        "figure2_csv": path("figure2.csv"),
        "overfit_seeds_csv": path("overfit_seeds.csv"),
        "report": path("report.md"),
    }
    runs = [path(f"runs/main/seed{seed}_rep{reps}.parquet") for seed, reps in main_runs(config)]
    runs += [path(f"runs/overfit/seed{seed}_rep{reps}.parquet") for seed, reps in overfit_runs(config)]
    shown_items = {"table1_md": "Table 1", "table2_md": "Table 2", "table3_md": "Table 3", "overfit_md": "overfitting",
                   "figure1_png": "Figure 1", "figure2_png": "Figure 2", "findings_md": "findings"}  # fmt: skip
    notes = " on the i2b2 2014 notes" if config["i2b2_xml"] else " on the embedded world's PHI-labelled notes"
    return Plan(
        target="dexposure",
        targets=list(report.values()),
        outputs={"notes": {"notes": path("notes.parquet"), "chosen": path("chosen.parquet")}, "report": report},
        files={
            "i2b2_xml": config["i2b2_xml"],
            "runs": runs,
            "notes_tokenizer": path("tokenizer"),
            # the world's tokenizer, or one trained on the tagger's notes (`tokenizer: notes`)
            "tokenizer": study.path(TOKENIZER) if config["tokenizer"] == "world" else path("tokenizer"),
        },
        settings={
            "phi": {key: config[key] for key in DEXPOSURE_PHI_KEYS},
            # the notes' tokenizer: trained as the world's (config `tokenizer`), the tagger's length
            "tokenizer": study.config["tokenizer"],
            "max_length": config["model"]["max_length"],
            # how each tagger is trained (mlmia.memorization.dexposure, .overfitting)
            "training": {"main": main_design(config), "overfit": overfit_design(config)},
            "phrase": config["phrase"],
            "name_entities": not config["i2b2_xml"],
            "table2_rows": TABLE2_ROWS,
            "overfit": config["overfit"],
            "style": study.figure_style,
        },
        # the taggers: the study's own threads and device, the training jobs' memory
        resources={"train": Resources(config["threads"], study.config["training"]["mem_mb"], config["device"])},
        rules=(RULES,),
        report=shown(report, shown_items, "d-exposure"),
        caption=Caption(
            f"d-exposure of a de-identification tagger (Helali, Kleinbauer and Klakow, TSD 2020){notes}: Tables 1-3, "
            "Figures 1-2, the overfitting experiment's trend test and the findings, over the taggers' seeds."
        ),
    )


#: the embedded world's notes, or the i2b2 2014 XML a config names
REGISTRATION = Registration(
    "dexposure", lambda study: "corpus" in study.config or bool(study.config["dexposure"]["i2b2_xml"]), dexposure_plan
)
