from mlmia.core.io import write_parquet
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.memorization.canaries import draw_canaries, draw_candidates, secret_positions
from mlmia.models.loading import load_tokenizer

log = get_logger("canaries_secrets")


def main(snakemake):
    settings = snakemake.params.settings
    template, digits, seed = settings["template"], settings["digits"], settings["seed"]
    canaries = draw_canaries(
        template,
        digits,
        settings["repetitions"],
        settings["per_repetition"],
        settings["never_inserted"],
        settings["population"],
        seed,
    )
    candidates = draw_candidates(template, digits, settings["candidates"], canaries["secret"], seed)
    # every digit one token of the world's tokenizer, or a one-line refusal naming the template
    tokenizer = load_tokenizer(snakemake.input.tokenizer)
    secret_positions(tokenizer, canaries["text"], template, digits, canaries["canary_id"])
    secret_positions(tokenizer, candidates["text"], template, digits, candidates["candidate_id"])
    log.info(
        "%d canaries (%d inserted), %d candidates, %d-digit secrets: each digit one token",
        len(canaries),
        int((canaries["role"] == "member").sum()),
        len(candidates),
        digits,
    )
    write_parquet(canaries, snakemake.output.canaries)
    write_parquet(candidates, snakemake.output.candidates)


run_step(snakemake, main)
