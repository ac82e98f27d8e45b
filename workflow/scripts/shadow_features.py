import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.shadow.protocols import protocol


def main(snakemake):
    inputs, params, who = snakemake.input, snakemake.params, snakemake.wildcards.who
    split, pairs = pd.read_parquet(inputs.split), pd.read_parquet(inputs.pairs)
    features = protocol(params.protocol).features(
        inputs.model, split, pairs, who, params.settings, snakemake.threads, snakemake.resources.device
    )
    write_parquet(features, snakemake.output[0])


run_step(snakemake, main)
