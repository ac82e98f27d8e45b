rule train_tokenizer:
    input:
        corpus_tables,
    output:
        directory("results/models/tokenizer"),
    log:
        "logs/train_tokenizer.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=config.get("tokenizer", {}),
        code=module_digest("mlmia.train"),
    script:
        "../workflow/scripts/train_tokenizer.py"


rule train_model:
    input:
        unpack(train_inputs),
    output:
        directory("results/models/{model}"),
    log:
        "logs/train/{model}.log",
    benchmark:
        "benchmarks/train/{model}.tsv"
    wildcard_constraints:
        model=TRAINED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    threads: config.get("training", {}).get("threads", 1)
    resources:
        mem_mb=config.get("training", {}).get("mem_mb", 3000),
    params:
        model=lambda wildcards: MODELS[wildcards.model],
        name="{model}",
        device=config.get("training", {}).get("device", "auto"),
        code=module_digest("mlmia.train"),
    script:
        "../workflow/scripts/train_model.py"
