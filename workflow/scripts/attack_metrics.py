import pandas as pd

from mlmia.io import write_parquet
from mlmia.metrics import MetricSettings, attack_metrics
from mlmia.runner import run_step


def main(snakemake):
    table = pd.read_parquet(snakemake.input[0])
    settings = MetricSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in snakemake.params.settings.items()})
    where = f"experiment {snakemake.wildcards.experiment!r}"
    write_parquet(attack_metrics(table, settings, where), snakemake.output[0])


run_step(snakemake, main)
