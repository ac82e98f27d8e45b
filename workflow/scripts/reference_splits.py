from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.data.splits import reference_splits, with_aliases


def main(snakemake):
    params = snakemake.params
    splits, texts = reference_splits(
        read_table(snakemake.input.pool), read_table(snakemake.input.samples), params.names, params.seed, params.online
    )
    write_parquet(with_aliases(splits, params.aliases), snakemake.output.splits)
    for name, path in zip(params.names, snakemake.output.texts):
        write_parquet(texts[name], path)


run_step(snakemake, main)
