import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.seq2seq import load_translation_model
from mlmia.shadow.mt_workflow import queried_pairs
from mlmia.shadow.translation import translation_features


def main(snakemake):
    import torch

    torch.set_num_threads(max(1, int(snakemake.threads)))
    pairs = queried_pairs(
        pd.read_parquet(snakemake.input.split), pd.read_parquet(snakemake.input.pairs), snakemake.wildcards.who
    )
    model, tokenizer = load_translation_model(snakemake.input.model, snakemake.params.device)
    write_parquet(translation_features(model, tokenizer, pairs), snakemake.output[0])


run_step(snakemake, main)
