# Inputs of the zoo's attacks beyond the target and its reference: the training splits of
# the reference pool (LiRA, RMIA; one pool per training objective of the targets, on the same
# splits) and the neighbour texts (the neighbourhood attack). Beside the attack tables: the
# per-slot scores by token kind.
from mlmia.study.plans.tokens import (
    span_datasets,
    span_inputs,
    span_settings,
    token_experiments,
    token_inputs,
    token_settings,
)
from mlmia.terms.layout import span_file, token_files


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


# The PHI spans of a sample table (character offsets and kinds, no value), located once from
# the extraction study's PHI (the world's, built again, or extraction.phi): where rule
# token_kinds places each slot's token. The plan: mlmia.study.plans.tokens.
rule phi_spans:
    input:
        unpack(lambda wildcards: span_inputs(STUDY, wildcards.dataset)),
    output:
        result(span_file("{dataset}")),
    log:
        result("logs/phi_spans/{dataset}.log"),
    benchmark:
        result("benchmarks/phi_spans/{dataset}.tsv")
    wildcard_constraints:
        dataset=name_pattern(span_datasets(STUDY)),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=span_settings(STUDY),
        code=library_code("phi_spans.py"),
    script:
        "../workflow/scripts/phi_spans.py"


# Per-slot scores beside the attack table (mlmia.memorization.token_kinds): for an experiment
# whose attacks give one score per masked slot (InfoRMIA), each slot's position and the kind of
# PHI its token belongs to (the extraction study's spans), and the summary by kind; positions,
# kinds and numbers only. The plan (mlmia.study.plans.tokens): which experiments, the settings.
rule token_kinds:
    input:
        unpack(lambda wildcards: token_inputs(STUDY, wildcards.experiment)),
    output:
        tokens=result(token_files("{experiment}")["tokens"]),
        kinds=result(token_files("{experiment}")["kinds"]),
    log:
        result("logs/token_kinds/{experiment}.log"),
    benchmark:
        result("benchmarks/token_kinds/{experiment}.tsv")
    wildcard_constraints:
        experiment=name_pattern(token_experiments(STUDY)),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=lambda wildcards: token_settings(STUDY, wildcards.experiment),
        code=library_code("token_kinds.py"),
    script:
        "../workflow/scripts/token_kinds.py"
