from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.world.registers.wikipedia import wikipedia_register


def main(snakemake):
    write_parquet(wikipedia_register(snakemake.params.seed), snakemake.output[0])


run_step(snakemake, main)
