# d-exposure of a de-identification tagger (Helali, Kleinbauer and Klakow, TSD 2020) on
# PHI-labelled notes of the embedded world, or on the i2b2 2014 XML: `snakemake dexposure`.
# One BERT tagger per (seed, repetitions of the inserted phrase), measured at checkpoint
# epochs; the overfitting experiment per seed; Tables 1-3, Figures 1-2, the overfitting
# experiment's trend test and the findings (mlmia.world.phi, mlmia.memorization.dexposure and
# .overfitting). The plan (mlmia.study.plans.dexposure): how each tagger is trained and which
# (seed, repetitions) taggers each experiment runs, the tokenizer, the report's settings.
DEXP = STUDY.plan("dexposure")


rule dexposure_notes:
    input:
        xml=DEXP.files["i2b2_xml"],
    output:
        **DEXP.outputs["notes"],
    log:
        result("logs/dexposure/notes.log"),
    benchmark:
        result("benchmarks/dexposure/notes.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=DEXP.settings["phi"],
        code=library_code("dexposure_notes.py"),
    script:
        "../workflow/scripts/dexposure_notes.py"


rule dexposure_tokenizer:
    input:
        notes=DEXP.outputs["notes"]["notes"],
    output:
        directory(DEXP.files["notes_tokenizer"]),
    log:
        result("logs/dexposure/tokenizer.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=DEXP.settings["tokenizer"],
        max_length=DEXP.settings["max_length"],
        code=library_code("dexposure_tokenizer.py"),
    script:
        "../workflow/scripts/dexposure_tokenizer.py"


rule dexposure_train:
    input:
        **DEXP.outputs["notes"],
        tokenizer=DEXP.files["tokenizer"],
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
    threads: DEXP.resources["train"].threads
    resources:
        mem_mb=DEXP.resources["train"].mem_mb,
        device=DEXP.resources["train"].device,
    params:
        settings=lambda wildcards: DEXP.settings["training"][wildcards.setting],
        phrase=lambda wildcards: DEXP.settings["phrase"],
        code=library_code("dexposure_train.py"),
    script:
        "../workflow/scripts/dexposure_train.py"


rule dexposure_report:
    input:
        **DEXP.outputs["notes"],
        runs=DEXP.files["runs"],
    output:
        **plan_outputs(DEXP, "report"),
    log:
        result("logs/dexposure/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        phrase=lambda wildcards: DEXP.settings["phrase"],
        name_entities=DEXP.settings["name_entities"],
        table2_rows=DEXP.settings["table2_rows"],
        overfit=DEXP.settings["overfit"],
        style=DEXP.settings["style"],
        caption=DEXP.caption,
        code=library_code("dexposure_report.py"),
    script:
        "../workflow/scripts/dexposure_report.py"
