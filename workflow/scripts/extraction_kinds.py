import pandas as pd

from mlmia.core.runner import run_step
from mlmia.memorization.extraction_kinds import write_extraction_kinds


def main(snakemake):
    settings = snakemake.params.settings
    write_extraction_kinds(
        pd.read_csv(snakemake.input.differences),
        {name: pd.read_csv(path) for name, path in zip(settings["experiments"], snakemake.input.token_kinds)},
        settings["target"],
        int(settings["top_k"]),
        dict(snakemake.output.items()),
    )


run_step(snakemake, main)
