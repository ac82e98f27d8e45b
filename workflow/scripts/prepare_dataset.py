from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.data.datasets import assign_lengths, check_requirements, read_dataset


def main(snakemake):
    params = snakemake.params
    notes = read_dataset(params.spec, key=params.key)
    # torch and transformers load after the files are read and checked: a bad file fails in a second
    from mlmia.models.loading import load_tokenizer

    manifest = assign_lengths(notes, load_tokenizer(params.tokenizer))
    check_requirements(manifest, params.requirements, params.key)
    write_parquet(manifest, snakemake.output[0])


run_step(snakemake, main)
