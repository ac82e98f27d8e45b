from mlmia.core.runner import run_step
from mlmia.models.tokenizer import tokenizer_from_tables


def main(snakemake):
    settings = snakemake.params.tokenizer
    tokenizer_from_tables(
        list(snakemake.input),
        snakemake.output[0],
        vocab_size=settings["vocab_size"],
        min_frequency=settings["min_frequency"],
        min_patients=settings["min_patients"],
    )


run_step(snakemake, main)
