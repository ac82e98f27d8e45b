# Sample sets from the user's files: the paper's processed files, raw MIMIC-III / i2b2
# imported here first, or any corpus (bring your own).


rule import_mimic_notes:
    input:
        noteevents=RAW.get("mimic", {}).get("noteevents", []),
        member_lists=RAW.get("mimic", {}).get("member_lists", []),
        names=RAW.get("mimic", {}).get("names", []),
    output:
        **raw_outputs("mimic"),
    log:
        "logs/raw/import_mimic_notes.log",
    benchmark:
        "benchmarks/raw/import_mimic_notes.tsv"
    conda:
        "../envs/mlmia.yaml"
    params:
        categories=RAW.get("mimic", {}).get("categories", ["Discharge summary"]),
        patients=RAW.get("mimic", {}).get("patients", {}),
        seed=RAW.get("seed", 0),
        code=module_digest("mlmia.raw"),
    script:
        "../workflow/scripts/import_mimic_notes.py"


rule import_i2b2_notes:
    input:
        xml=RAW.get("i2b2", {}).get("xml", []),
    output:
        **raw_outputs("i2b2"),
    log:
        "logs/raw/import_i2b2_notes.log",
    benchmark:
        "benchmarks/raw/import_i2b2_notes.tsv"
    conda:
        "../envs/mlmia.yaml"
    params:
        patients=RAW.get("i2b2", {}).get("patients", {}),
        seed=RAW.get("seed", 0),
        code=module_digest("mlmia.raw"),
    script:
        "../workflow/scripts/import_i2b2_notes.py"


rule prepare_dataset:
    input:
        unpack(dataset_inputs),
    output:
        "results/samples/{dataset}.parquet",
    log:
        "logs/prepare_dataset/{dataset}.log",
    benchmark:
        "benchmarks/prepare_dataset/{dataset}.tsv"
    wildcard_constraints:
        dataset=DATASETS_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: DATASETS[wildcards.dataset],
        key="datasets.{dataset}",
        tokenizer=lambda wildcards: dataset_tokenizer(wildcards.dataset),
        code=module_digest("mlmia.datasets", "mlmia.io"),
    script:
        "../workflow/scripts/prepare_dataset.py"
