from mlmia.core.io import read_table
from mlmia.core.runner import run_step
from mlmia.models.tokenizer import train_tokenizer


def main(snakemake):
    settings = snakemake.params.tokenizer
    notes = read_table(snakemake.input.notes)
    train_tokenizer(
        [" ".join(words) for words in notes["words"]],
        snakemake.output[0],
        vocab_size=settings["vocab_size"],
        min_frequency=settings["min_frequency"],
        min_patients=None,  # every word: the tagger's notes name no patients
        model_max_length=snakemake.params.max_length,
    )


run_step(snakemake, main)
