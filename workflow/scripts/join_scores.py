import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step


def main(snakemake):
    # Shards are contiguous slices in sample order: concatenating restores that order.
    write_parquet(pd.concat([pd.read_parquet(p) for p in snakemake.input], ignore_index=True), snakemake.output[0])


run_step(snakemake, main)
