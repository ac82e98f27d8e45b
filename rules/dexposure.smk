# d-exposure of a de-identification tagger (Helali, Kleinbauer and Klakow, TSD 2020) on
# PHI-labelled notes of the embedded world, or on the i2b2 2014 XML: `snakemake dexposure`.
# One BERT tagger per (seed, repetitions of the inserted phrase), measured at checkpoint
# epochs; the overfitting experiment per seed; Tables 1-3, Figures 1-2, the overfitting
# experiment's trend test and the findings (mlmia.world.phi, mlmia.memorization.dexposure and
# .overfitting; settings: config key dexposure).
from mlmia.memorization.dexposure import main_design, main_runs
from mlmia.memorization.overfitting import overfit_design, overfit_runs

DEXPOSURE = config["dexposure"]
DEXPOSURE_PHI_KEYS = [
    "seed",
    "patients",
    "sentences_per_patient",
    "i2b2_share",
    "phi_share",
    "hospitals",
    "ambiguous",
    "occurrences",
    "valid_share",
    "phrase",
    "classes",
    "entities",
]
# the two experiments' designs (mlmia.memorization.dexposure, .overfitting): how each tagger is
# trained, and which (seed, repetitions) taggers each runs
DEXPOSURE_TRAINING = {
    "main": main_design(DEXPOSURE),
    "overfit": overfit_design(DEXPOSURE),
}
DEXPOSURE_RUNS = [
    result(f"dexposure/runs/main/seed{seed}_rep{reps}.parquet")
    for seed, reps in main_runs(DEXPOSURE)
] + [
    result(f"dexposure/runs/overfit/seed{seed}_rep{reps}.parquet")
    for seed, reps in overfit_runs(DEXPOSURE)
]
# the world's tokenizer, or one trained on the tagger's notes (`tokenizer: notes`)
DEXPOSURE_TOKENIZER = result(
    "models/tokenizer" if DEXPOSURE["tokenizer"] == "world" else "dexposure/tokenizer"
)
DEXPOSURE_OUTPUTS = {
    f"{name}_{kind}": result(f"dexposure/{name}.{kind}")
    for name in ("table1", "table2", "table3", "overfit", "findings")
    for kind in ("md", "csv")
} | {
    f"figure{n}_{kind}": result(f"dexposure/figure{n}.{kind}")
    for n in (1, 2)
    for kind in ("png", "pdf")
}


rule dexposure_notes:
    input:
        xml=DEXPOSURE["i2b2_xml"],
    output:
        notes=result("dexposure/notes.parquet"),
        chosen=result("dexposure/chosen.parquet"),
    log:
        result("logs/dexposure/notes.log"),
    benchmark:
        result("benchmarks/dexposure/notes.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings={key: DEXPOSURE[key] for key in DEXPOSURE_PHI_KEYS},
        code=library_code("dexposure_notes.py"),
    script:
        "../workflow/scripts/dexposure_notes.py"


rule dexposure_tokenizer:
    input:
        notes=result("dexposure/notes.parquet"),
    output:
        directory(result("dexposure/tokenizer")),
    log:
        result("logs/dexposure/tokenizer.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=config["tokenizer"],
        max_length=DEXPOSURE["model"]["max_length"],
        code=library_code("dexposure_tokenizer.py"),
    script:
        "../workflow/scripts/dexposure_tokenizer.py"


rule dexposure_train:
    input:
        notes=result("dexposure/notes.parquet"),
        chosen=result("dexposure/chosen.parquet"),
        tokenizer=DEXPOSURE_TOKENIZER,
    output:
        runs=result("dexposure/runs/{setting}/seed{seed}_rep{repetitions}.parquet"),
        record=directory(
            result("dexposure/train/{setting}/seed{seed}_rep{repetitions}")
        ),
    log:
        result("logs/dexposure/{setting}/seed{seed}_rep{repetitions}.log"),
    benchmark:
        result("benchmarks/dexposure/{setting}/seed{seed}_rep{repetitions}.tsv")
    wildcard_constraints:
        setting="main|overfit",
        seed="\\d+",
        repetitions="\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: DEXPOSURE["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
    params:
        settings=lambda wildcards: DEXPOSURE_TRAINING[wildcards.setting],
        phrase=lambda wildcards: DEXPOSURE["phrase"],
        device=DEXPOSURE["device"],
        code=library_code("dexposure_train.py"),
    script:
        "../workflow/scripts/dexposure_train.py"


rule dexposure_report:
    input:
        notes=result("dexposure/notes.parquet"),
        chosen=result("dexposure/chosen.parquet"),
        runs=DEXPOSURE_RUNS,
    output:
        **DEXPOSURE_OUTPUTS,
        figure2_csv=result("dexposure/figure2.csv"),
        overfit_seeds_csv=result("dexposure/overfit_seeds.csv"),
        report=result("dexposure/report.md"),
    log:
        result("logs/dexposure/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        phrase=lambda wildcards: DEXPOSURE["phrase"],
        name_entities=not DEXPOSURE["i2b2_xml"],
        table2_rows=8,
        overfit=DEXPOSURE["overfit"],
        style=config["figure_style"],
        code=library_code("dexposure_report.py"),
    script:
        "../workflow/scripts/dexposure_report.py"


rule dexposure:
    input:
        rules.dexposure_report.output,
