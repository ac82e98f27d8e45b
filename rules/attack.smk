rule attack_table:
    input:
        unpack(attack_inputs),
    output:
        "results/attack/{experiment}.parquet",
    log:
        "logs/attack_table/{experiment}.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        experiment=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        code=module_digest("mlmia.attack"),
    script:
        "../workflow/scripts/attack_table.py"


rule attack_metrics:
    input:
        "results/attack/{experiment}.parquet",
    output:
        "results/metrics/{experiment}.parquet",
    log:
        "logs/attack_metrics/{experiment}.log",
    benchmark:
        "benchmarks/attack_metrics/{experiment}.tsv"
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=metric_settings,
        code=module_digest("mlmia.metrics"),
    script:
        "../workflow/scripts/attack_metrics.py"


rule roc_curve:
    input:
        "results/attack/{experiment}.parquet",
    output:
        "results/metrics/{experiment}.roc.parquet",
    log:
        "logs/roc_curve/{experiment}.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        level=lambda wildcards: EXPERIMENTS[wildcards.experiment].level,
        code=module_digest("mlmia.metrics"),
    script:
        "../workflow/scripts/roc_curve.py"
