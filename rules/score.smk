rule score_shard:
    input:
        samples=samples_path("{dataset}"),
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
    threads: SCORING.threads
    resources:
        gpu=SCORING.gpus,
        mem_mb=SCORING.mem_mb,
        # how the job runs, not what it computes: changing them reruns nothing (rules/common.smk)
        device=SCORING.device,
        batch_size=SCORING.batch_size,
    params:
        shard=lambda wildcards: int(wildcards.shard),
        shards=lambda wildcards: STUDY.shards(wildcards.dataset),
        # the rows the experiments reading these scores take (all others are never read)
        rows=lambda wildcards: STUDY.score_rows(
            wildcards.dataset, wildcards.model, wildcards.energy
        ),
        # one object for every scoring rule, with the device and the batch size of the
        # resources; K only matters to the masked energy, so normalized scores ignore changes to it
        scoring=lambda wildcards: STUDY.scoring(wildcards.energy),
        model=lambda wildcards: STUDY.model_dir(wildcards.model),
        tokenizer=lambda wildcards: STUDY.model_tokenizer(wildcards.model),
        code=library_code("score_shard.py"),
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
        code=library_code("join_scores.py"),
    script:
        "../workflow/scripts/join_scores.py"
