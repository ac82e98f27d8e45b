import pandas as pd

from mlmia.io import write_parquet
from mlmia.models import load_mlm
from mlmia.runner import run_step
from mlmia.scoring import score_samples
from mlmia.shards import shard_slice


def main(snakemake):
    params = snakemake.params
    samples = shard_slice(pd.read_parquet(snakemake.input.samples), params.shard, params.shards)
    model, tokenizer = load_mlm(params.model, params.device, tokenizer=params.tokenizer)
    scores = score_samples(
        model,
        tokenizer,
        samples,
        energy=snakemake.wildcards.energy,
        k=params.k or 1,
        seed=params.seed,
        reduction=params.reduction,
        batch_size=params.batch_size,
        model_name=snakemake.wildcards.model,
        num_threads=snakemake.threads,
        mask_count=params.mask_count,
        precision=params.precision,
    )
    write_parquet(scores, snakemake.output[0])


run_step(snakemake, main)
