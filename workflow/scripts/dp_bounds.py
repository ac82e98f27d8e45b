import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.defences.audit import bounds_markdown, read_train_info, run_audit
from mlmia.metrics.protocols import sample_universe


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    targets = list(params.plan)
    attack = dict(zip(targets, (pd.read_parquet(p) for p in inputs.attack)))
    metrics = dict(zip(targets, (pd.read_parquet(p) for p in inputs.metrics)))
    universes = {}
    for target, path in zip(targets, inputs.samples):
        universes[target] = sample_universe(pd.read_parquet(path, columns=["role", "source", "group_id"]))
    infos = {target: read_train_info(item["model_dir"]) for target, item in params.plan.items()}
    settings = {
        **params.settings,
        "bootstrap": params.bootstrap["bootstrap"],
        "bootstrap_seed": params.bootstrap["seed"],
    }
    summary, bounds = run_audit(params.plan, attack, metrics, infos, universes, settings, log=get_logger("dp_bounds"))
    write_text(summary.to_csv(index=False), snakemake.output.bounds_csv)
    write_text(bounds.to_csv(index=False), snakemake.output.by_attack)
    write_text(bounds_markdown(summary, settings["fpr"], settings["confidence"]), snakemake.output.bounds_md)


run_step(snakemake, main)
