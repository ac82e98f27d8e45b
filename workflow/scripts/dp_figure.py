import pandas as pd

from mlmia.core.runner import run_step
from mlmia.defences.figure import privacy_utility_figure


def main(snakemake):
    table = pd.read_csv(snakemake.input[0])
    outputs = [snakemake.output.png, snakemake.output.pdf]
    privacy_utility_figure(table, snakemake.params.fpr, snakemake.params.style, outputs)


run_step(snakemake, main)
