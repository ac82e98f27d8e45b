import pandas as pd

from mlmia.core.runner import run_step
from mlmia.memorization.vocabulary_check import write_vocabulary_report


def main(snakemake):
    write_vocabulary_report(
        [pd.read_csv(path) for path in snakemake.input],
        snakemake.output.csv,
        snakemake.output.table,
        snakemake.params.values_from,
    )


run_step(snakemake, main)
