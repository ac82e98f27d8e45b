import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.extraction import named_spans, phi_form
from mlmia.world.corpus import write_world


def main(snakemake):
    phi = snakemake.params.phi
    if phi:  # the user's spans or values (bring your own): checked against the samples (the first job that
        # reads them, before any model is read), kept as they are
        with naming_keys({phi: "extraction.phi"}):
            table = read_table(phi).astype(str)
            phi_form(table, phi)
            samples = pd.read_parquet(snakemake.input.samples, columns=["sample_id", "group_id", "text"])
            named_spans(samples, table, where=phi)
        write_parquet(table, snakemake.output[0])
    else:  # the world built again in memory (seconds); only its PHI table is written
        write_world(dict(snakemake.params.corpus), {"phi": snakemake.output[0]})


run_step(snakemake, main)
