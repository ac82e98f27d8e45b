import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_tokenizer
from mlmia.models.tokenizer import tokenizer_from_tables
from mlmia.world.samples import named_variant, select_samples


def main(snakemake):
    settings = snakemake.params.samples
    world = pd.read_parquet(snakemake.input.world)
    tokenizer = load_tokenizer(snakemake.input.tokenizer)
    # tokenizer.min_patients: the length buckets from the world's tokenizer learnt without it (in memory)
    unfiltered = snakemake.params.length_tokenizer
    lengths = None
    if unfiltered is not None:
        lengths = tokenizer_from_tables(list(snakemake.input.corpora), None, min_patients=None, **unfiltered)
    plain = select_samples(world, tokenizer, settings["counts"], settings["lengths"], settings["seed"], lengths)
    write_parquet(plain, snakemake.output.plain)
    write_parquet(named_variant(plain, world, tokenizer), snakemake.output.named)


run_step(snakemake, main)
