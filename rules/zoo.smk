# Inputs of the zoo's attacks beyond the target and its reference: the training splits of
# the reference pool (LiRA, RMIA; one pool per training objective of the targets, on the same
# splits) and the neighbour texts (the neighbourhood attack).


rule reference_splits:
    input:
        pool=lambda wildcards: STUDY.reference_pool_table(),
        samples=lambda wildcards: samples_path(
            STUDY.reference_split_settings()["dataset"]
        ),
    output:
        splits=result(REFERENCE_SPLITS),
        texts=[
            result(f"references/{name}.text.parquet")
            for name in STUDY.reference_pool()
        ],
    log:
        result("logs/reference_splits.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        names=STUDY.reference_pool(),
        # the pools of other training objectives train on the same splits (mlmia.study.pools)
        aliases=STUDY.pools.aliases,
        seed=lambda wildcards: STUDY.reference_split_settings()["seed"],
        online=lambda wildcards: STUDY.reference_split_settings()["online"],
        code=library_code("reference_splits.py"),
    script:
        "../workflow/scripts/reference_splits.py"


rule make_neighbours:
    input:
        samples=lambda wildcards: samples_path(wildcards.dataset),
        model=lambda wildcards: model_input_of(STUDY.neighbour_model()),
    output:
        result("samples/{dataset}~neighbours.parquet"),
    log:
        result("logs/make_neighbours/{dataset}.log"),
    benchmark:
        result("benchmarks/make_neighbours/{dataset}.tsv")
    wildcard_constraints:
        dataset=name_pattern([s[: -len("~neighbours")] for s in STUDY.neighbour_sets()]),
    conda:
        "../envs/mlmia.yaml"
    threads: SCORING.threads
    params:
        model=lambda wildcards: STUDY.model_dir(STUDY.neighbour_model()),
        settings=lambda wildcards: STUDY.neighbour_settings(),
        code=library_code("make_neighbours.py"),
    script:
        "../workflow/scripts/make_neighbours.py"
