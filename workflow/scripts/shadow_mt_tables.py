import pandas as pd

from mlmia.core.runner import run_step
from mlmia.shadow.mt_workflow import tables
from mlmia.shadow.report import write_outputs


def main(snakemake):
    params, out = snakemake.params, snakemake.output
    features = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.features)}
    training = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.training)}
    split, pairs = pd.read_parquet(snakemake.input.split), pd.read_parquet(snakemake.input.pairs)
    result = tables(split, pairs, features, training, params.settings)
    write_outputs(result, dict(out.items()), params.settings["bootstrap"], params.style)


run_step(snakemake, main)
