import pandas as pd

from mlmia.attacks.protocols import MetricSettings, attack_metrics, sample_universe
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step


def main(snakemake):
    metrics = attack_metrics(
        pd.read_parquet(snakemake.input.attack),
        MetricSettings.from_params(snakemake.params.settings),
        where=f"experiment {snakemake.wildcards.experiment!r}",
        universe=sample_universe(pd.read_parquet(snakemake.input.samples, columns=["role", "source", "group_id"])),
    )
    write_parquet(metrics, snakemake.output[0])


run_step(snakemake, main)
