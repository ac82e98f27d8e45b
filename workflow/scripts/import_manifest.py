from mlmia.importing import files_from_config, import_manifest, score_sets_from_config
from mlmia.io import write_parquet
from mlmia.runner import run_step


def main(snakemake):
    dataset, root = snakemake.params.dataset, snakemake.params.root
    files = {model: files_from_config(dataset, root, model) for model in dataset["models"]}
    manifest = import_manifest(score_sets_from_config(dataset), files, dataset.get("length"))
    write_parquet(manifest, snakemake.output[0])


run_step(snakemake, main)
