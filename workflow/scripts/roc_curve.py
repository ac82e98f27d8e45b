import pandas as pd

from mlmia.io import write_parquet
from mlmia.metrics import roc_points
from mlmia.runner import run_step


def main(snakemake):
    write_parquet(roc_points(pd.read_parquet(snakemake.input[0]), snakemake.params.level), snakemake.output[0])


run_step(snakemake, main)
