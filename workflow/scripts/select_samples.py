import pandas as pd

from mlmia.io import write_parquet
from mlmia.runner import run_step
from mlmia.samples import named_variant, select_samples
from mlmia.train import load_tokenizer


def main(snakemake):
    settings = snakemake.params.samples
    world = pd.read_parquet(snakemake.input.world)
    tokenizer = load_tokenizer(snakemake.input.tokenizer)
    plain = select_samples(world, tokenizer, settings["counts"], settings["lengths"], settings.get("seed", 0))
    write_parquet(plain, snakemake.output.plain)
    write_parquet(named_variant(plain, world, tokenizer), snakemake.output.named)


run_step(snakemake, main)
