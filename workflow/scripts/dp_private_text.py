from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.world.dp_corpus import dp_private_text


def main(snakemake):
    # the target's lines plus dp_corpus.patients more patients of their own stream (mlmia.world.dp_corpus)
    target, world = read_table(snakemake.input.target), read_table(snakemake.input.world)
    text = dp_private_text(target, world, dict(snakemake.params.corpus), dict(snakemake.params.dp_corpus))
    write_parquet(text, snakemake.output[0])


run_step(snakemake, main)
