from mlmia.exposure import (
    cls_embeddings,
    exposed_labels,
    exposure_metrics,
    simple_features,
    token_frequencies,
    training_texts,
)
from mlmia.io import read_table, write_parquet
from mlmia.models import load_mlm
from mlmia.runner import run_step


def main(snakemake):
    settings, alpha = snakemake.params.settings, snakemake.params.alpha
    members = exposed_labels(read_table(snakemake.input.attack), alpha)
    texts = read_table(snakemake.input.samples).set_index("sample_id").loc[members["sample_id"], "text"]
    model, tokenizer = load_mlm(snakemake.params.embedding_model, settings.get("device", "auto"))
    training = training_texts(read_table(snakemake.input.training_text), snakemake.input.training_text)
    features = simple_features(texts.reset_index(drop=True), tokenizer, token_frequencies(tokenizer, training))
    cls = cls_embeddings(model, tokenizer, texts)
    metrics = exposure_metrics(
        members, features, cls, alpha, test_size=settings.get("test_size", 0.3), seed=settings.get("seed", 0)
    )
    write_parquet(metrics, snakemake.output[0])


run_step(snakemake, main)
