from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.data.importing import files_from_config, import_manifest, score_sets_from_config


def main(snakemake):
    dataset, root = snakemake.params.dataset, snakemake.params.root
    files = {model: files_from_config(dataset, root, model) for model in dataset["models"]}
    manifest = import_manifest(score_sets_from_config(dataset), files, dataset.get("length"))
    write_parquet(manifest, snakemake.output[0])


run_step(snakemake, main)
