import pandas as pd

from mlmia.figures import render_figure
from mlmia.runner import run_step


def main(snakemake):
    inputs = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    outputs = [snakemake.output.png, snakemake.output.pdf]
    render_figure(snakemake.wildcards.figure, snakemake.params.spec, inputs, outputs, snakemake.params.style)


run_step(snakemake, main)
