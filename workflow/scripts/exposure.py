from mlmia.core.io import read_table, write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.exposed_samples import (
    cls_embeddings,
    exposed_labels,
    exposure_metrics,
    simple_features,
    token_frequencies,
    training_texts,
)
from mlmia.models.loading import load_mlm


def main(snakemake):
    settings = snakemake.params.settings
    members = exposed_labels(read_table(snakemake.input.attack), settings["alpha"], settings["attack"])
    texts = read_table(snakemake.input.samples).set_index("sample_id").loc[members["sample_id"], "text"]
    model, tokenizer = load_mlm(snakemake.params.embedding_model, snakemake.resources.device)
    training = training_texts(read_table(snakemake.input.training_text), snakemake.input.training_text)
    features = simple_features(texts.reset_index(drop=True), tokenizer, token_frequencies(tokenizer, training))
    cls = cls_embeddings(model, tokenizer, texts)
    metrics = exposure_metrics(
        members, features, cls, settings["alpha"], test_size=settings["test_size"], seed=settings["seed"]
    )
    write_parquet(metrics, snakemake.output[0])


run_step(snakemake, main)
