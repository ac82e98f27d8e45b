from mlmia.core.runner import run_step
from mlmia.training_job import train_from_table


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    train_from_table(
        inputs.text,
        inputs.tokenizer,
        snakemake.output[0],
        config=dict(params.model),
        init_dir=inputs.get("init", None) or None,
        threads=snakemake.threads,
        device=snakemake.resources.device,
        name=params.name,
    )


run_step(snakemake, main)
