# Canary exposure (Carlini et al., "The Secret Sharer", USENIX Security 2019) on the embedded
# world: `snakemake canaries`. Secrets in a clinical template, inserted 0-64 times into the
# target's training text; their exposure per checkpoint, and the canaries' sentences as a
# membership test (mlmia.memorization.canaries). The plan (mlmia.study.plans.canaries): the
# outputs, the secrets' settings, the checkpoints, the target's shape and the reference.
from mlmia.terms.layout import DP_PRIVATE_TEXT, ONE_RUN_CORPUS

CANARY = STUDY.plan("canaries")


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
    threads: CANARY.resources["target"].threads
    resources:
        mem_mb=CANARY.resources["target"].mem_mb,
        device=CANARY.resources["target"].device,
    params:
        shape=CANARY.settings["shape"],
        model=CANARY.settings["model"],
        epochs=CANARY.settings["epochs"],
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
    threads: CANARY.resources["scoring"].threads
    resources:
        mem_mb=CANARY.resources["scoring"].mem_mb,
        device=CANARY.resources["scoring"].device,
    params:
        epochs=CANARY.settings["epochs"],
        template=lambda wildcards: CANARY.settings["template"],  # holds "{secret}": no expansion
        digits=CANARY.settings["digits"],
        seed=CANARY.settings["seed"],
        code=library_code("canaries_exposure.py"),
    script:
        "../workflow/scripts/canaries_exposure.py"


rule canary_membership_scores:
    input:
        canaries=CANARY.outputs["secrets"]["canaries"],
        target=CANARY.files["target"],
        reference=lambda wildcards: model_input_of(CANARY.settings["reference"]),
    output:
        CANARY.files["membership_scores"],
    log:
        result("logs/canaries/membership_scores.log"),
    benchmark:
        result("benchmarks/canaries/membership_scores.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: CANARY.resources["scoring"].threads
    resources:
        mem_mb=CANARY.resources["scoring"].mem_mb,
        device=CANARY.resources["scoring"].device,
        batch_size=CANARY.resources["scoring"].batch_size,
    params:
        epoch=CANARY.settings["last_epoch"],
        reference=lambda wildcards: STUDY.model_dir(CANARY.settings["reference"]),
        reference_tokenizer=CANARY.settings["reference_tokenizer"],
        energy=CANARY.settings["energy"],
        scoring=CANARY.settings["scoring"],
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
        metrics=CANARY.settings["metrics"],
        epoch=CANARY.settings["last_epoch"],
        reference=CANARY.settings["reference"],
        energy=CANARY.settings["energy"],
        caption=CANARY.caption,
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
        digits=CANARY.settings["digits"],
        template=lambda wildcards: CANARY.settings["template"],  # holds "{secret}": no expansion
        style=CANARY.settings["style"],
        caption=CANARY.caption,
        code=library_code("canaries_report.py"),
    script:
        "../workflow/scripts/canaries_report.py"


# the one-run DP audit's token canaries, in the DP targets' private text and tokenizer
rule one_run_canaries:
    input:
        text=result(DP_PRIVATE_TEXT),
        tokenizer=result(TOKENIZER),
    output:
        canaries=result(ONE_RUN_CANARIES),
        text=STUDY.corpus_table(ONE_RUN_CORPUS),
        tokenizer=directory(result(CANARY_TOKENIZER)),
    log:
        result("logs/canaries/one_run.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        template=lambda wildcards: CANARY.settings["template"],
        canaries=CANARY.settings["one_run"],
        code=library_code("one_run_canaries.py"),
    script:
        "../workflow/scripts/one_run_canaries.py"
