import pandas as pd

from mlmia.attacks.table import build_attack_table, group_score_inputs
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.terms.manifest import NEIGHBOUR_OF


def main(snakemake):
    experiment, columns = snakemake.params.experiment, snakemake.params.columns
    scores = group_score_inputs({key: path for key, path in snakemake.input.items() if "__" in key})
    splits = snakemake.input.get("splits")
    neighbours = snakemake.input.get("neighbour_samples")
    table = build_attack_table(
        pd.read_parquet(snakemake.input.samples),
        scores,
        snakemake.params.models,
        columns,
        energy=experiment.energy,
        splits=pd.read_parquet(splits) if splits else None,
        neighbours=pd.read_parquet(neighbours, columns=["sample_id", NEIGHBOUR_OF]) if neighbours else None,
        subsample=snakemake.params.subsample,
        settings=snakemake.params.settings,
        where=f"experiment {experiment.name!r}",
        **experiment.selection(),
    )
    write_parquet(table, snakemake.output[0])


run_step(snakemake, main)
