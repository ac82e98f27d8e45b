import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.scoring.energy import score_samples
from mlmia.scoring.shards import shard_slice


def main(snakemake):
    params = snakemake.params
    samples = shard_slice(pd.read_parquet(snakemake.input.samples), params.shard, params.shards)
    model, tokenizer = load_mlm(params.model, params.device, tokenizer=params.tokenizer)
    scores = score_samples(
        model,
        tokenizer,
        samples,
        energy=snakemake.wildcards.energy,
        k=params.k,
        seed=params.seed,
        reduction=params.reduction,
        batch_size=params.batch_size,
        model_name=snakemake.wildcards.model,
        num_threads=snakemake.threads,
        mask_count=params.mask_count,
        precision=params.precision,
        truncate=params.truncate,
    )
    write_parquet(scores, snakemake.output[0])


run_step(snakemake, main)
