rule build_corpora:
    output:
        **{name: path for name, path in CORPUS_TABLES.items()},
        samples=result("corpus/world.parquet"),
    log:
        result("logs/build_corpora.log"),
    benchmark:
        result("benchmarks/build_corpora.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config["corpus"],
        code=module_digest("mlmia.world.corpus"),
    script:
        "../workflow/scripts/build_corpora.py"


rule select_samples:
    input:
        world=result("corpus/world.parquet"),
        tokenizer=result("models/tokenizer"),
    output:
        plain=samples_path("clinical"),
        named=samples_path("clinical_named"),
    log:
        result("logs/select_samples.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        samples=config["samples"],
        code=module_digest("mlmia.world.samples", "mlmia.data.manifest"),
    script:
        "../workflow/scripts/select_samples.py"


rule train_tokenizer:
    input:
        list(CORPUS_TABLES.values()),
    output:
        directory(result("models/tokenizer")),
    log:
        result("logs/train_tokenizer.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=config["tokenizer"],
        code=module_digest("mlmia.models.tokenizer"),
    script:
        "../workflow/scripts/train_tokenizer.py"
