import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.world.subcorpora import subcorpora


def main(snakemake):
    inputs = snakemake.input
    tables = [pd.read_parquet(path) for path in (inputs.domain, inputs.general, inputs.wikipedia)]
    write_parquet(subcorpora(pd.read_parquet(inputs.world), *tables), snakemake.output[0])


run_step(snakemake, main)
