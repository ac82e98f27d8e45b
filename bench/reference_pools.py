"""What cheaper reference pools give LiRA and RMIA (issue 26, item 3): each pool's AUC and TPR
at 1% FPR per attack that reads the pool, with the paired difference to a baseline pool, and
what the pool cost to train and score.

A pool is a run of the workflow with its own `references:` entry (a results folder of its own,
the baseline's world, samples, target and reference copied in, then the pool's scores made:
`snakemake results/<run>/scores/clinical/pool_ref_<i>.masked.parquet`); the attacks' table is
built here from the target's and the pool's scores and the pool's splits, as the zoo's attack
table builds those columns (`mlmia.attacks.table.build_attack_table`), and its metrics as the
zoo's (`mlmia.attacks.protocols.attack_metrics`, the experiment's settings). Its cost is the CPU
time in its `benchmarks/` files of the pool's trainings and scoring jobs.

A smaller pool is trained as such (`references.count`): the first M references of a larger pool
are no pool of M, since its splits put each patient in half of the whole pool, so that among M
of them a sample can have no IN or no OUT reference. Every pool is scored on the
same patient-bootstrap replicates (the metrics draw on the sample table's patients, not on the
pool), so a difference per replicate is a paired bootstrap of the difference
(`mlmia.report.findings`).

    .venv/bin/python bench/reference_pools.py --baseline results/default \\
        --pool '8, 15 epochs from scratch=results/pool_ep15' --out docs/reference_pools.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import MetricSettings, attack_metrics, sample_universe
from mlmia.attacks.table import build_attack_table
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.markdown import markdown_table
from mlmia.study.study import Study
from mlmia.terms.schema import load_yaml

REPO = Path(__file__).resolve().parent.parent
#: the zoo's experiments, by target (each target reads the pool of its training objective)
TARGETS = {
    "Base": ("zoo_long_mimic", "zoo_long_i2b2", "zoo_short_mimic", "zoo_short_i2b2"),
    "base_mdlm": ("zoo_mdlm_long_mimic", "zoo_mdlm_long_i2b2", "zoo_mdlm_short_mimic", "zoo_mdlm_short_i2b2"),
}
METRICS = (("auc", None), ("tpr_at_fpr", 0.01))
POOL_PREFIX = "pool_ref_"


def pool_attacks(study: Study, experiment: str) -> list[str]:
    """The experiment's attacks that read the reference pool."""
    names = study.metric_settings(experiment)["attacks"]
    return [name for name in names if "references" in get_attack(name, study.attack_params(name)).inputs]


def pool_count(run: Path) -> int:
    """How many references the run's pool has (its splits name them)."""
    splits = pd.read_parquet(run / "references" / "splits.parquet", columns=["reference"])
    return sum(n[len(POOL_PREFIX) :].isdigit() for n in splits["reference"].unique())


def pool_cpu_seconds(run: Path, names: list[str]) -> tuple[float, float]:
    """(training, scoring) CPU seconds of the pool's references in a run's benchmarks."""

    def cpu(paths) -> float:
        return float(sum(pd.read_csv(path, sep="\t")["cpu_time"].iloc[-1] for path in paths))

    train = cpu(run / "benchmarks" / "train" / f"{name}.tsv" for name in names)
    score = cpu(path for name in names for path in (run / "benchmarks" / "score").glob(f"*/{name}.*.tsv"))
    return train, score


def pool_metrics(run: Path, study: Study, experiment: str, attacks: list[str]) -> pd.DataFrame:
    """The experiment's metrics of the attacks that read the pool, with the run's pool."""
    spec = study.experiments[experiment]
    names = study.pools.of(spec)[: pool_count(run)]
    folder = run / "scores" / spec.dataset
    manifest = pd.read_parquet(run / "samples" / f"{spec.dataset}.parquet")
    table = build_attack_table(
        manifest,
        {
            ("target", spec.energy): pd.read_parquet(folder / f"{spec.target}.{spec.energy}.parquet"),
            ("references", spec.energy): [pd.read_parquet(folder / f"{n}.{spec.energy}.parquet") for n in names],
        },
        {"target": spec.target, "references": names},
        {"target": ["energy"], "references": ["energy"]},
        energy=spec.energy,
        splits=pd.read_parquet(run / "references" / "splits.parquet"),
        where=f"{run}: experiment {experiment!r}",
        **spec.selection(),
    )
    settings = study.metric_settings(experiment)
    settings = {**settings, "attacks": attacks, "attack_params": {a: settings["attack_params"][a] for a in attacks}}
    universe = sample_universe(manifest[["role", "source", "group_id"]])
    return attack_metrics(table, MetricSettings.from_params(settings), universe=universe)


