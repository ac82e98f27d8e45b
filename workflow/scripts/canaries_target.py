from mlmia.core.io import read_table, require_columns
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.memorization.canaries import insertion_texts, training_settings
from mlmia.training_job import train_model

log = get_logger("canaries_target")


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    text = read_table(inputs.text)
    require_columns(text, ["text"], str(inputs.text))
    inserted = insertion_texts(read_table(inputs.canaries))
    settings = training_settings(params.model, params.shape, params.epochs)
    log.info("canary target: %d training lines and %d canary insertions", len(text), len(inserted))
    train_model(
        text["text"].astype(str).tolist() + inserted,
        inputs.tokenizer,
        snakemake.output[0],
        config=settings,
        threads=snakemake.threads,
        device=snakemake.resources.device,
        name="canary_target",
        save_epochs=params.epochs,
    )


run_step(snakemake, main)
