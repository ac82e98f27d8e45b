import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.scoring.neighbours import neighbour_samples


def main(snakemake):
    params = snakemake.params
    model, tokenizer = load_mlm(params.model, "auto")
    samples = pd.read_parquet(snakemake.input.samples)
    write_parquet(neighbour_samples(model, tokenizer, samples, params.neighbours, params.seed), snakemake.output[0])


run_step(snakemake, main)
