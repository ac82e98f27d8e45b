# The shadow-model protocol of Hisamoto et al. (TACL 2020) on a translation target:
# `snakemake shadow_mt`. Alice's and Bob's encoder-decoders translate the world's parallel
# corpus (MIMIC-style sources, i2b2-style targets); the protocol and tables are the MLM port's,
# and so is the plan (mlmia.study.plans.shadow).
SHADOW_MT = STUDY.plan("shadow_mt")


rule shadow_mt_corpus:
    output:
        SHADOW_MT.files["corpus"],
    log:
        result("logs/shadow_mt/corpus.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        **SHADOW_MT.settings["corpus"],
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
        pairs=SHADOW_MT.files["training_text"],
        tokenizer=SHADOW_MT.files["tokenizer"],
    output:
        directory(SHADOW_MT.files["model"]),
    log:
        result("logs/train/shadow_mt_{who}.log"),
    benchmark:
        result("benchmarks/train/shadow_mt_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: SHADOW_MT.resources["train"].threads
    resources:
        mem_mb=SHADOW_MT.resources["train"].mem_mb,
    params:
        model=lambda wildcards: SHADOW_MT.settings["models"][wildcards.who],
        name="shadow_mt_{who}",
        device=SHADOW_MT.resources["train"].device,
        code=library_code("shadow_mt_train.py"),
    script:
        "../workflow/scripts/shadow_mt_train.py"


rule shadow_mt_features:
    input:
        split=SHADOW_MT.files["split"],
        pairs=SHADOW_MT.files["pairs"],
        model=SHADOW_MT.files["model"],
    output:
        SHADOW_MT.files["model_features"],
    log:
        result("logs/shadow_mt/features_{who}.log"),
    benchmark:
        result("benchmarks/shadow_mt/features_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: SHADOW_MT.resources["features"].threads
    params:
        device=SHADOW_MT.settings["features"]["device"],
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
        style=SHADOW_MT.settings["style"],
        names=SHADOW_MT.settings["names"],
        caption=SHADOW_MT.caption,
        code=library_code("shadow_mt_tables.py"),
    script:
        "../workflow/scripts/shadow_mt_tables.py"
