# The DP audit (`snakemake dp`; config key dp_audit; docs/dp.md): every attack of the tables
# spec's group dp against each DP-SGD target (trained by train_model), empirical lower bounds
# on epsilon with the utility of each target, and the privacy-utility figure.
from mlmia.defences.workflow import audit_plan

DP_PLAN = audit_plan(STUDY) if config.get("dp_audit") else {}
DP_OUTPUTS = STUDY.dp_outputs()


rule dp_bounds:
    input:
        attack=[result(f"attack/{p['experiment']}.parquet") for p in DP_PLAN.values()],
        metrics=[result(f"metrics/{p['experiment']}.parquet") for p in DP_PLAN.values()],
        samples=[samples_path(p["dataset"]) for p in DP_PLAN.values()],
        models=[model_input_of(target) for target in DP_PLAN],
    output:
        bounds_csv=DP_OUTPUTS["bounds_csv"],
        bounds_md=DP_OUTPUTS["bounds_md"],
        by_attack=DP_OUTPUTS["by_attack"],
    log:
        result("logs/dp/bounds.log"),
    benchmark:
        result("benchmarks/dp/bounds.tsv")
    conda:
        "../envs/mlmia.yaml"
    params:
        plan=DP_PLAN,
        settings=config.get("dp_audit", {}),
        bootstrap={
            "bootstrap": config["metrics"]["bootstrap"],
            "seed": config["metrics"]["seed"],
        },
        code=library_code("dp_bounds.py"),
    script:
        "../workflow/scripts/dp_bounds.py"


rule dp_figure:
    input:
        DP_OUTPUTS["bounds_csv"],
    output:
        png=DP_OUTPUTS["figure_png"],
        pdf=DP_OUTPUTS["figure_pdf"],
    log:
        result("logs/dp/figure.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        fpr=config.get("dp_audit", {}).get("fpr", 0.01),
        style=config["figure_style"],
        code=library_code("dp_figure.py"),
    script:
        "../workflow/scripts/dp_figure.py"


if STUDY.one_run_targets():

    rule dp_one_run:
        input:
            canaries=result("canaries/one_run.parquet"),
            models=[model_input_of(target) for target in STUDY.one_run_targets()],
        output:
            csv=DP_OUTPUTS["one_run_csv"],
            markdown=DP_OUTPUTS["one_run_md"],
        log:
            result("logs/dp/one_run.log"),
        benchmark:
            result("benchmarks/dp/one_run.tsv")
        conda:
            "../envs/mlmia.yaml"
        threads: config["scoring"]["threads"]
        params:
            targets={t: STUDY.model_dir(t) for t in STUDY.one_run_targets()},
            template=lambda wildcards: config["canaries"]["template"],
            digits=config["canaries"]["digits"],
            guess_share=config["dp_audit"]["canaries"]["guess_share"],
            confidence=config["dp_audit"]["confidence"],
            device=config["scoring"]["device"],
            code=library_code("dp_one_run.py"),
        script:
            "../workflow/scripts/dp_one_run.py"
