# One training rule for every model the workflow trains: the world's targets and
# references, the reference pool (LiRA, RMIA) and the shadow protocol's models.


rule train_model:
    input:
        unpack(train_inputs),
    output:
        directory(result(model_dir("{model}"))),
    log:
        result("logs/train/{model}.log"),
    benchmark:
        result("benchmarks/train/{model}.tsv")
    wildcard_constraints:
        model=TRAINED_PATTERN,
    conda:
        "../envs/mlmia.yaml"
    threads: TRAINING.threads
    resources:
        mem_mb=TRAINING.mem_mb,
        device=TRAINING.device,
    params:
        model=lambda wildcards: STUDY.training_spec(wildcards.model)["settings"],
        name="{model}",
        code=library_code("train_model.py"),
    script:
        "../workflow/scripts/train_model.py"
