import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.report.tables import render_table


def main(snakemake):
    params = snakemake.params
    metrics = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    tidy, markdown, latex = render_table(
        snakemake.wildcards.table, params.spec, params.rows, params.experiments, metrics, params.paper_values,
        params.protocols,
    )  # fmt: skip
    write_text(tidy.to_csv(index=False), snakemake.output.csv)
    write_text(markdown, snakemake.output.md)
    write_text(latex, snakemake.output.tex)


run_step(snakemake, main)
