import os

from mlmia.core.runner import run_step
from mlmia.data.raw import insert_names, mimic_noteevents, read_names, sample_patients, write_processed


def main(snakemake):
    params = snakemake.params
    notes = mimic_noteevents(snakemake.input.noteevents, list(snakemake.input.member_lists), params.categories)
    chosen = sample_patients(notes, params.patients, params.seed, key="raw.mimic.patients")
    directory = os.path.dirname(snakemake.output[0])
    write_processed(chosen, directory, "mimic")
    if snakemake.input.get("names"):
        # Base-b's members as it saw them: the patient's name before each sentence
        names = read_names(snakemake.input.names)
        write_processed(insert_names(chosen, names, key="raw.mimic.names"), directory, "mimic_named")


run_step(snakemake, main)
