from mlmia.runner import run_step
from mlmia.train import tokenizer_from_tables


def main(snakemake):
    settings = dict(snakemake.params.tokenizer or {})
    tokenizer_from_tables(
        list(snakemake.input),
        snakemake.output[0],
        vocab_size=int(settings.get("vocab_size", 3000)),
        min_frequency=int(settings.get("min_frequency", 2)),
    )


run_step(snakemake, main)
