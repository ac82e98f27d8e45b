import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.extraction import phi_table
from mlmia.memorization.token_kinds import phi_spans


def main(snakemake):
    settings = snakemake.params.settings
    samples = pd.read_parquet(snakemake.input.samples, columns=["sample_id", "group_id", "text"])
    with naming_keys({settings["phi"]: "extraction.phi"}):
        spans = phi_spans(samples, phi_table(settings["phi"], settings["corpus"]), settings["where"])
    write_parquet(spans, snakemake.output[0])


run_step(snakemake, main)
