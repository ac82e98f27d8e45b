import pandas as pd

from mlmia.io import write_text
from mlmia.runner import run_step
from mlmia.tables import render_latex, render_markdown, render_static, tidy_table


def main(snakemake):
    table_id, spec = snakemake.wildcards.table, snakemake.params.spec
    if spec.get("kind") == "static":
        tidy, markdown, latex = render_static(table_id, spec)
    else:
        experiments = snakemake.params.experiments
        metrics = {name: pd.read_parquet(path) for name, path in zip(experiments, snakemake.input)}
        tidy = tidy_table(
            table_id, spec, snakemake.params.row_sets, experiments, metrics,
            snakemake.params.paper_values, snakemake.params.protocols,
        )  # fmt: skip
        markdown, latex = render_markdown(tidy, spec), render_latex(tidy, spec)
    write_text(tidy.to_csv(index=False), snakemake.output.csv)
    write_text(markdown, snakemake.output.md)
    write_text(latex, snakemake.output.tex)


run_step(snakemake, main)
