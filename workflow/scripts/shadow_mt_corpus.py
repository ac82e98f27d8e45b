from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.world.parallel import build_parallel_corpus


def main(snakemake):
    params = snakemake.params
    write_parquet(build_parallel_corpus(params.corpus, params.seed), snakemake.output[0])


run_step(snakemake, main)
