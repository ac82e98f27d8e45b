# PHI extraction by infilling: `snakemake extraction`. Each PHI value of a patient (the
# embedded world's, or the spans a user names: extraction.phi) masked where its samples hold
# it and read back by the target and a reference (mlmia.memorization.extraction; settings:
# config key extraction). Counts and rates only.
EXTRACTION = config["extraction"]
EXTRACTION_MODELS = [EXTRACTION["target"], EXTRACTION["reference"]]


# the values themselves (the world's, or the user's file): temporary, so that no file the
# study leaves holds one
rule extraction_values:
    input:
        [EXTRACTION["phi"]] if EXTRACTION.get("phi") else [],
    output:
        temp(result("extraction/phi.parquet")),
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
        values=result("extraction/phi.parquet"),
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
        infilled=[result(f"extraction/infill/{m}.parquet") for m in EXTRACTION_MODELS],
    output:
        rates=result("extraction/rates.csv"),
        differences=result("extraction/differences.csv"),
        by_count=result("extraction/by_count.csv"),
        findings_csv=result("extraction/findings.csv"),
        findings=result("extraction/findings.md"),
        table=result("tables/table_extraction.md"),
        figure=result("figures/fig_extraction.png"),
    log:
        result("logs/extraction/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        models=EXTRACTION_MODELS,
        settings=EXTRACTION,
        style=config["figure_style"],
        code=library_code("extraction_report.py"),
    script:
        "../workflow/scripts/extraction_report.py"


rule extraction:
    input:
        rules.extraction_report.output,
