# Canary exposure (Carlini et al., "The Secret Sharer", USENIX Security 2019) on the embedded
# world: `snakemake canaries`. Secrets in a clinical template, inserted 0-64 times into the
# target's training text; their exposure per checkpoint, and the canaries' sentences as a
# membership test (mlmia.memorization.canaries; settings: config key canaries).
from mlmia.memorization.canary_membership import membership_settings
from mlmia.vocabulary.layout import ONE_RUN_CORPUS

CANARIES = config["canaries"]
# the plan (mlmia.study.plans.canaries_plan): outputs, the secrets' settings, the checkpoints
CANARY = STUDY.plan("canaries")
CANARY_EPOCHS = CANARY.settings["epochs"]


rule canary_secrets:
    input:
        tokenizer=result(TOKENIZER),
    output:
        **plan_outputs(CANARY, "secrets"),
    log:
        result("logs/canaries/secrets.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=CANARY.settings["secrets"],
        code=library_code("canaries_secrets.py"),
    script:
        "../workflow/scripts/canaries_secrets.py"


rule canary_target:
    input:
        text=CORPUS_TABLES["target"],
        canaries=CANARY.outputs["secrets"]["canaries"],
        tokenizer=result(TOKENIZER),
    output:
        directory(CANARY.files["target"]),
    log:
        result("logs/canaries/target.log"),
    benchmark:
        result("benchmarks/canaries/target.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
    params:
        shape=CANARIES["shape"],
        model=MODELS.get(CANARIES["shape"]),
        epochs=CANARY_EPOCHS,
        device=config["training"]["device"],
        code=library_code("canaries_target.py"),
    script:
        "../workflow/scripts/canaries_target.py"


rule canary_exposure:
    input:
        **CANARY.outputs["secrets"],
        target=CANARY.files["target"],
    output:
        **plan_outputs(CANARY, "exposure"),
    log:
        result("logs/canaries/exposure.log"),
    benchmark:
        result("benchmarks/canaries/exposure.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    resources:
        mem_mb=config["scoring"]["mem_mb"],
    params:
        epochs=CANARY_EPOCHS,
        template=lambda wildcards: CANARIES["template"],  # holds "{secret}": no expansion
        digits=CANARIES["digits"],
        seed=config["scoring"]["seed"],
        device=config["scoring"]["device"],
        code=library_code("canaries_exposure.py"),
    script:
        "../workflow/scripts/canaries_exposure.py"


rule canary_membership_scores:
    input:
        canaries=CANARY.outputs["secrets"]["canaries"],
        target=CANARY.files["target"],
        reference=lambda wildcards: model_input_of(CANARIES["reference"]),
    output:
        CANARY.files["membership_scores"],
    log:
        result("logs/canaries/membership_scores.log"),
    benchmark:
        result("benchmarks/canaries/membership_scores.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    resources:
        mem_mb=config["scoring"]["mem_mb"],
    params:
        epoch=max(CANARY_EPOCHS),
        reference=lambda wildcards: STUDY.model_dir(CANARIES["reference"]),
        reference_tokenizer=MODELS.get(CANARIES["reference"], {}).get("tokenizer"),
        energy=CANARIES["energy"],
        scoring=STUDY.scoring(CANARIES["energy"]),
        code=library_code("canaries_membership_scores.py"),
    script:
        "../workflow/scripts/canaries_membership_scores.py"


rule canary_membership:
    input:
        **CANARY.outputs["exposure"],
        canaries=CANARY.outputs["secrets"]["canaries"],
        scores=CANARY.files["membership_scores"],
    output:
        **plan_outputs(CANARY, "membership"),
    log:
        result("logs/canaries/membership.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        metrics=membership_settings(
            CANARIES["alpha"], config["metrics"], config.get("attacks", {})
        ),
        epoch=max(CANARY_EPOCHS),
        reference=CANARIES["reference"],
        energy=CANARIES["energy"],
        code=library_code("canaries_membership.py"),
    script:
        "../workflow/scripts/canaries_membership.py"


rule canary_report:
    input:
        CANARY.outputs["exposure"]["exposure"],
    output:
        **plan_outputs(CANARY, "report"),
    log:
        result("logs/canaries/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        digits=CANARIES["digits"],
        template=lambda wildcards: CANARIES["template"],  # holds "{secret}": no expansion
        style=config["figure_style"],
        code=library_code("canaries_report.py"),
    script:
        "../workflow/scripts/canaries_report.py"


rule one_run_canaries:
    input:
        text=result(DP_PRIVATE_TEXT),
        tokenizer=result(TOKENIZER),
    output:
        canaries=result(ONE_RUN_CANARIES),
        text=STUDY.corpus_table(ONE_RUN_CORPUS),
        tokenizer=directory(STUDY.canary_tokenizer()),
    log:
        result("logs/canaries/one_run.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        template=lambda wildcards: CANARIES["template"],
        canaries=config.get("dp_audit", {}).get("canaries", {}),
        code=library_code("one_run_canaries.py"),
    script:
        "../workflow/scripts/one_run_canaries.py"
