import os

from mlmia.core.runner import run_step
from mlmia.data.raw import i2b2_xml, sample_patients, write_processed


def main(snakemake):
    params = snakemake.params
    chosen = sample_patients(i2b2_xml(snakemake.input.xml), params.patients, params.seed, key="raw.i2b2.patients")
    write_processed(chosen, os.path.dirname(snakemake.output[0]), "i2b2")


run_step(snakemake, main)
