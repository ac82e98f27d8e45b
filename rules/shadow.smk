# The shadow-model protocol of Hisamoto et al. (TACL 2020), one set of rules for each target it
# runs on: the world's registers read by a masked language model (`snakemake shadow`) and the
# world's parallel corpus read by a translation model (`snakemake shadow_mt`), generated from each
# protocol's plan (mlmia.study.plans.shadow: its files, settings, resources and models); the
# scripts run either protocol through mlmia.shadow.protocols. Alice's and Bob's masked language
# models train through train_model (rules/train.smk), the translation models here.
# (Every value a rule takes from the loop's plan is read when the rule is defined: a `script:`
# path is read again when its job runs, so it names no loop variable.)
for SHADOW in plans_with_rules("rules/shadow.smk"):

    # the protocol's corpus: the world's registers, or a parallel corpus of its own
    rule:
        name:
            f"{SHADOW.target}_corpus"
        input:
            **SHADOW.files["corpus_inputs"],
        output:
            SHADOW.files["corpus"],
        log:
            result(f"logs/{SHADOW.target}/corpus.log"),
        conda:
            "../envs/mlmia.yaml"
        params:
            protocol=SHADOW.target,
            settings=SHADOW.settings["corpus"],
            code=library_code("shadow_corpus.py"),
        script:
            "../workflow/scripts/shadow_corpus.py"

    # Carol's split, Bob's labelled pairs and each model's training text
    rule:
        name:
            f"{SHADOW.target}_split"
        input:
            SHADOW.files["corpus"],
        output:
            split=SHADOW.files["split"],
            pairs=SHADOW.files["pairs"],
            texts=SHADOW.files["texts"],
        log:
            result(f"logs/{SHADOW.target}/split.log"),
        conda:
            "../envs/mlmia.yaml"
        params:
            protocol=SHADOW.target,
            settings=SHADOW.settings["protocol"],
            names=SHADOW.settings["names"],
            code=library_code("shadow_split.py"),
        script:
            "../workflow/scripts/shadow_split.py"

    if SHADOW.settings["models"]:

        # the translation models (the masked language models train through train_model)
        rule:
            name:
                f"{SHADOW.target}_train"
            input:
                pairs=SHADOW.files["training_text"],
                tokenizer=SHADOW.files["tokenizer"],
            output:
                directory(SHADOW.files["model"]),
            log:
                result(f"logs/train/{SHADOW.target}_{{who}}.log"),
            benchmark:
                result(f"benchmarks/train/{SHADOW.target}_{{who}}.tsv")
            wildcard_constraints:
                who="alice|bob_\\d+",
            conda:
                "../envs/mlmia.yaml"
            threads: SHADOW.resources["train"].threads
            resources:
                mem_mb=SHADOW.resources["train"].mem_mb,
                device=SHADOW.resources["train"].device,
            params:
                model=lambda wildcards, plan=SHADOW: plan.settings["models"][
                    wildcards.who
                ],
                name=f"{SHADOW.target}_{{who}}",
                code=library_code("shadow_mt_train.py"),
            script:
                "../workflow/scripts/shadow_mt_train.py"

    # one model's features on the sentences it is queried on
    rule:
        name:
            f"{SHADOW.target}_features"
        input:
            split=SHADOW.files["split"],
            pairs=SHADOW.files["pairs"],
            model=SHADOW.files["model"],
        output:
            SHADOW.files["model_features"],
        log:
            result(f"logs/{SHADOW.target}/features_{{who}}.log"),
        benchmark:
            result(f"benchmarks/{SHADOW.target}/features_{{who}}.tsv")
        wildcard_constraints:
            who="alice|bob_\\d+",
        conda:
            "../envs/mlmia.yaml"
        threads: SHADOW.resources["features"].threads
        resources:
            device=SHADOW.resources["features"].device,
        params:
            protocol=SHADOW.target,
            settings=SHADOW.settings["features"],
            code=library_code("shadow_features.py"),
        script:
            "../workflow/scripts/shadow_features.py"

    # Tables 2-6, Figure 7 and the findings
    rule:
        name:
            f"{SHADOW.target}_tables"
        input:
            split=SHADOW.files["split"],
            pairs=SHADOW.files["pairs"],
            features=SHADOW.files["features"],
            texts=SHADOW.files["texts"],
        output:
            **plan_outputs(SHADOW, "tables"),
        log:
            result(f"logs/{SHADOW.target}/tables.log"),
        benchmark:
            result(f"benchmarks/{SHADOW.target}/tables.tsv")
        conda:
            "../envs/mlmia.yaml"
        params:
            protocol=SHADOW.target,
            settings=SHADOW.settings["protocol"],
            style=SHADOW.settings["style"],
            names=SHADOW.settings["names"],
            caption=SHADOW.caption,
            code=library_code("shadow_tables.py"),
        script:
            "../workflow/scripts/shadow_tables.py"
