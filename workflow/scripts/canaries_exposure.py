from pathlib import Path

import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.memorization.canaries import checkpoint_exposures
from mlmia.models.loading import load_mlm

log = get_logger("canaries_exposure")


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    canaries, candidates = pd.read_parquet(inputs.canaries), pd.read_parquet(inputs.candidates)
    frames = []
    for epoch in params.epochs:
        model, tokenizer = load_mlm(Path(inputs.target) / f"epoch_{epoch}", snakemake.resources.device)
        exposures = checkpoint_exposures(
            model,
            tokenizer,
            canaries,
            candidates,
            params.template,
            params.digits,
            seed=params.seed,
            num_threads=snakemake.threads,
        )
        frames.append(exposures.assign(epoch=int(epoch)))
        log.info(
            "epoch %d: mean exact exposure %.2f of inserted canaries, %.2f of never inserted (maximum %.2f)",
            epoch,
            exposures.loc[exposures["repetitions"] > 0, "exact_exposure"].mean(),
            exposures.loc[exposures["repetitions"] == 0, "exact_exposure"].mean(),
            exposures["log2_space"].iloc[0],
        )
    write_parquet(pd.concat(frames, ignore_index=True), snakemake.output[0])


run_step(snakemake, main)
