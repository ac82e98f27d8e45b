from pathlib import Path

import pandas as pd

from mlmia.core.io import atomic_path
from mlmia.core.provenance import file_digest
from mlmia.core.runner import run_step
from mlmia.memorization.vocabulary_check import public_check, vocabulary_check
from mlmia.models.tokenizer import VocabularyReader


def tokenizer_digest(saved, source) -> str:
    """The tokenizer named by its files' content (its tokenizer.json, else its vocab.txt), or a hub id."""
    if not saved:
        return f"{source} (hub)"
    path = Path(saved)
    for name in ("tokenizer.json", "vocab.txt"):
        if (path / name).is_file():
            return f"sha256:{file_digest(path / name)}"
    return f"sha256:{file_digest(path)}"


def main(snakemake):
    source = snakemake.params.tokenizer
    tokenizer = tokenizer_digest(snakemake.input.get("tokenizer"), source)
    if snakemake.params.public:  # models.<name>.public_tokenizer: nothing learnt from the notes, nothing counted
        rows = public_check(snakemake.wildcards.model, tokenizer)
    else:
        settings = snakemake.params.settings
        rows = vocabulary_check(
            pd.read_parquet(snakemake.input.identifiers), VocabularyReader(source), snakemake.wildcards.model,
            tokenizer, settings["kinds"], settings["bootstrap"], settings["seed"],
        )  # fmt: skip
    with atomic_path(snakemake.output[0]) as tmp:
        rows.to_csv(tmp, index=False)


run_step(snakemake, main)
