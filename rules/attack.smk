rule attack_table:
    input:
        unpack(attack_inputs),
    output:
        result("attack/{experiment}.parquet"),
    log:
        result("logs/attack_table/{experiment}.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        experiment=lambda wildcards: STUDY.experiments[wildcards.experiment],
        models=lambda wildcards: STUDY.experiment_models(wildcards.experiment),
        columns=lambda wildcards: STUDY.attack_columns(wildcards.experiment),
        settings=lambda wildcards: STUDY.attack_settings(),
        # which audited samples have neighbour texts (neighbours.subsample)
        subsample=lambda wildcards: STUDY.neighbour_draw(),
        code=library_code("attack_table.py"),
    script:
        "../workflow/scripts/attack_table.py"


rule attack_metrics:
    input:
        unpack(metrics_inputs),
    output:
        result("metrics/{experiment}.parquet"),
    log:
        result("logs/attack_metrics/{experiment}.log"),
    benchmark:
        result("benchmarks/attack_metrics/{experiment}.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=lambda wildcards: STUDY.metric_settings(wildcards.experiment),
        code=library_code("attack_metrics.py"),
    script:
        "../workflow/scripts/attack_metrics.py"


rule roc_curve:
    input:
        result("attack/{experiment}.parquet"),
    output:
        result("metrics/{experiment}.roc.parquet"),
    log:
        result("logs/roc_curve/{experiment}.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        attacks=lambda wildcards: STUDY.roc_attacks(wildcards.experiment),
        attack_params=lambda wildcards: {
            a: STUDY.attack_params(a) for a in STUDY.roc_attacks(wildcards.experiment)
        },
        level=lambda wildcards: STUDY.experiments[wildcards.experiment].level,
        code=library_code("roc_curve.py"),
    script:
        "../workflow/scripts/roc_curve.py"
