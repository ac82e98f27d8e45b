import pandas as pd

from mlmia.core.runner import run_step
from mlmia.report.figures import render_figure


def main(snakemake):
    inputs = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    outputs = [snakemake.output.png, snakemake.output.pdf]
    render_figure(snakemake.wildcards.figure, snakemake.params.spec, inputs, outputs, snakemake.params.style)


run_step(snakemake, main)
