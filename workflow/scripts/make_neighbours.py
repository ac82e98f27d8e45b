import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.scoring.neighbours import neighbour_samples
from mlmia.terms.manifest import neighbour_subsample


def main(snakemake):
    params = snakemake.params
    model, tokenizer = load_mlm(params.model, "auto")
    samples = pd.read_parquet(snakemake.input.samples)
    settings = params.settings
    if settings["subsample"]:  # neighbour texts for the drawn samples only (neighbours.subsample)
        samples = samples[neighbour_subsample(samples, settings["subsample"], settings["seed"])]
    neighbours = neighbour_samples(
        model,
        tokenizer,
        samples,
        n=settings["count"],
        seed=settings["seed"],
        candidates=settings["candidates"],
        dropout=settings["dropout"],
    )
    write_parquet(neighbours, snakemake.output[0])


run_step(snakemake, main)
