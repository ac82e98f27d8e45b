import pandas as pd

from mlmia.attacks.protocols import roc_points
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step


def main(snakemake):
    params = snakemake.params
    table = pd.read_parquet(snakemake.input[0])
    write_parquet(
        roc_points(table, params.attacks, params.level, attack_params=params.attack_params), snakemake.output[0]
    )


run_step(snakemake, main)
