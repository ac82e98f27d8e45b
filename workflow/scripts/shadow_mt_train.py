import pandas as pd

from mlmia.core.runner import run_step
from mlmia.models.seq2seq import train_translation_model


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    pairs = pd.read_parquet(inputs.pairs)
    train_translation_model(
        pairs["text"],
        pairs["target"],
        inputs.tokenizer,
        snakemake.output[0],
        config=dict(params.model),
        threads=snakemake.threads,
        device=snakemake.resources.device,
        name=params.name,
    )


run_step(snakemake, main)
