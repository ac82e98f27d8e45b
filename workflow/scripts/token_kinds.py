import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import sample_universe
from mlmia.core.errors import naming_keys
from mlmia.core.io import write_parquet, write_text
from mlmia.core.runner import run_step
from mlmia.memorization.extraction import phi_table
from mlmia.memorization.token_kinds import experiment_token_kinds
from mlmia.models.loading import load_tokenizer


def main(snakemake):
    settings = snakemake.params.settings
    samples = pd.read_parquet(snakemake.input.samples)
    with naming_keys({settings["phi"]: "extraction.phi"}):
        # the extraction study's PHI (the user's table, or the world's built again); none where it does not run
        phi = phi_table(settings["phi"], settings["corpus"]) if settings["where"] else None
        slots, summary = experiment_token_kinds(
            pd.read_parquet(snakemake.input.attack),
            samples,
            load_tokenizer(settings["tokenizer"]),
            {name: get_attack(name, params) for name, params in settings["attacks"].items()},
            phi,
            settings,
            universe=sample_universe(samples),
        )
    write_parquet(slots, snakemake.output.tokens)
    write_text(summary.to_csv(index=False), snakemake.output.kinds)


run_step(snakemake, main)
