import pandas as pd

from mlmia.attack import build_attack_table
from mlmia.io import write_parquet
from mlmia.runner import run_step


def main(snakemake):
    table = build_attack_table(
        pd.read_parquet(snakemake.input.samples),
        pd.read_parquet(snakemake.input.target),
        pd.read_parquet(snakemake.input.reference),
        snakemake.params.experiment,
    )
    write_parquet(table, snakemake.output[0])


run_step(snakemake, main)
