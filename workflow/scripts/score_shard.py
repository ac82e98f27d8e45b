import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.scoring.energy import score_samples
from mlmia.scoring.settings import ScoringSettings
from mlmia.scoring.shards import shard_slice
from mlmia.terms.manifest import rows_read


def main(snakemake):
    params = snakemake.params
    settings = ScoringSettings.from_params(params.scoring, snakemake.resources)
    samples = shard_slice(rows_read(pd.read_parquet(snakemake.input.samples), params.rows), params.shard, params.shards)
    model, tokenizer = load_mlm(params.model, settings.device, tokenizer=params.tokenizer)
    scores = score_samples(
        model,
        tokenizer,
        samples,
        energy=snakemake.wildcards.energy,
        model_name=snakemake.wildcards.model,
        num_threads=snakemake.threads,
        **settings.score_arguments(),
    )
    write_parquet(scores, snakemake.output[0])


run_step(snakemake, main)
