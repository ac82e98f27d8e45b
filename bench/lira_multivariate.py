"""Multivariate LiRA's covariance estimators against univariate LiRA on the zoo's experiments: AUC and
TPR at 1% and 0.1% FPR of members against non-members, per estimator and variant (offline, online),
beside `lira_offline` and `lira_online` on the same rows, and each attack's paired difference to one of
them (`--against`, default the offline default's estimator) with its 95% patient-bootstrap interval.

The attack table is built from a finished run's score tables and reference splits (read only) as the
workflow's attack-table job builds it (`mlmia.attacks.table.build_attack_table`, the experiment's
selection, target and reference pool from the config's `Study`), with the columns every attack here
reads. The metrics are `mlmia.metrics.classification`'s `auc` and `tpr_at_fpr` on all the member and
non-member rows (no member subsampling; a TPR at an FPR below one over the non-members is not
resolvable, "n.r."). The seconds are each attack's statistic on the whole table.

The intervals: each attack scores the whole table once; the metrics are then recomputed on
`--bootstrap` patient-bootstrap replicates of the member and non-member rows, drawn as the workflow's
attack-metrics job draws them (`mlmia.metrics.bootstrap.PatientResampler`, strata (role, source),
patients `group_id`, each stratum's universe from the whole sample table by
`mlmia.attacks.protocols.sample_universe`, seed `--seed`, default the config's `metrics.seed`), every
attack on the same replicates. The difference attack minus `--against` is taken replicate by
replicate (paired); its interval is `mlmia.metrics.intervals.percentile_interval` (95%, replicates
where either side is undefined left out) and its verdict `mlmia.report.finding.interval_verdict`
against 0: separated (above), reversed (below), not separated, not resolvable.

    .venv/bin/python bench/lira_multivariate.py --results results/default --out lira_multivariate.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import sample_universe
from mlmia.attacks.table import build_attack_table
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.classification import auc, tpr_at_fpr
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.finding import interval_verdict
from mlmia.report.markdown import markdown_table
from mlmia.study.study import Study
from mlmia.terms.schema import load_yaml

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = ("zoo_long_mimic", "zoo_long_i2b2", "zoo_short_mimic", "zoo_short_i2b2")
COLUMNS = ["energy", "token_logp", "per_pattern"]
FPRS = (0.01, 0.001)
#: the measures, in the order of a result's arrays: AUC, then TPR (%) at each of FPRS
MEASURES = ("AUC", *(f"TPR@{100 * f:g}%FPR" for f in FPRS))
AUDITED = ("member", "nonmember")
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
#: the label of `lira_multivariate_offline`'s default estimator: what the others are compared to by default
DEFAULT_OFFLINE = "isotropic, a σ per sample"
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


def replicates(table: pd.DataFrame, universe: dict, seed: int, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The member and non-member rows of the table, and per patient-bootstrap replicate the positions
    (within those rows, with repetition) it draws: the attack-metrics job's resampler (strata (role,
    source), patients `group_id`, the sample table's universe), shared by every attack (paired)."""
    audited = np.flatnonzero(table["role"].isin(AUDITED).to_numpy())
    frame = table.iloc[audited]
    strata = list(zip(frame["role"].astype(str), frame["source"].astype(str)))
    resampler = PatientResampler(strata, frame["group_id"].to_numpy(), seed, universe)
    return audited, [resampler.rows(b) for b in range(n)]


