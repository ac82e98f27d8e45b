from mlmia.core.io import read_table, require_columns, write_parquet
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.defences.token_canaries import canary_tokenizer, draw_token_canaries, with_included_canaries
from mlmia.models.loading import load_tokenizer

log = get_logger("one_run_canaries")


def main(snakemake):
    params = snakemake.params
    settings = params.canaries
    canaries = draw_token_canaries(
        params.template, settings["count"], settings["length"], settings["seed"], settings["repeat"]
    )
    # every canary's new tokens join the DP targets' tokenizer, one token each (or a one-line refusal)
    tokenizer = canary_tokenizer(load_tokenizer(snakemake.input.tokenizer), canaries)
    text = read_table(snakemake.input.text)
    require_columns(text, ["sample_id", "group_id", "text"], str(snakemake.input.text))
    log.info("%d one-run canaries of %d new tokens each, written %d times, %d added once each to %d training lines",
             len(canaries), settings["length"], settings["repeat"], int(canaries["included"].sum()), len(text))  # fmt: skip
    write_parquet(canaries, snakemake.output.canaries)
    write_parquet(with_included_canaries(text, canaries), snakemake.output.text)
    tokenizer.save_pretrained(snakemake.output.tokenizer)


run_step(snakemake, main)
