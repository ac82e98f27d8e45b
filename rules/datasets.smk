# Sample sets from the user's files: the paper's processed files, raw MIMIC-III / i2b2
# imported here first, or any corpus (bring your own).

if "mimic" in STUDY.raw:

    rule import_mimic_notes:
        input:
            noteevents=STUDY.raw["mimic"]["noteevents"],
            member_lists=STUDY.raw["mimic"]["member_lists"],
            names=STUDY.raw["mimic"].get("names", []),
        output:
            **STUDY.raw_outputs("mimic"),
        log:
            result("logs/raw/import_mimic_notes.log"),
        benchmark:
            result("benchmarks/raw/import_mimic_notes.tsv")
        conda:
            "../envs/mlmia.yaml"
        params:
            categories=STUDY.raw["mimic"]["categories"],
            patients=STUDY.raw["mimic"]["patients"],
            seed=STUDY.raw["seed"],
            code=library_code("import_mimic_notes.py"),
        script:
            "../workflow/scripts/import_mimic_notes.py"


if "i2b2" in STUDY.raw:

    rule import_i2b2_notes:
        input:
            xml=STUDY.raw["i2b2"]["xml"],
        output:
            **STUDY.raw_outputs("i2b2"),
        log:
            result("logs/raw/import_i2b2_notes.log"),
        benchmark:
            result("benchmarks/raw/import_i2b2_notes.tsv")
        conda:
            "../envs/mlmia.yaml"
        params:
            patients=STUDY.raw["i2b2"]["patients"],
            seed=STUDY.raw["seed"],
            code=library_code("import_i2b2_notes.py"),
        script:
            "../workflow/scripts/import_i2b2_notes.py"


rule prepare_dataset:
    input:
        unpack(dataset_inputs),
    output:
        samples_path("{dataset}"),
    log:
        result("logs/prepare_dataset/{dataset}.log"),
    benchmark:
        result("benchmarks/prepare_dataset/{dataset}.tsv")
    wildcard_constraints:
        dataset=DATASETS_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: DATASETS[wildcards.dataset],
        key="datasets.{dataset}",
        tokenizer=lambda wildcards: STUDY.dataset_tokenizer(wildcards.dataset),
        requirements=lambda wildcards: STUDY.dataset_requirements(wildcards.dataset),
        code=library_code("prepare_dataset.py"),
    script:
        "../workflow/scripts/prepare_dataset.py"