def metrics(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """AUC and TPRs (percent) at FPRS of members (y) against non-members; NaN without either."""
    if y.all() or not y.any():
        return np.full(len(MEASURES), np.nan)
    return np.array([auc(y, s), *(100 * tpr_at_fpr(y, s, f) for f in FPRS)])


def measure(table: pd.DataFrame, name: str, params: dict, audited: np.ndarray, draws: list[np.ndarray]) -> dict:
    """One attack's metrics on the member and non-member rows (`point`) and on each replicate
    (`replicates`: replicates x MEASURES), and the seconds of its statistic on the whole table."""
    attack = get_attack(name, params)
    start = time.perf_counter()
    score = attack.member_score(table)
    seconds = time.perf_counter() - start
    y, s = table["role"].to_numpy()[audited] == "member", np.asarray(score)[audited]
    boot = np.array([metrics(y[rows], s[rows]) for rows in draws]).reshape(len(draws), len(MEASURES))
    return {"point": metrics(y, s), "replicates": boot, "seconds": seconds}


def cell(values: dict) -> str:
    point = values["point"]
    tprs = " / ".join("n.r." if np.isnan(v) else f"{v:.1f}" for v in point[1:])
    return f"{point[0]:.3f}; {tprs}"


def difference(first: dict, second: dict, k: int) -> str:
    """first minus second on measure k: the point difference, its paired percentile interval and
    verdict against 0."""
    low, high = percentile_interval(first["replicates"][:, k] - second["replicates"][:, k])
    verdict = interval_verdict(low, high, 0.0)
    point = first["point"][k] - second["point"][k]
    if np.isnan(point) or verdict == "not resolvable":
        return "n.r."
    digits = 3 if k == 0 else 1
    return f"{point:+.{digits}f} [{low:.{digits}f}, {high:.{digits}f}] {verdict}"


def kind(label: str) -> str:
    return "LiRA" if label.startswith("univariate") else "multivariate LiRA"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="a finished run's results folder (read only)")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--experiment", action="append", help=f"default: {', '.join(EXPERIMENTS)}")
    parser.add_argument(
        "--estimator", action="append", help="only these multivariate estimators, by label (default: all)"
    )
    parser.add_argument(
        "--against",
        default=DEFAULT_OFFLINE,
        help="the label (an estimator's or a univariate baseline's) every other attack's paired difference "
        f"is taken to (default: {DEFAULT_OFFLINE!r}, the offline default's)",
    )
    parser.add_argument("--bootstrap", type=int, default=200, help="patient-bootstrap replicates (default: 200)")
    parser.add_argument("--seed", type=int, help="the bootstrap's seed (default: the config's metrics.seed)")
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    study = Study.from_config(load_yaml(args.config), REPO, [args.config])
    seed = study.metrics["seed"] if args.seed is None else args.seed
    experiments = args.experiment or list(EXPERIMENTS)
    # an offline pool (references.online: false) trains no reference on an audited sample: no online variant
    variants = ("offline", "online") if study.config["references"]["online"] else ("offline",)
    estimators = [e for e in ESTIMATORS if not args.estimator or e[0] in args.estimator]
    attacks = [*UNIVARIATE, *estimators]
    if args.against not in [label for label, _ in attacks]:
        parser.error(f"--against {args.against!r} is none of the attacks run: {', '.join(a for a, _ in attacks)}")
    results: dict[tuple[str, str, str], dict] = {}
    counts = {}
    universes = {}
    for experiment in experiments:
        table = attack_table(args.results, study, experiment)
        dataset = study.experiments[experiment].dataset
        if dataset not in universes:
            samples = args.results / "samples" / f"{dataset}.parquet"
            universes[dataset] = sample_universe(pd.read_parquet(samples, columns=["role", "source", "group_id"]))
        audited, draws = replicates(table, universes[dataset], seed, args.bootstrap)
        patients = table.iloc[audited].groupby("role")["group_id"].nunique()
        roles = table["role"].value_counts()
        counts[experiment] = " / ".join(f"{roles.get(r, 0)} ({patients.get(r, 0)} patients)" for r in AUDITED)
        for variant in variants:
            for label, params in UNIVARIATE:
                results[variant, label, experiment] = measure(table, f"lira_{variant}", params, audited, draws)
            for label, params in estimators:
                name = f"lira_multivariate_{variant}"
                results[variant, label, experiment] = measure(table, name, params, audited, draws)
    lines = [
        "AUC; TPR (%) at 1% / 0.1% FPR, members against non-members (members / non-members: "
        + ", ".join(f"{e} {c}" for e, c in counts.items())
        + "); seconds: the statistic on the whole table, summed over the experiments.",
        "",
        f"Δ: the attack minus {args.against!r} of the same variant, AUC and TPR (percentage points), with "
        f"the 95% percentile interval over {args.bootstrap} patient-bootstrap replicates (seed {seed}) shared "
        "by both sides (paired), and its verdict against 0: separated (above), reversed (below), not "
        "separated; n.r.: not resolvable.",
        "",
    ]
    for variant in variants:
        body = []
        for label, _ in attacks:
            row = [f"{kind(label)}: {label}", *(cell(results[variant, label, e]) for e in experiments)]
            body.append([*row, f"{sum(results[variant, label, e]['seconds'] for e in experiments):.1f}"])
        lines += [f"### {variant}", "", markdown_table(["attack", *experiments, "seconds"], body), ""]
        body = [
            [
                f"{kind(label)}: {label}",
                measure_name,
                *(difference(results[variant, label, e], results[variant, args.against, e], k) for e in experiments),
            ]
            for label, _ in attacks
            if label != args.against
            for k, measure_name in enumerate(MEASURES)
        ]
        lines += [
            f"#### {variant}: Δ to {args.against}",
            "",
            markdown_table(["attack", "measure", *experiments], body),
            "",
        ]
    lines.append(f"Whole run: {time.perf_counter() - start:.0f} s.")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
