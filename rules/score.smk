rule score_shard:
    input:
        samples="results/samples/{dataset}.parquet",
        model=model_input,
    output:
        temp("results/scores/{dataset}/shards/{model}.{energy}.{shard}.parquet"),
    log:
        "logs/score/{dataset}/{model}.{energy}.{shard}.log",
    benchmark:
        "benchmarks/score/{dataset}/{model}.{energy}.{shard}.tsv"
    wildcard_constraints:
        dataset=SCORED_PATTERN,
        shard=r"\d+",
    conda:
        "../envs/mlmia.yaml"
    threads: config.get("scoring", {}).get("threads", 1)
    resources:
        gpu=config.get("scoring", {}).get("gpus_per_job", 1),
        mem_mb=config.get("scoring", {}).get("mem_mb", 3000),
    params:
        shard=lambda wildcards: int(wildcards.shard),
        shards=lambda wildcards: n_shards(wildcards.dataset),
        # K only matters to the masked energy: normalized scores ignore changes to it.
        k=lambda wildcards: scoring_k(wildcards.energy),
        seed=config.get("scoring", {}).get("seed", 0),
        reduction=config.get("scoring", {}).get("reduction", "mean"),
        batch_size=config.get("scoring", {}).get("batch_size"),
        device=config.get("scoring", {}).get("device", "auto"),
        precision=config.get("scoring", {}).get("precision", "auto"),
        mask_count=config.get("scoring", {}).get("mask_count", "ceil"),
        model=model_dir,
        tokenizer=model_tokenizer,
    script:
        "../workflow/scripts/score_shard.py"


rule join_scores:
    input:
        shard_scores,
    output:
        "results/scores/{dataset}/{model}.{energy}.parquet",
    log:
        "logs/join_scores/{dataset}/{model}.{energy}.log",
    wildcard_constraints:
        dataset=SCORED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    script:
        "../workflow/scripts/join_scores.py"
