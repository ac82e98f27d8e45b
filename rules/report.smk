# The default target group's tables only: `snakemake` must not need the zoo's or DP's models.
rule paper_comparison:
    input:
        [
            result(f"tables/{table}.csv")
            for table in STUDY.tables
            if STUDY.group(table) == "default"
        ],
    output:
        report(
            result("paper_comparison.md"),
            category="Comparison with the paper",
            caption="../report/comparison.rst",
        ),
    log:
        result("logs/paper_comparison.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        world=STUDY.world,
        code=library_code("paper_comparison.py"),
    script:
        "../workflow/scripts/paper_comparison.py"


rule findings:
    input:
        unpack(lambda wildcards: STUDY.findings_inputs()),
    output:
        table=result("findings.csv"),
        markdown=report(
            result("findings.md"),
            category="Findings",
            caption="../report/findings.rst",
        ),
    log:
        result("logs/findings.log"),
    conda:
        "../envs/mlmia.yaml"
    params:
        checks=STUDY.finding_checks("default"),
        world=STUDY.world,
        code=library_code("findings.py"),
    script:
        "../workflow/scripts/findings.py"


# The findings of a named target group (`snakemake zoo`): findings_<group>.{md,csv}.
rule group_findings:
    input:
        unpack(lambda wildcards: STUDY.findings_inputs(wildcards.group)),
    output:
        table=result("findings_{group}.csv"),
        markdown=report(
            result("findings_{group}.md"),
            category="Findings",
            subcategory="{group}",
            caption="../report/findings.rst",
        ),
    log:
        result("logs/findings_{group}.log"),
    wildcard_constraints:
        group=name_pattern([g for g in STUDY.groups() if g != "default"]),
    conda:
        "../envs/mlmia.yaml"
    params:
        checks=lambda wildcards: STUDY.finding_checks(wildcards.group),
        world=STUDY.world,
        code=library_code("findings.py"),
    script:
        "../workflow/scripts/findings.py"


# Named targets, one per study the config runs (mlmia.study.plans): `snakemake zoo` builds the
# zoo's tables, figures and findings, `snakemake shadow` the shadow protocol's, and so on.
for study_plan in [p for p in STUDY_PLANS.values() if p.target != "all"]:

    rule:
        name:
            study_plan.target
        input:
            study_plan.targets,
