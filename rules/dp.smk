# The DP audit (`snakemake dp`; config key dp_audit; docs/dp.md): one audit job per DP target
# (white-box gradient canaries, mechanism checks, black-box token canaries and, for the targets
# of the tables spec's group dp, every attack with the target's utility), one check job per
# target that fails the run in one line when its audit finds the DP claim broken, and the
# tables, findings and privacy-utility figure over all targets.
# The plan (mlmia.study.plans.dp): what each target's audit attacks (its audit_plan).
from mlmia.study.plans.dp import dp_audit_inputs

DP = STUDY.plan("dp")
DP_TARGETS = DP.settings["targets"]


rule dp_audit:
    input:
        unpack(lambda wildcards: dp_audit_inputs(STUDY, DP, wildcards.target)),
    output:
        DP.files["record"],
    log:
        result("logs/dp/audit/{target}.log"),
    benchmark:
        result("benchmarks/dp/audit/{target}.tsv")
    wildcard_constraints:
        target=name_pattern(DP_TARGETS),
    conda:
        "../envs/mlmia.yaml"
    threads: DP.resources["audit"].threads
    resources:
        device=DP.resources["audit"].device,
    params:
        plan=lambda wildcards: DP.settings["audits"].get(wildcards.target),
        settings=DP.settings["audit"],
        bootstrap=DP.settings["bootstrap"],
        model_dir=lambda wildcards: STUDY.model_dir(wildcards.target),
        code=library_code("dp_audit.py"),
    script:
        "../workflow/scripts/dp_audit.py"


rule dp_check:
    input:
        DP.files["record"],
    output:
        DP.files["passed"],
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
        DP.files["records"],
    output:
        **plan_outputs(DP, "bounds"),
    log:
        result("logs/dp/bounds.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        settings=DP.settings["audit"],
        caption=DP.caption,
        code=library_code("dp_bounds.py"),
    script:
        "../workflow/scripts/dp_bounds.py"


rule dp_figure:
    input:
        DP.outputs["bounds"]["bounds_csv"],
    output:
        **plan_outputs(DP, "figure"),
    log:
        result("logs/dp/figure.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        fpr=DP.settings["fpr"],
        style=DP.settings["style"],
        caption=DP.caption,
        code=library_code("dp_figure.py"),
    script:
        "../workflow/scripts/dp_figure.py"
