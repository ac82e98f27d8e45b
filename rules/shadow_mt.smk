# The shadow-model protocol of Hisamoto et al. (TACL 2020) on a translation target:
# `snakemake shadow_mt`. Alice's and Bob's encoder-decoders translate the world's parallel
# corpus (MIMIC-style sources, i2b2-style targets); the protocol and tables are the MLM port's,
# and so is the plan (mlmia.study.plans.shadow_plan).
SHADOW_MT = STUDY.plan("shadow_mt")


rule shadow_mt_corpus:
    output:
        SHADOW_MT.files["corpus"],
    log:
        result("logs/shadow_mt/corpus.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=config["shadow_mt"]["corpus"],
        seed=config["corpus"]["seed"],
        code=library_code("shadow_mt_corpus.py"),
    script:
        "../workflow/scripts/shadow_mt_corpus.py"


rule shadow_mt_split:
    input:
        SHADOW_MT.files["corpus"],
    output:
        split=SHADOW_MT.files["split"],
        pairs=SHADOW_MT.files["pairs"],
        texts=SHADOW_MT.files["texts"],
    log:
        result("logs/shadow_mt/split.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=SHADOW_MT.settings["protocol"],
        names=SHADOW_MT.settings["names"],
        code=library_code("shadow_mt_split.py"),
    script:
        "../workflow/scripts/shadow_mt_split.py"


rule shadow_mt_train:
    input:
        pairs=result("shadow_mt/{who}.pairs.parquet"),
        tokenizer=result(TOKENIZER),
    output:
        directory(result(model_dir("shadow_mt_{who}"))),
    log:
        result("logs/train/shadow_mt_{who}.log"),
    benchmark:
        result("benchmarks/train/shadow_mt_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
    params:
        model=lambda wildcards: STUDY.shadow_mt_settings(f"shadow_mt_{wildcards.who}"),
        name="shadow_mt_{who}",
        device=config["training"]["device"],
        code=library_code("shadow_mt_train.py"),
    script:
        "../workflow/scripts/shadow_mt_train.py"


rule shadow_mt_features:
    input:
        split=SHADOW_MT.files["split"],
        pairs=SHADOW_MT.files["pairs"],
        model=result(model_dir("shadow_mt_{who}")),
    output:
        result("shadow_mt/features_{who}.parquet"),
    log:
        result("logs/shadow_mt/features_{who}.log"),
    benchmark:
        result("benchmarks/shadow_mt/features_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    params:
        device=config["scoring"]["device"],
        code=library_code("shadow_mt_features.py"),
    script:
        "../workflow/scripts/shadow_mt_features.py"


rule shadow_mt_tables:
    input:
        split=SHADOW_MT.files["split"],
        pairs=SHADOW_MT.files["pairs"],
        features=SHADOW_MT.files["features"],
        training=SHADOW_MT.files["texts"],
    output:
        **plan_outputs(SHADOW_MT, "tables"),
    log:
        result("logs/shadow_mt/tables.log"),
    benchmark:
        result("benchmarks/shadow_mt/tables.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=SHADOW_MT.settings["protocol"],
        style=config["figure_style"],
        names=SHADOW_MT.settings["names"],
        code=library_code("shadow_mt_tables.py"),
    script:
        "../workflow/scripts/shadow_mt_tables.py"
