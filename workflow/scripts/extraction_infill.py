import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.extraction import infill, named_spans
from mlmia.models.loading import load_mlm


def main(snakemake):
    params = snakemake.params
    samples = pd.read_parquet(snakemake.input.samples, columns=["sample_id", "group_id", "text"])
    with naming_keys({params.settings.get("phi"): "extraction.phi"}):
        spans = named_spans(samples, pd.read_parquet(snakemake.input.values), where=params.where)
    model, tokenizer = load_mlm(params.model, snakemake.resources.device, tokenizer=params.tokenizer)
    results = infill(
        model, tokenizer, samples, spans, top_k=params.settings["top_k"], batch_size=params.settings["batch_size"]
    )
    write_parquet(results, snakemake.output[0])


run_step(snakemake, main)
