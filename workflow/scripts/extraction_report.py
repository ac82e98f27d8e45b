import pandas as pd

from mlmia.core.runner import run_step
from mlmia.memorization.extraction_report import write_extraction_report


def main(snakemake):
    write_extraction_report(
        pd.read_parquet(snakemake.input.samples, columns=["group_id", "role", "source"]),
        {name: pd.read_parquet(path) for name, path in zip(snakemake.params.models, snakemake.input.infilled)},
        snakemake.params.settings,
        dict(snakemake.output.items()),
        snakemake.params.style,
    )


run_step(snakemake, main)
