import os

from mlmia.core.errors import naming_keys
from mlmia.core.runner import run_step
from mlmia.data.raw import insert_names, mimic_noteevents, read_names, sample_patients, write_processed


def main(snakemake):
    params, inputs = snakemake.params, snakemake.input
    lists = list(inputs.member_lists)
    keys = {inputs.noteevents: "raw.mimic.noteevents", inputs.get("names") or "": "raw.mimic.names"}
    keys |= {path: f"raw.mimic.member_lists[{i}]" for i, path in enumerate(lists)}
    with naming_keys(keys):  # the user's files, by the config key that names each
        names = read_names(inputs.names) if inputs.get("names") else None  # the small file first
        notes = mimic_noteevents(inputs.noteevents, lists, params.categories)
        chosen = sample_patients(notes, params.patients, params.seed, key="raw.mimic.patients")
        # Base-b's members as it saw them: the patient's name before each sentence (every
        # patient's name checked before anything is written)
        named = None if names is None else insert_names(chosen, names, key="raw.mimic.names")
        directory = os.path.dirname(snakemake.output[0])
        write_processed(chosen, directory, "mimic")
        if named is not None:
            write_processed(named, directory, "mimic_named")


run_step(snakemake, main)
