from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.data.datasets import assign_lengths, check_requirements, read_dataset
from mlmia.models.loading import load_tokenizer


def main(snakemake):
    params = snakemake.params
    manifest = assign_lengths(read_dataset(params.spec, key=params.key), load_tokenizer(params.tokenizer))
    check_requirements(manifest, params.requirements, params.key)
    write_parquet(manifest, snakemake.output[0])


run_step(snakemake, main)
