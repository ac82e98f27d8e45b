import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.shadow.protocols import protocol


def main(snakemake):
    params = snakemake.params
    tables = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    write_parquet(protocol(params.protocol).corpus(tables, params.settings), snakemake.output[0])


run_step(snakemake, main)
