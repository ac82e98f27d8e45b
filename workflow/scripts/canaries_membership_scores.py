from pathlib import Path

import pandas as pd

from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.models.loading import load_mlm
from mlmia.scoring.energy import score_samples
from mlmia.scoring.settings import ScoringSettings


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    settings = ScoringSettings.from_params(params.scoring, snakemake.resources)
    canaries = pd.read_parquet(inputs.canaries)
    samples = canaries[["canary_id", "text"]].rename(columns={"canary_id": "sample_id"})
    models = {
        "target": (Path(inputs.target) / f"epoch_{params.epoch}", None),
        "reference": (params.reference, params.reference_tokenizer),
    }
    frames = []
    for role, (where, tokenizer_path) in models.items():
        model, tokenizer = load_mlm(where, settings.device, tokenizer=tokenizer_path)
        scores = score_samples(
            model,
            tokenizer,
            samples,
            energy=params.energy,
            model_name=role,
            num_threads=snakemake.threads,
            **settings.score_arguments(),
        )
        frames.append(scores.assign(role=role))
    write_parquet(pd.concat(frames, ignore_index=True), snakemake.output[0])


run_step(snakemake, main)
