import pandas as pd
import torch

from mlmia.core.io import write_text
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.defences.audit import one_run_audits, one_run_markdown, read_train_info
from mlmia.memorization.canaries import secret_scores
from mlmia.models.loading import load_mlm

log = get_logger("dp_one_run")


def main(snakemake):
    params = snakemake.params
    torch.set_num_threads(max(1, int(snakemake.threads)))
    canaries = pd.read_parquet(snakemake.input.canaries)
    scores, infos = {}, {}
    for target, model_dir in params.targets.items():
        model, tokenizer = load_mlm(model_dir, params.device)
        scores[target] = secret_scores(model, tokenizer, canaries, params.template, params.digits)
        infos[target] = read_train_info(model_dir)
    table = one_run_audits(scores, canaries["included"].to_numpy(), infos, params.guess_share, params.confidence)
    for row in table.itertuples(index=False):
        log.info("%s: %d of %d guesses correct, eps >= %.3f", row.target, row.correct, row.guesses, row.epsilon_lb)
    write_text(table.to_csv(index=False), snakemake.output.csv)
    write_text(one_run_markdown(table, params.template, params.digits), snakemake.output.markdown)


run_step(snakemake, main)
