from mlmia.datasets import assign_lengths, read_dataset
from mlmia.io import write_parquet
from mlmia.runner import run_step
from mlmia.models import load_tokenizer


def main(snakemake):
    params = snakemake.params
    manifest = read_dataset(params.spec, key=params.key)
    write_parquet(assign_lengths(manifest, load_tokenizer(params.tokenizer)), snakemake.output[0])


run_step(snakemake, main)
