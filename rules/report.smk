rule paper_comparison:
    input:
        [f"results/tables/{table}.csv" for table in TABLES],
    output:
        report(
            "results/paper_comparison.md",
            category="Comparison with the paper",
            caption="../report/comparison.rst",
        ),
    log:
        "logs/paper_comparison.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        world=config.get("world", "imported scores"),
        code=module_digest("mlmia.comparison"),
    script:
        "../workflow/scripts/paper_comparison.py"


rule findings:
    input:
        findings_inputs,
    output:
        table="results/findings.csv",
        markdown=report(
            "results/findings.md",
            category="Findings of the paper",
            caption="../report/findings.rst",
        ),
    log:
        "logs/findings.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        findings=TABLES_SPEC.get("findings", []),
        levels=lambda wildcards: {
            name: EXPERIMENTS[name].level for name in findings_experiments()
        },
        world=config.get("world", "imported scores"),
        code=module_digest("mlmia.findings"),
    script:
        "../workflow/scripts/findings.py"
