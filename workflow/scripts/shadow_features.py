import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.shadow.protocols import protocol


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    split, pairs = pd.read_parquet(inputs.split), pd.read_parquet(inputs.pairs)
    features = protocol(params.protocol).features(
        inputs.model, split, pairs, snakemake.wildcards.who, params.settings, snakemake.threads
    )
    write_parquet(features, snakemake.output[0])


run_step(snakemake, main)
