from mlmia.core.runner import run_step
from mlmia.world.corpus import write_world


def main(snakemake):
    # the world built again in memory (seconds); only its PHI table is written
    write_world(dict(snakemake.params.corpus), {"phi": snakemake.output[0]})


run_step(snakemake, main)
