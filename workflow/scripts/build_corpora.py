from mlmia.core.runner import run_step
from mlmia.world.corpus import write_world


def main(snakemake):
    # outputs by name: samples, target, target_named, domain, general (Parquet)
    write_world(dict(snakemake.params.corpus), dict(snakemake.output.items()))


run_step(snakemake, main)
