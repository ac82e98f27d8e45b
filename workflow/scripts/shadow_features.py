import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.shadow.features import fill_in_features
from mlmia.shadow.workflow import queried_samples


def main(snakemake):
    samples = queried_samples(
        pd.read_parquet(snakemake.input.split), pd.read_parquet(snakemake.input.pairs), snakemake.wildcards.who
    )
    model, tokenizer = load_mlm(snakemake.input.model, "auto")
    write_parquet(fill_in_features(model, tokenizer, samples, snakemake.params.seed), snakemake.output[0])


run_step(snakemake, main)
