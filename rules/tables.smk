rule render_table:
    input:
        unpack(lambda wildcards: STUDY.table_inputs(wildcards.table)),
    output:
        csv=report(
            result("tables/{table}.csv"),
            category="Tables",
            caption="../report/table.rst",
        ),
        md=result("tables/{table}.md"),
        tex=result("tables/{table}.tex"),
    log:
        result("logs/render_table/{table}.log"),
    # only the spec's tables: another study's table in tables/ (extraction's) has its own rule
    wildcard_constraints:
        table=name_pattern(STUDY.tables),
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: STUDY.tables[wildcards.table],
        rows=lambda wildcards: STUDY.rows(wildcards.table),
        experiments=lambda wildcards: {
            name: STUDY.experiments[name]
            for name in STUDY.table_experiments(wildcards.table)
        },
        paper_values=lambda wildcards: STUDY.paper_values.get(wildcards.table, {}),
        protocols=STUDY.protocols(),
        code=library_code("render_table.py"),
    script:
        "../workflow/scripts/render_table.py"


# Named targets: `snakemake table2` renders results/<run>/tables/table2.{csv,md,tex}.
for table_name in STUDY.tables:

    rule:
        name:
            table_name
        input:
            STUDY.table_outputs(table_name),
