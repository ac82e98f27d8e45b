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
