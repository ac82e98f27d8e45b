import pandas as pd

from mlmia.core.runner import run_step
from mlmia.shadow.protocols import tables
from mlmia.shadow.report import write_outputs


def main(snakemake):
    params, out = snakemake.params, snakemake.output
    features = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.features)}
    texts = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.texts)}
    split, pairs = pd.read_parquet(snakemake.input.split), pd.read_parquet(snakemake.input.pairs)
    result = tables(params.protocol, split, pairs, features, texts, params.settings)
    write_outputs(result, dict(out.items()), params.settings["bootstrap"], params.style)


run_step(snakemake, main)
