rule exposure:
    input:
        unpack(exposure_inputs),
    output:
        result("exposure/{experiment}.parquet"),
    log:
        result("logs/exposure/{experiment}.log"),
    benchmark:
        result("benchmarks/exposure/{experiment}.tsv")
    conda:
        "../envs/mlmia.yaml"
    resources:
        device=STUDY.exposure_device(),
    params:
        settings=lambda wildcards: STUDY.exposure_settings(wildcards.experiment),
        embedding_model=lambda wildcards: STUDY.model_dir(STUDY.embedding_model()),
        code=library_code("exposure.py"),
    script:
        "../workflow/scripts/exposure.py"
