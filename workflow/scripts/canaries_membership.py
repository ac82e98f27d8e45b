import pandas as pd

from mlmia.attacks.protocols import MetricSettings
from mlmia.core.io import write_parquet, write_text
from mlmia.core.runner import run_step
from mlmia.memorization.canary_membership import membership_markdown, membership_metrics, membership_table


def main(snakemake):
    inputs, params, out = snakemake.input, snakemake.params, snakemake.output
    scores = pd.read_parquet(inputs.scores)
    table = membership_table(
        pd.read_parquet(inputs.canaries),
        scores[scores["role"] == "target"],
        scores[scores["role"] == "reference"],
    )
    metrics = membership_metrics(table, MetricSettings.from_params(dict(params.metrics)))
    write_parquet(table, out.attack)
    write_text(metrics.to_csv(index=False), out.csv)
    markdown = membership_markdown(
        metrics,
        pd.read_parquet(inputs.exposure),
        epoch=params.epoch,
        reference=params.reference,
        energy=params.energy,
        alpha=params.metrics["alphas"][0],
    )
    write_text(markdown, out.markdown)


run_step(snakemake, main)
