"""The benchmark harness's workflow section (e): wall and CPU seconds per rule of a default run
from its benchmark files, the run itself in a fresh copy, and the reruns after a config change."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd
from harness_machine import REPO, timed_process


def stage_table(run_dir: Path) -> pd.DataFrame:
    """Jobs, wall and CPU seconds and peak RSS per rule from a run's `benchmarks/` files."""
    rows = []
    for tsv in sorted((run_dir / "benchmarks").rglob("*.tsv")):
        rel = tsv.relative_to(run_dir / "benchmarks")
        bench = pd.read_csv(tsv, sep="\t")
        rows.append({"stage": rel.parts[0] if len(rel.parts) > 1 else rel.stem, "wall_s": float(bench["s"].iloc[0]),
                     "cpu_s": float(bench["cpu_time"].iloc[0]), "max_rss_mib": float(bench["max_rss"].iloc[0])})  # fmt: skip
    if not rows:
        return pd.DataFrame(columns=["stage", "jobs", "wall_s", "cpu_s", "max_rss_mib"])
    df = pd.DataFrame(rows)
    out = df.groupby("stage").agg(
        jobs=("wall_s", "size"), wall_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"), max_rss_mib=("max_rss_mib", "max")
    )
    return out.sort_values("cpu_s", ascending=False).reset_index()


def default_run(work: Path, cores: int) -> tuple[dict, Path]:
    """`snakemake --cores N` on the default config in a fresh copy of the workflow (the tests'
    way): (its wall, CPU and peak memory, the copy)."""
    copy = work / "default_run"
    copy.mkdir()
    for part in ("Snakefile", "rules", "workflow", "config", "envs", "profiles", "report"):
        src = REPO / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy / part)
    return timed_process(snakemake_cmd(cores), cwd=copy), copy


def snakemake_cmd(cores: int) -> list[str]:
    return [str(Path(sys.executable).parent / "snakemake"), "--cores", str(cores)]


def rerun_checks(copy: Path, cores: int, bf16: bool) -> dict:
    """On a finished default run (a copy of the workflow with results/default): with `bf16`,
    the run rescored in bf16 (`scoring.precision: bf16`: its time and what it changes in
    Table 2); then Table 2 rebuilt after its alpha changes (the one-table rerun)."""
    import yaml

    tables = copy / "results" / "default" / "tables"
    out = {}
    configs = ["--configfile", "config/config.yaml"]
    if bf16:
        fp32 = pd.read_csv(tables / "table2.csv")
        (copy / "bf16.yaml").write_text("scoring: {precision: bf16}\n")
        configs.append("bf16.yaml")
        out["bf16_rescoring"] = timed_process(snakemake_cmd(cores) + configs, cwd=copy)
        out["bf16_table2"] = table_change(fp32, pd.read_csv(tables / "table2.csv"))
    spec = copy / "config" / "tables.yaml"
    data = yaml.safe_load(spec.read_text())
    for column in data["tables"]["table2"]["columns"]:
        column["alpha"] = 0.05
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    # the target before --configfile, which takes every file name after it
    out["table2_alpha_rerun"] = timed_process(snakemake_cmd(cores) + ["table2"] + configs, cwd=copy)
    return out


def table_change(before: pd.DataFrame, after: pd.DataFrame) -> dict:
    """How many of a table's cells print differently (value or interval, formatted by the
    tables' own renderer) and the largest change of a value, per kind of metric."""
    from mlmia.report.tables import PERCENT_METRICS, format_value

    both = before.merge(after, on=["protocol", "column", "row"], suffixes=("_a", "_b"))

    def printed(row, side):
        return tuple(format_value(row["metric_a"], row[f"{c}_{side}"]) for c in ("value", "ci_low", "ci_high"))

    moved = sum(printed(row, "a") != printed(row, "b") for _, row in both.iterrows())
    change = (both["value_b"] - both["value_a"]).abs()
    percent = both["metric_a"].isin(PERCENT_METRICS)
    return {"cells": len(both), "printed_cells_moved": int(moved),
            "max_abs_change_auc": float(change[both["metric_a"] == "auc"].max()),
            "max_abs_change_percent": float(change[percent].max())}  # fmt: skip
