# The shadow-model protocol of Hisamoto et al. (TACL 2020) on the world's registers:
# `snakemake shadow`. Alice's MLM and Bob's shadows train through train_model. The plan
# (mlmia.study.plans.shadow_plan): Bob's and Alice's names, their files, Tables 2-6, Figure 7.
SHADOW = STUDY.plan("shadow")


# a register outside the clinical world (real Wikipedia prose) for the out-of-domain probes: a
# table and rule of its own, so the world's tables (and every study on them) stay as they are
rule wikipedia_register:
    output:
        result(WIKIPEDIA_REGISTER),
    log:
        result("logs/shadow/wikipedia_register.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        seed=config["corpus"]["seed"],
        code=library_code("wikipedia_register.py"),
    script:
        "../workflow/scripts/wikipedia_register.py"


rule shadow_corpus:
    input:
        world=result(WORLD),
        domain=CORPUS_TABLES["domain"],
        general=CORPUS_TABLES["general"],
        wikipedia=result(WIKIPEDIA_REGISTER),
    output:
        SHADOW.files["corpus"],
    log:
        result("logs/shadow/corpus.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
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
        model=result(model_dir("shadow_{who}")),
    output:
        result("shadow/features_{who}.parquet"),
    log:
        result("logs/shadow/features_{who}.log"),
    benchmark:
        result("benchmarks/shadow/features_{who}.tsv")
    wildcard_constraints:
        who="alice|bob_\\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    params:
        seed=SHADOW.settings["protocol"].get("seed", 0),
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
        style=config["figure_style"],
        names=SHADOW.settings["names"],
        code=library_code("shadow_tables.py"),
    script:
        "../workflow/scripts/shadow_tables.py"
