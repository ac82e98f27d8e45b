rule import_manifest:
    input:
        imported_files,
    output:
        "results/samples/{dataset}.parquet",
    log:
        "logs/import_manifest/{dataset}.log",
    wildcard_constraints:
        dataset=IMPORTED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        dataset=lambda wildcards: IMPORTED[wildcards.dataset],
        root=config.get("imported", {}).get("root"),
        code=module_digest("mlmia.importing", "mlmia.io"),
    script:
        "../workflow/scripts/import_manifest.py"


rule import_model_scores:
    input:
        samples="results/samples/{dataset}.parquet",
        files=imported_model_files,
    output:
        "results/scores/{dataset}/{model}.{energy}.parquet",
    log:
        "logs/import_model_scores/{dataset}/{model}.{energy}.log",
    wildcard_constraints:
        dataset=IMPORTED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        dataset=lambda wildcards: IMPORTED[wildcards.dataset],
        root=config.get("imported", {}).get("root"),
        code=module_digest("mlmia.importing", "mlmia.io"),
    script:
        "../workflow/scripts/import_model_scores.py"
