rule exposure:
    input:
        unpack(exposure_inputs),
    output:
        "results/exposure/{experiment}.parquet",
    log:
        "logs/exposure/{experiment}.log",
    benchmark:
        "benchmarks/exposure/{experiment}.tsv"
    conda:
        "../envs/mlmia.yaml"
    params:
        alpha=lambda wildcards: exposure_alpha(wildcards.experiment),
        settings=config.get("exposure", {}),
        embedding_model=lambda wildcards: exposure_model(),
        code=module_digest("mlmia.exposure"),
    script:
        "../workflow/scripts/exposure.py"
