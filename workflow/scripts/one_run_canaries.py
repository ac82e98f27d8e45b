from mlmia.core.io import read_table, require_columns, write_parquet
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.memorization.canaries import draw_one_run_canaries, secret_positions, with_included_canaries
from mlmia.models.loading import load_tokenizer

log = get_logger("one_run_canaries")


def main(snakemake):
    params = snakemake.params
    canaries = draw_one_run_canaries(params.template, params.digits, params.canaries, params.seed)
    # every digit one token of the world's tokenizer, or a one-line refusal naming the template
    secret_positions(load_tokenizer(snakemake.input.tokenizer), canaries["text"], params.template, params.digits,
                     canaries["canary_id"])  # fmt: skip
    text = read_table(snakemake.input.text)
    require_columns(text, ["sample_id", "group_id", "text"], str(snakemake.input.text))
    log.info("%d one-run canaries, %d added once each to %d training lines", len(canaries),
             int(canaries["included"].sum()), len(text))  # fmt: skip
    write_parquet(canaries, snakemake.output.canaries)
    write_parquet(with_included_canaries(text, canaries), snakemake.output.text)


run_step(snakemake, main)
