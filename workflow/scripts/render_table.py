import pandas as pd

from mlmia.io import write_text
from mlmia.runner import run_step
from mlmia.tables import render_latex, render_markdown, tidy_table


def main(snakemake):
    experiments = snakemake.params.experiments
    metrics = {name: pd.read_parquet(path) for name, path in zip(experiments, snakemake.input)}
    spec = snakemake.params.spec
    tidy = tidy_table(
        snakemake.wildcards.table,
        spec,
        snakemake.params.row_sets,
        experiments,
        metrics,
        snakemake.params.paper_values,
        snakemake.params.protocols,
    )
    write_text(tidy.to_csv(index=False), snakemake.output.csv)
    write_text(render_markdown(tidy, spec), snakemake.output.md)
    write_text(render_latex(tidy, spec), snakemake.output.tex)


run_step(snakemake, main)
