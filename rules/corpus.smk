rule build_corpora:
    output:
        **{name: path for name, path in CORPUS_TABLES.items()},
        samples=result(WORLD),
    log:
        result("logs/build_corpora.log"),
    benchmark:
        result("benchmarks/build_corpora.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config["corpus"],
        code=library_code("build_corpora.py"),
    script:
        "../workflow/scripts/build_corpora.py"


rule dp_private_text:
    input:
        target=CORPUS_TABLES["target"],
        world=result(WORLD),
    output:
        result(DP_PRIVATE_TEXT),
    log:
        result("logs/dp_private_text.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config["corpus"],
        dp_corpus=config.get("dp_corpus", {}),
        code=library_code("dp_private_text.py"),
    script:
        "../workflow/scripts/dp_private_text.py"


rule select_samples:
    input:
        world=result(WORLD),
        tokenizer=result(TOKENIZER),
    output:
        plain=samples_path("clinical"),
        named=samples_path("clinical_named"),
    log:
        result("logs/select_samples.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        samples=config["samples"],
        code=library_code("select_samples.py"),
    script:
        "../workflow/scripts/select_samples.py"


rule train_tokenizer:
    input:
        list(CORPUS_TABLES.values()),
    output:
        directory(result(TOKENIZER)),
    log:
        result("logs/train_tokenizer.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=config["tokenizer"],
        code=library_code("train_tokenizer.py"),
    script:
        "../workflow/scripts/train_tokenizer.py"
