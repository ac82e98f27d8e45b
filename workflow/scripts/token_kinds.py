import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import sample_universe
from mlmia.core.io import write_parquet, write_text
from mlmia.core.runner import run_step
from mlmia.memorization.token_kinds import experiment_token_kinds
from mlmia.models.loading import load_tokenizer


def main(snakemake):
    settings = snakemake.params.settings
    samples = pd.read_parquet(snakemake.input.samples)
    spans = snakemake.input.get("spans")  # none where the extraction study does not run: every slot is other
    slots, summary = experiment_token_kinds(
        pd.read_parquet(snakemake.input.attack),
        samples,
        load_tokenizer(settings["tokenizer"]),
        {name: get_attack(name, params) for name, params in settings["attacks"].items()},
        pd.read_parquet(spans) if spans else None,
        settings,
        universe=sample_universe(samples),
    )
    write_parquet(slots, snakemake.output.tokens)
    write_text(summary.to_csv(index=False), snakemake.output.kinds)


run_step(snakemake, main)
