# PHI extraction by infilling: `snakemake extraction`. Each PHI value of a patient (the
# embedded world's, or the spans a user names: extraction.phi) masked where its samples hold
# it and read back by the target and a reference (mlmia.memorization.extraction; settings:
# config key extraction). Counts and rates only.
EXTRACTION = config["extraction"]
# the plan (mlmia.study.plans.extraction_plan): the models read back, rates, table, figure, findings
EXTRACT = STUDY.plan("extraction")


# the values themselves (the world's, or the user's file): temporary, so that no file the
# study leaves holds one
rule extraction_values:
    input:
        [EXTRACTION["phi"]] if EXTRACTION.get("phi") else [],
    output:
        temp(EXTRACT.files["values"]),
    log:
        result("logs/extraction/values.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config.get("corpus"),
        phi=EXTRACTION.get("phi"),
        code=library_code("extraction_values.py"),
    script:
        "../workflow/scripts/extraction_values.py"


rule extraction_infill:
    input:
        samples=samples_path(EXTRACTION["dataset"]),
        values=EXTRACT.files["values"],
        model=model_input,
    output:
        result("extraction/infill/{model}.parquet"),
    log:
        result("logs/extraction/infill/{model}.log"),
    benchmark:
        result("benchmarks/extraction/infill/{model}.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    params:
        settings=EXTRACTION,
        where=(
            f"extraction.phi ({EXTRACTION['phi']})"
            if EXTRACTION.get("phi")
            else "the world's PHI"
        ),
        model=lambda wildcards: STUDY.model_dir(wildcards.model),
        tokenizer=lambda wildcards: MODELS.get(wildcards.model, {}).get("tokenizer"),
        device=config["scoring"]["device"],
        code=library_code("extraction_infill.py"),
    script:
        "../workflow/scripts/extraction_infill.py"


rule extraction_report:
    input:
        samples=samples_path(EXTRACTION["dataset"]),
        infilled=EXTRACT.files["infilled"],
    output:
        **plan_outputs(EXTRACT, "report"),
    log:
        result("logs/extraction/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        models=EXTRACT.settings["models"],
        settings=EXTRACTION,
        style=config["figure_style"],
        code=library_code("extraction_report.py"),
    script:
        "../workflow/scripts/extraction_report.py"
