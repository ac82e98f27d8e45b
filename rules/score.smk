rule score_shard:
    input:
        samples=result("samples/{dataset}.parquet"),
        model=model_input,
    output:
        temp(result("scores/{dataset}/shards/{model}.{energy}.{shard}.parquet")),
    log:
        result("logs/score/{dataset}/{model}.{energy}.{shard}.log"),
    benchmark:
        result("benchmarks/score/{dataset}/{model}.{energy}.{shard}.tsv")
    wildcard_constraints:
        dataset=SCORED_PATTERN,
        shard=r"\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    resources:
        gpu=config["scoring"]["gpus_per_job"],
        mem_mb=config["scoring"]["mem_mb"],
    params:
        shard=lambda wildcards: int(wildcards.shard),
        shards=lambda wildcards: STUDY.shards(wildcards.dataset),
        # K only matters to the masked energy: normalized scores ignore changes to it.
        k=lambda wildcards: (
            config["scoring"]["k"] if wildcards.energy == "masked" else 1
        ),
        seed=config["scoring"]["seed"],
        reduction=config["scoring"]["reduction"],
        batch_size=config["scoring"]["batch_size"],
        device=config["scoring"]["device"],
        precision=config["scoring"]["precision"],
        mask_count=config["scoring"]["mask_count"],
        truncate=config["scoring"]["truncate"],
        model=lambda wildcards: STUDY.model_dir(wildcards.model),
        tokenizer=lambda wildcards: MODELS.get(wildcards.model, {}).get("tokenizer"),
        code=module_digest("mlmia.scoring", "mlmia.models.loading", "mlmia.core.io"),
    script:
        "../workflow/scripts/score_shard.py"


rule join_scores:
    input:
        shard_scores,
    output:
        result("scores/{dataset}/{model}.{energy}.parquet"),
    log:
        result("logs/join_scores/{dataset}/{model}.{energy}.log"),
    wildcard_constraints:
        dataset=SCORED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        code=module_digest("mlmia.core.io"),
    script:
        "../workflow/scripts/join_scores.py"
