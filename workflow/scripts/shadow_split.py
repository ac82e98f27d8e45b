import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.shadow.protocols import protocol


def main(snakemake):
    params = snakemake.params
    split, pairs, texts = protocol(params.protocol).split(pd.read_parquet(snakemake.input[0]), params.settings)
    write_parquet(split, snakemake.output.split)
    write_parquet(pairs, snakemake.output.pairs)
    for name, path in zip(params.names, snakemake.output.texts):
        write_parquet(texts[name], path)


run_step(snakemake, main)
