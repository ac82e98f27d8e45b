rule import_manifest:
    input:
        imported_files,
    output:
        samples_path("{dataset}"),
    log:
        result("logs/import_manifest/{dataset}.log"),
    wildcard_constraints:
        dataset=IMPORTED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        dataset=lambda wildcards: IMPORTED[wildcards.dataset],
        root=lambda wildcards: STUDY.imported_root(),
        code=library_code("import_manifest.py"),
    script:
        "../workflow/scripts/import_manifest.py"


rule import_model_scores:
    input:
        samples=samples_path("{dataset}"),
        files=imported_model_files,
    output:
        result("scores/{dataset}/{model}.{energy}.parquet"),
    log:
        result("logs/import_model_scores/{dataset}/{model}.{energy}.log"),
    wildcard_constraints:
        dataset=IMPORTED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    params:
        dataset=lambda wildcards: IMPORTED[wildcards.dataset],
        root=lambda wildcards: STUDY.imported_root(),
        code=library_code("import_model_scores.py"),
    script:
        "../workflow/scripts/import_model_scores.py"
