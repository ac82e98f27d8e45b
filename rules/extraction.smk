# PHI extraction by infilling: `snakemake extraction`. Each PHI value of a patient (the
# embedded world's, or the spans a user names: extraction.phi) masked where its samples hold
# it and read back by the target and a reference (mlmia.memorization.extraction). Counts and
# rates only. The plan (mlmia.study.plans.extraction): the models read back, the settings,
# rates, table, figure, findings.
from mlmia.study.plans.extraction import tokenizer_source, vocabulary_inputs

EXTRACT = STUDY.plan("extraction")


# the values themselves (the world's, or the user's file): temporary, so that no file the
# study leaves holds one
rule extraction_values:
    input:
        **EXTRACT.files["values_inputs"],
    output:
        temp(EXTRACT.files["values"]),
    log:
        result("logs/extraction/values.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=EXTRACT.settings["corpus"],
        phi=EXTRACT.settings["phi"],
        code=library_code("extraction_values.py"),
    script:
        "../workflow/scripts/extraction_values.py"


rule extraction_infill:
    input:
        samples=EXTRACT.files["samples"],
        values=EXTRACT.files["values"],
        model=model_input,
    output:
        EXTRACT.files["infill"],
    log:
        result("logs/extraction/infill/{model}.log"),
    benchmark:
        result("benchmarks/extraction/infill/{model}.tsv")
    conda:
        "../envs/mlmia.yaml"
    threads: EXTRACT.resources["infill"].threads
    resources:
        device=EXTRACT.resources["infill"].device,
    params:
        settings=EXTRACT.settings["extraction"],
        where=EXTRACT.settings["where"],
        model=lambda wildcards: STUDY.model_dir(wildcards.model),
        tokenizer=lambda wildcards: STUDY.model_tokenizer(wildcards.model),
        code=library_code("extraction_infill.py"),
    script:
        "../workflow/scripts/extraction_infill.py"


rule extraction_report:
    input:
        samples=EXTRACT.files["samples"],
        infilled=EXTRACT.files["infilled"],
    output:
        **plan_outputs(EXTRACT, "report"),
    log:
        result("logs/extraction/report.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        models=EXTRACT.settings["models"],
        settings=EXTRACT.settings["extraction"],
        style=EXTRACT.settings["style"],
        caption=EXTRACT.caption,
        code=library_code("extraction_report.py"),
    script:
        "../workflow/scripts/extraction_report.py"


# Each PHI kind's extraction beside the membership signal its tokens carry under the per-slot
# attacks of the experiments extraction.token_kinds names (mlmia.memorization.extraction_kinds):
# their summaries by kind (rule token_kinds) and the rates' differences. Kinds and numbers only.
if "kinds" in EXTRACT.outputs:

    rule extraction_kinds:
        input:
            **EXTRACT.files["kinds_inputs"],
        output:
            **plan_outputs(EXTRACT, "kinds"),
        log:
            result("logs/extraction/kinds.log"),
        conda:
            "../envs/mlmia.yaml"
        params:
            settings=EXTRACT.settings["kinds"],
            caption=EXTRACT.caption,
            code=library_code("extraction_kinds.py"),
        script:
            "../workflow/scripts/extraction_kinds.py"


# The vocabulary check (mlmia.memorization.vocabulary_check): each patient's identifying values with
# its role (the world's names, physicians and states, or the user's PHI table), temporary as the
# values above; each model's counts from its own tokenizer (a tokenizer the config marks public: one row that
# says so, nothing counted); the table of the target and the reference.
rule extraction_identifiers:
    input:
        **EXTRACT.files["values_inputs"],
    output:
        temp(EXTRACT.files["identifiers"]),
    log:
        result("logs/extraction/identifiers.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        corpus=EXTRACT.settings["corpus"],
        phi=EXTRACT.settings["phi"],
        code=library_code("extraction_identifiers.py"),
    script:
        "../workflow/scripts/extraction_identifiers.py"


rule extraction_vocabulary:
    input:
        unpack(lambda wildcards: vocabulary_inputs(STUDY, EXTRACT, wildcards.model)),
    output:
        EXTRACT.files["vocabulary"],
    log:
        result("logs/extraction/vocabulary/{model}.log"),
    benchmark:
        result("benchmarks/extraction/vocabulary/{model}.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=EXTRACT.settings["vocabulary"],
        tokenizer=lambda wildcards: tokenizer_source(STUDY, wildcards.model),
        public=lambda wildcards: STUDY.public_tokenizer(wildcards.model),
        code=library_code("extraction_vocabulary.py"),
    script:
        "../workflow/scripts/extraction_vocabulary.py"


rule extraction_vocabulary_table:
    input:
        EXTRACT.files["vocabularies"],
    output:
        **plan_outputs(EXTRACT, "vocabulary"),
    log:
        result("logs/extraction/vocabulary_table.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        values_from=EXTRACT.settings["vocabulary_from"],
        caption=EXTRACT.caption,
        code=library_code("extraction_vocabulary_table.py"),
    script:
        "../workflow/scripts/extraction_vocabulary_table.py"
