"""Per-stage times of a run (docs/large.md): CPU and wall seconds per rule from its `benchmarks/`
files, each scoring shard with its samples and tokens (from the job's log), and the wall of the
jobs that write no benchmark file (from Snakemake's log of the run).

    .venv/bin/python bench/large_stages.py results/large [.snakemake/log/<run>.snakemake.log]
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

import pandas as pd
from harness_stages import stage_table

SCORED = re.compile(r"scored (\d+) samples \((\d+) sequences, (\d+) tokens, (\d+) scored tokens\) in ([\d.]+) s")


def shard_table(run: Path) -> pd.DataFrame:
    """One row per scoring job: model, shard, wall and CPU seconds, samples, tokens, in-loop seconds."""
    rows = []
    for tsv in sorted((run / "benchmarks" / "score").rglob("*.tsv")):
        model, energy, shard = tsv.stem.rsplit(".", 2)
        bench = pd.read_csv(tsv, sep="\t")
        log = run / "logs" / "score" / tsv.parent.name / f"{tsv.stem}.log"
        found = SCORED.search(log.read_text()) if log.exists() else None
        samples, sequences, tokens, _, loop_s = (float(x) for x in found.groups()) if found else (float("nan"),) * 5
        rows.append({"model": model, "energy": energy, "shard": int(shard), "wall_s": float(bench["s"].iloc[0]),
                     "cpu_s": float(bench["cpu_time"].iloc[0]), "samples": samples, "sequences": sequences,
                     "tokens": tokens, "scoring_loop_s": loop_s})  # fmt: skip
    return pd.DataFrame(rows)


def log_walls(log: Path) -> pd.DataFrame:
    """Wall seconds per rule from Snakemake's log (start and finish of each job id)."""
    stamp, started, rule_of, rows = None, {}, {}, []
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("[") and line.endswith("]") and len(line) > 20:
            stamp = datetime.strptime(line[1:-1], "%a %b %d %H:%M:%S %Y")
        elif line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            job = next((m.group(1) for m in map(re.compile(r"\s+jobid: (\d+)").match, lines[i + 1 : i + 6]) if m), None)
            rule_of[job], started[job] = line.split()[1].rstrip(":"), stamp
        elif m := re.match(r"Finished jobid: (\d+)", line):
            job = m.group(1)
            if job in started:
                rows.append({"rule": rule_of[job], "wall_s": (stamp - started[job]).total_seconds()})
    df = pd.DataFrame(rows)
    return df.groupby("rule").agg(jobs=("wall_s", "size"), wall_s=("wall_s", "sum")).reset_index()


def main(run: str, log: str | None = None) -> None:
    run_dir = Path(run)
    print(stage_table(run_dir).to_markdown(index=False, floatfmt=".1f"))
    shards = shard_table(run_dir)
    print()
    print(shards.to_markdown(index=False, floatfmt=".1f"))
    total = shards[["wall_s", "cpu_s", "samples", "tokens", "scoring_loop_s"]].sum()
    print(f"\nscoring: {len(shards)} jobs, {total.cpu_s:.0f} CPU-s, {total.samples:.0f} samples, "
          f"{1000 * total.cpu_s / total.samples:.2f} CPU-ms per sample and model (job start-up included), "
          f"{1000 * total.scoring_loop_s / total.samples:.2f} ms per sample in the scoring loop")  # fmt: skip
    if log:
        print()
        print(log_walls(Path(log)).to_markdown(index=False, floatfmt=".1f"))


if __name__ == "__main__":
    main(*sys.argv[1:])
