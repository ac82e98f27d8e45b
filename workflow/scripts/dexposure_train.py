from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.dexposure import train_and_measure
from mlmia.memorization.overfitting import subset_training
from mlmia.models.loading import load_tokenizer


def main(snakemake):
    params, wildcards = snakemake.params, snakemake.wildcards
    settings = params.settings
    notes = read_table(snakemake.input.notes)
    chosen = read_table(snakemake.input.chosen)
    entities = dict(zip(chosen["class"], chosen["word"]))
    if settings["fraction"] < 1:
        notes = subset_training(notes, settings["fraction"], entities)
    runs = train_and_measure(
        notes,
        entities,
        load_tokenizer(snakemake.input.tokenizer),
        phrase=params.phrase,
        repetitions=int(wildcards.repetitions),
        seed=int(wildcards.seed),
        model_settings=settings["model"],
        training=settings["training"],
        checkpoints=settings["checkpoints"],
        lr_decay=settings["lr_decay"],
        dropout=settings["dropout"],
        setting=wildcards.setting,
        device=snakemake.resources.device,
        threads=snakemake.threads,
        record_dir=snakemake.output.record,
    )
    write_parquet(runs, snakemake.output.runs)


run_step(snakemake, main)
