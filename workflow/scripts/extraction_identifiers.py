import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.vocabulary_check import user_values
from mlmia.world.corpus import build_world
from mlmia.world.patient_phi import identifying_values


def main(snakemake):
    phi = snakemake.params.phi
    if phi:  # the user's PHI table, each patient's role from the samples
        with naming_keys({phi: "extraction.phi"}):
            samples = pd.read_parquet(
                snakemake.input.samples, columns=["sample_id", "group_id", "text", "role", "source"]
            )
            values = user_values(samples, read_table(phi).astype(str), where=phi)
    else:  # the world built again in memory (seconds): its patients' names, physicians and states
        world = build_world(dict(snakemake.params.corpus))
        values = identifying_values(world["samples"], world["phi"])
    write_parquet(values, snakemake.output[0])


run_step(snakemake, main)
