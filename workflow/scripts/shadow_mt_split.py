import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.shadow.mt_workflow import split_and_pairs


def main(snakemake):
    split, pairs, texts = split_and_pairs(pd.read_parquet(snakemake.input[0]), snakemake.params.settings)
    write_parquet(split, snakemake.output.split)
    write_parquet(pairs, snakemake.output.pairs)
    for name, path in zip(snakemake.params.names, snakemake.output.texts):
        write_parquet(texts[name], path)


run_step(snakemake, main)
