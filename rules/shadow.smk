# The shadow-model protocol of Hisamoto et al. (TACL 2020) on the world's registers:
# `snakemake shadow`. Alice's MLM and Bob's shadows train through train_model. The plan
# (mlmia.study.plans.shadow): Bob's and Alice's names, their files, settings and resources,
# Tables 2-6, Figure 7.
SHADOW = STUDY.plan("shadow")


rule shadow_corpus:
    input:
        **SHADOW.files["corpus_inputs"],
    output:
        SHADOW.files["corpus"],
    log:
        result("logs/shadow/corpus.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        **SHADOW.settings["corpus"],
        code=library_code("shadow_corpus.py"),
    script:
        "../workflow/scripts/shadow_corpus.py"


rule shadow_split:
    input:
        SHADOW.files["corpus"],
    output:
        split=SHADOW.files["split"],
        pairs=SHADOW.files["pairs"],
        texts=SHADOW.files["texts"],
    log:
        result("logs/shadow/split.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=SHADOW.settings["protocol"],
        names=SHADOW.settings["names"],
        code=library_code("shadow_split.py"),
    script:
        "../workflow/scripts/shadow_split.py"


rule shadow_features:
    input:
        split=SHADOW.files["split"],
        pairs=SHADOW.files["pairs"],
        model=SHADOW.files["model"],
    output:
        SHADOW.files["model_features"],
    log:
        result("logs/shadow/features_{who}.log"),
    benchmark:
        result("benchmarks/shadow/features_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: SHADOW.resources["features"].threads
    params:
        seed=SHADOW.settings["features"]["seed"],
        code=library_code("shadow_features.py"),
    script:
        "../workflow/scripts/shadow_features.py"


rule shadow_tables:
    input:
        split=SHADOW.files["split"],
        pairs=SHADOW.files["pairs"],
        features=SHADOW.files["features"],
        texts=SHADOW.files["texts"],
    output:
        **plan_outputs(SHADOW, "tables"),
    log:
        result("logs/shadow/tables.log"),
    benchmark:
        result("benchmarks/shadow/tables.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=SHADOW.settings["protocol"],
        style=SHADOW.settings["style"],
        names=SHADOW.settings["names"],
        caption=SHADOW.caption,
        code=library_code("shadow_tables.py"),
    script:
        "../workflow/scripts/shadow_tables.py"
