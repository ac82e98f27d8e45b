# The DP audit (`snakemake dp`; config key dp_audit; docs/dp.md): one audit job per DP target
# (white-box gradient canaries, mechanism checks, black-box token canaries and, for the targets
# of the tables spec's group dp, every attack with the target's utility), one check job per
# target that fails the run in one line when its audit finds the DP claim broken, and the
# tables, findings and privacy-utility figure over all targets.
from mlmia.defences.workflow import audit_plan

DP_PLAN = audit_plan(STUDY) if config.get("dp_audit") else {}
DP_OUTPUTS = STUDY.dp_outputs()
DP_TARGETS = STUDY.dp_targets()
DP_SETTINGS = config.get("dp_audit", {})


rule dp_audit:
    input:
        unpack(dp_audit_inputs),
    output:
        STUDY.dp_audit_outputs("{target}")["record"],
    log:
        result("logs/dp/audit/{target}.log"),
    benchmark:
        result("benchmarks/dp/audit/{target}.tsv")
    wildcard_constraints:
        target=name_pattern(DP_TARGETS),
    conda:
        "../envs/mlmia.yaml"
    threads: config["scoring"]["threads"]
    params:
        plan=lambda wildcards: DP_PLAN.get(wildcards.target),
        settings=DP_SETTINGS,
        bootstrap={
            "bootstrap": config["metrics"]["bootstrap"],
            "seed": config["metrics"]["seed"],
        },
        model_dir=lambda wildcards: STUDY.model_dir(wildcards.target),
        device=config["scoring"]["device"],
        code=library_code("dp_audit.py"),
    script:
        "../workflow/scripts/dp_audit.py"


rule dp_check:
    input:
        STUDY.dp_audit_outputs("{target}")["record"],
    output:
        STUDY.dp_audit_outputs("{target}")["passed"],
    log:
        result("logs/dp/check/{target}.log"),
    wildcard_constraints:
        target=name_pattern(DP_TARGETS),
    conda:
        "../envs/mlmia.yaml"
    params:
        code=library_code("dp_check.py"),
    script:
        "../workflow/scripts/dp_check.py"


rule dp_bounds:
    input:
        [STUDY.dp_audit_outputs(target)["record"] for target in DP_TARGETS],
    output:
        bounds_csv=DP_OUTPUTS["bounds_csv"],
        bounds_md=DP_OUTPUTS["bounds_md"],
        by_attack=DP_OUTPUTS["by_attack"],
        one_run_csv=DP_OUTPUTS["one_run_csv"],
        one_run_md=DP_OUTPUTS["one_run_md"],
        checks_csv=DP_OUTPUTS["checks_csv"],
        findings_csv=DP_OUTPUTS["findings_csv"],
        findings_md=DP_OUTPUTS["findings_md"],
    log:
        result("logs/dp/bounds.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=DP_SETTINGS,
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
        fpr=DP_SETTINGS.get("fpr", 0.01),
        style=config["figure_style"],
        code=library_code("dp_figure.py"),
    script:
        "../workflow/scripts/dp_figure.py"
