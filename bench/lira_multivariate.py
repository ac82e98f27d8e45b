"""Multivariate LiRA's covariance estimators against univariate LiRA on the zoo's experiments: AUC and
TPR at 1% and 0.1% FPR of members against non-members, per estimator and variant (offline, online),
beside `lira_offline` and `lira_online` on the same rows.

The attack table is built from a finished run's score tables and reference splits (read only) as the
workflow's attack-table job builds it (`mlmia.attacks.table.build_attack_table`, the experiment's
selection, target and reference pool from the config's `Study`), with the columns every attack here
reads. The metrics are `mlmia.metrics.classification`'s `auc` and `tpr_at_fpr` on the member and
non-member rows (no patient bootstrap: one point estimate each; a TPR at an FPR below one over the
non-members is not resolvable, "n.r."). The seconds are each attack's statistic on the whole table.

    .venv/bin/python bench/lira_multivariate.py --results results/default --out lira_multivariate.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.table import build_attack_table
from mlmia.metrics.classification import auc, tpr_at_fpr
from mlmia.report.markdown import markdown_table
from mlmia.study.study import Study
from mlmia.terms.schema import load_yaml

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = ("zoo_long_mimic", "zoo_long_i2b2", "zoo_short_mimic", "zoo_short_i2b2")
COLUMNS = ["energy", "token_logp", "per_pattern"]
FPRS = (0.01, 0.001)
#: (label, parameters) of each multivariate estimator
ESTIMATORS = (
    ("pooled σ", {"covariance": "pooled"}),
    ("isotropic, a σ per sample", {"covariance": "isotropic"}),
    ("diagonal, a σ per slot", {"covariance": "diagonal"}),
    ("shrinkage (OAS)", {"covariance": "shrinkage", "shrinkage": "oas"}),
    ("shrinkage (Ledoit-Wolf)", {"covariance": "shrinkage", "shrinkage": "ledoit_wolf"}),
    ("patterns (OAS)", {"covariance": "patterns", "shrinkage": "oas"}),
    ("patterns (Ledoit-Wolf)", {"covariance": "patterns", "shrinkage": "ledoit_wolf"}),
)
#: (label, parameters) of the univariate baselines
UNIVARIATE = (
    ("univariate, global σ (default)", {"variance": "global"}),
    ("univariate, per-sample σ", {"variance": "per_sample"}),
)


def attack_table(results: Path, study: Study, experiment: str) -> pd.DataFrame:
    """The experiment's attack table with the target's and the pool's energy, token losses and
    per-pattern losses, from the run's score tables and splits."""
    spec = study.experiments[experiment]
    names = study.pools.of(spec)
    folder = results / "scores" / spec.dataset
    return build_attack_table(
        pd.read_parquet(results / "samples" / f"{spec.dataset}.parquet"),
        {
            ("target", spec.energy): pd.read_parquet(folder / f"{spec.target}.{spec.energy}.parquet"),
            ("references", spec.energy): [pd.read_parquet(folder / f"{n}.{spec.energy}.parquet") for n in names],
        },
        {"target": spec.target, "references": names},
        {"target": COLUMNS, "references": COLUMNS},
        energy=spec.energy,
        splits=pd.read_parquet(results / "references" / "splits.parquet"),
        where=f"{results}: experiment {experiment!r}",
        **spec.selection(),
    )


def measure(table: pd.DataFrame, name: str, params: dict) -> dict:
    """AUC and TPRs (percent) of one attack on the member and non-member rows, and its seconds."""
    attack = get_attack(name, params)
    start = time.perf_counter()
    score = attack.member_score(table)
    seconds = time.perf_counter() - start
    audited = table["role"].isin(("member", "nonmember")).to_numpy()
    y, s = (table["role"].to_numpy()[audited] == "member"), score[audited]
    return {"auc": auc(y, s), **{f: 100 * tpr_at_fpr(y, s, f) for f in FPRS}, "seconds": seconds}


def cell(values: dict) -> str:
    tprs = " / ".join("n.r." if np.isnan(values[f]) else f"{values[f]:.1f}" for f in FPRS)
    return f"{values['auc']:.3f}; {tprs}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="a finished run's results folder (read only)")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--experiment", action="append", help=f"default: {', '.join(EXPERIMENTS)}")
    parser.add_argument(
        "--estimator", action="append", help="only these multivariate estimators, by label (default: all)"
    )
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    study = Study.from_config(load_yaml(args.config), REPO, [args.config])
    experiments = args.experiment or list(EXPERIMENTS)
    # an offline pool (references.online: false) trains no reference on an audited sample: no online variant
    variants = ("offline", "online") if study.config["references"]["online"] else ("offline",)
    estimators = [e for e in ESTIMATORS if not args.estimator or e[0] in args.estimator]
    results: dict[tuple[str, str, str], dict] = {}
    counts = {}
    for experiment in experiments:
        table = attack_table(args.results, study, experiment)
        roles = table["role"].value_counts()
        counts[experiment] = f"{roles.get('member', 0)} / {roles.get('nonmember', 0)}"
        for variant in variants:
            for label, params in UNIVARIATE:
                results[variant, label, experiment] = measure(table, f"lira_{variant}", params)
            for label, params in estimators:
                results[variant, label, experiment] = measure(table, f"lira_multivariate_{variant}", params)
    lines = [
        "AUC; TPR (%) at 1% / 0.1% FPR, members against non-members (counts: "
        + ", ".join(f"{e} {c}" for e, c in counts.items())
        + "); seconds: the statistic on the whole table, summed over the experiments.",
        "",
    ]
    for variant in variants:
        body = []
        for label, _ in (*UNIVARIATE, *estimators):
            kind = "LiRA" if label.startswith("univariate") else "multivariate LiRA"
            row = [f"{kind}: {label}", *(cell(results[variant, label, e]) for e in experiments)]
            body.append([*row, f"{sum(results[variant, label, e]['seconds'] for e in experiments):.1f}"])
        lines += [f"### {variant}", "", markdown_table(["attack", *experiments, "seconds"], body), ""]
    lines.append(f"Whole run: {time.perf_counter() - start:.0f} s.")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
