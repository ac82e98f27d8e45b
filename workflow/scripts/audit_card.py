from mlmia.core.runner import run_step
from mlmia.report.cards import write_card


def main(snakemake):
    write_card(
        snakemake.params.card,
        {key: str(path) for key, path in snakemake.input.items()},
        {"card": snakemake.output.card, "numbers": snakemake.output.numbers, "roc": snakemake.output.roc},
        snakemake.params.config_digest,
        snakemake.params.code,
    )


run_step(snakemake, main)
