# The embedded world (`snakemake world`): its patients, notes and registers, the training
# corpora, the tokenizer and the scored sample sets; beside them the DP targets' private text
# and the shadow protocol's out-of-domain register. The plan (mlmia.study.plans.world): the
# outputs and the config's world settings.
WORLD_PLAN = STUDY.plan("world")


rule build_corpora:
    output:
        **WORLD_PLAN.outputs["corpora"],
    log:
        result("logs/build_corpora.log"),
    benchmark:
        result("benchmarks/build_corpora.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=WORLD_PLAN.settings["corpus"],
        code=library_code("build_corpora.py"),
    script:
        "../workflow/scripts/build_corpora.py"


rule dp_private_text:
    input:
        target=CORPUS_TABLES["target"],
        world=WORLD_PLAN.outputs["corpora"]["samples"],
    output:
        WORLD_PLAN.files["dp_private_text"],
    log:
        result("logs/dp_private_text.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=WORLD_PLAN.settings["corpus"],
        dp_corpus=WORLD_PLAN.settings["dp_corpus"],
        code=library_code("dp_private_text.py"),
    script:
        "../workflow/scripts/dp_private_text.py"


# with tokenizer.min_patients, the length buckets come from the tokenizer learnt without it, built again
# from the corpora (length_corpora; none without it): the remedy leaves the scored sentences as they were
rule select_samples:
    input:
        world=WORLD_PLAN.outputs["corpora"]["samples"],
        tokenizer=WORLD_PLAN.outputs["tokenizer"]["tokenizer"],
        corpora=WORLD_PLAN.files["length_corpora"],
    output:
        **WORLD_PLAN.outputs["samples"],
    log:
        result("logs/select_samples.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        samples=WORLD_PLAN.settings["samples"],
        length_tokenizer=WORLD_PLAN.settings["length_tokenizer"],
        code=library_code("select_samples.py"),
    script:
        "../workflow/scripts/select_samples.py"


rule train_tokenizer:
    input:
        list(CORPUS_TABLES.values()),
    output:
        directory(WORLD_PLAN.outputs["tokenizer"]["tokenizer"]),
    log:
        result("logs/train_tokenizer.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        tokenizer=WORLD_PLAN.settings["tokenizer"],
        code=library_code("train_tokenizer.py"),
    script:
        "../workflow/scripts/train_tokenizer.py"


# a register outside the clinical world (real Wikipedia prose) for the shadow protocol's
# out-of-domain probes: a table and rule of its own, so the world's tables (and every study on
# them) stay as they are
rule wikipedia_register:
    output:
        WORLD_PLAN.files["wikipedia"],
    log:
        result("logs/shadow/wikipedia_register.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        seed=WORLD_PLAN.settings["seed"],
        code=library_code("wikipedia_register.py"),
    script:
        "../workflow/scripts/wikipedia_register.py"
