from mlmia.core.errors import naming_keys
from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.data.splits import reference_splits, with_aliases


def main(snakemake):
    params, pool = snakemake.params, str(snakemake.input.pool)
    with naming_keys({pool: "references.pool"}):  # a table of the user's (or the world's corpus)
        splits, texts = reference_splits(
            read_table(pool),
            read_table(snakemake.input.samples),
            params.names,
            params.seed,
            params.online,
            pool_where=pool,
        )
    write_parquet(with_aliases(splits, params.aliases), snakemake.output.splits)
    for name, path in zip(params.names, snakemake.output.texts):
        write_parquet(texts[name], path)


run_step(snakemake, main)
