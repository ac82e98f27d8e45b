from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.world.corpus import write_world


def main(snakemake):
    if snakemake.params.phi:  # the user's spans or values (bring your own), read and kept as they are
        write_parquet(read_table(snakemake.params.phi).astype(str), snakemake.output[0])
    else:  # the world built again in memory (seconds); only its PHI table is written
        write_world(dict(snakemake.params.corpus), {"phi": snakemake.output[0]})


run_step(snakemake, main)
