from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.data.importing import files_from_config, import_model_scores, score_sets_from_config


def main(snakemake):
    dataset, model = snakemake.params.dataset, snakemake.wildcards.model
    scores = import_model_scores(
        score_sets_from_config(dataset),
        files_from_config(dataset, snakemake.params.root, model),
        model=model,
        energy_kind=snakemake.wildcards.energy,
        patterns=dataset.get("patterns"),  # optional: no default
    )
    write_parquet(scores, snakemake.output[0])


run_step(snakemake, main)
