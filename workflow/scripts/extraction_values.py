import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.extraction import named_spans, phi_table


def main(snakemake):
    phi = snakemake.params.phi
    with naming_keys({phi: "extraction.phi"}):
        # the user's spans or values (bring your own), kept as they are, or the world's PHI built again in memory
        table = phi_table(phi, snakemake.params.corpus)
        if phi:  # checked against the samples: the first job that reads them, before any model is read
            samples = pd.read_parquet(snakemake.input.samples, columns=["sample_id", "group_id", "text"])
            named_spans(samples, table, where=phi)
    write_parquet(table, snakemake.output[0])


run_step(snakemake, main)
