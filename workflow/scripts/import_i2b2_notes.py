import os

from mlmia.core.errors import naming_keys
from mlmia.core.runner import run_step
from mlmia.data.raw import i2b2_xml, sample_patients, write_processed


def main(snakemake):
    params = snakemake.params
    with naming_keys({snakemake.input.xml: "raw.i2b2.xml"}):  # the user's XML, by its config key
        notes = i2b2_xml(snakemake.input.xml)
    chosen = sample_patients(notes, params.patients, params.seed, key="raw.i2b2.patients")
    write_processed(chosen, os.path.dirname(snakemake.output[0]), "i2b2")


run_step(snakemake, main)