def cell(metrics: pd.DataFrame, attack: str, metric: str, fpr: float | None) -> pd.DataFrame:
    chosen = metrics[
        (metrics["attack"] == attack) & (metrics["metric"] == metric) & (metrics["protocol"] == "corrected")
    ]
    if fpr is not None:
        chosen = chosen[np.isclose(chosen["fpr"].astype(float), fpr)]
    return chosen


def compare(pool: pd.DataFrame, baseline: pd.DataFrame, attack: str, metric: str, fpr: float | None) -> dict:
    """The pool's estimate and the paired difference to the baseline's (95% percentile interval)."""
    ours, theirs = cell(pool, attack, metric, fpr), cell(baseline, attack, metric, fpr)
    point = ours[ours["replicate"].isna()].iloc[0]
    base = theirs[theirs["replicate"].isna()].iloc[0]
    paired = (
        ours.dropna(subset=["replicate"]).set_index("replicate")["value"]
        - theirs.dropna(subset=["replicate"]).set_index("replicate")["value"]
    ).dropna()
    low, high = percentile_interval(paired.to_numpy())
    return {
        "value": float(point["value"]),
        "resolvable": bool(point["resolvable"]),
        "difference": float(point["value"]) - float(base["value"]),
        "low": low,
        "high": high,
    }


def has_pool(run: Path, study: Study, experiment: str) -> bool:
    """Whether the run scored every reference of the experiment's pool."""
    spec = study.experiments[experiment]
    names = study.pools.of(spec)[: pool_count(run)]
    return all((run / "scores" / spec.dataset / f"{n}.{spec.energy}.parquet").exists() for n in names)


def pool_rows(name: str, metrics: dict[str, pd.DataFrame], baseline: dict[str, pd.DataFrame], attacks) -> list[dict]:
    return [
        {"pool": name, "experiment": experiment, "attack": attack, "metric": metric, "fpr": fpr}
        | compare(metrics[experiment], baseline[experiment], attack, metric, fpr)
        for experiment in metrics
        for attack in attacks[experiment]
        for metric, fpr in METRICS
    ]


def render(rows: pd.DataFrame, costs: dict[tuple[str, str], str], baseline: str) -> str:
    """Per target and metric, a Markdown table: a row per pool and attack, a column per experiment."""
    out = []
    for target, experiments in TARGETS.items():
        mine = rows[rows["experiment"].isin(experiments)]
        for (metric, fpr), part in mine.groupby(["metric", "fpr"], dropna=False, sort=False):
            label = "AUC" if metric == "auc" else f"TPR at {fpr:.0%} FPR (%)"
            spec = ".3f" if metric == "auc" else ".1f"  # the metrics hold TPR in percent
            body = []
            for (pool, attack), group in part.groupby(["pool", "attack"], sort=False):
                cells = []
                for experiment in experiments:
                    r = group[group["experiment"] == experiment].iloc[0]
                    text = format(r["value"], spec) if r["resolvable"] else "n.r."
                    if r["resolvable"] and pool != baseline and not np.isnan(r["low"]):
                        d, lo, hi = (format(v, "+" + spec) for v in (r["difference"], r["low"], r["high"]))
                        text += f"; Δ {d} [{lo}, {hi}]"
                    cells.append(text)
                body.append([pool, costs[pool, target], attack, *cells])
            header = ["pool", "CPU-s (training)", "attack", *experiments]
            out += [f"### {target}: {label}", "", markdown_table(header, body)]
            out.append("")
    return "\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the baseline pool's results folder")
    parser.add_argument("--baseline-name", default="8 references, as ref_domain (60 epochs from scratch)")
    parser.add_argument("--pool", action="append", default=[], help="NAME=RESULTS_FOLDER of a trained pool")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)

    config = load_yaml(args.config)
    study = Study.from_config(config, REPO, [args.config])
    every = [e for experiments in TARGETS.values() for e in experiments]
    attacks = {experiment: pool_attacks(study, experiment) for experiment in every}
    baseline = {
        e: pool_metrics(args.baseline, study, e, attacks[e])
        for experiments in TARGETS.values()
        if all(has_pool(args.baseline, study, e) for e in experiments)
        for e in experiments
    }
    rows, costs = [], {}
    pools = [(spec.partition("=")[0], Path(spec.partition("=")[2])) for spec in args.pool]
    for name, folder in [(args.baseline_name, args.baseline), *pools]:
        for target, experiments in TARGETS.items():
            if experiments[0] not in baseline or not all(has_pool(folder, study, e) for e in experiments):
                continue  # a pool trained for one objective only
            metrics = {
                e: baseline[e] if folder == args.baseline else pool_metrics(folder, study, e, attacks[e])
                for e in experiments
            }
            rows += pool_rows(name, metrics, baseline, attacks)
            names = study.pools.of(study.experiments[experiments[0]])[: pool_count(folder)]
            train, score = pool_cpu_seconds(folder, names)
            costs[name, target] = f"{train + score:,.0f} ({train:,.0f})"
    text = render(pd.DataFrame(rows), costs, args.baseline_name)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
