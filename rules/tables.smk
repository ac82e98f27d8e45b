rule render_table:
    input:
        table_metric_inputs,
    output:
        csv=report(
            "results/tables/{table}.csv",
            category="Tables",
            caption="../report/table.rst",
        ),
        md="results/tables/{table}.md",
        tex="results/tables/{table}.tex",
    log:
        "logs/render_table/{table}.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: TABLES_SPEC["tables"][wildcards.table],
        row_sets=ROW_SETS,
        experiments=lambda wildcards: {
            name: EXPERIMENTS[name] for name in table_experiments(wildcards.table)
        },
        paper_values=lambda wildcards: {
            wildcards.table: PAPER_VALUES.get(wildcards.table, {})
        },
        protocols=config["metrics"].get("protocols", ["published", "corrected"]),
        code=module_digest("mlmia.tables"),
    script:
        "../workflow/scripts/render_table.py"


# Named targets: `snakemake table2` renders results/tables/table2.{csv,md,tex}.
for table_name in TABLES:

    rule:
        name:
            table_name
        input:
            table_outputs(table_name),
