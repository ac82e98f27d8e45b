rule build_corpora:
    output:
        samples="results/corpus/world.parquet",
        target="results/corpus/train_target.parquet",
        target_named="results/corpus/train_target_named.parquet",
        domain="results/corpus/train_domain.parquet",
        general="results/corpus/train_general.parquet",
    log:
        "logs/build_corpora.log",
    benchmark:
        "benchmarks/build_corpora.tsv"
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config.get("corpus", {}),
        code=module_digest("mlmia.corpus"),
    script:
        "../workflow/scripts/build_corpora.py"


rule select_samples:
    input:
        world="results/corpus/world.parquet",
        tokenizer="results/models/tokenizer",
    output:
        plain="results/samples/clinical.parquet",
        named="results/samples/clinical_named.parquet",
    log:
        "logs/select_samples.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        samples=config.get("samples", {}),
        code=module_digest("mlmia.samples"),
    script:
        "../workflow/scripts/select_samples.py"
