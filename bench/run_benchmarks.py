"""Every speed figure of docs/benchmark_run.md from one run (`make bench`).

    .venv/bin/python bench/run_benchmarks.py                     # all but the default run
    .venv/bin/python bench/run_benchmarks.py --default-run       # also time `snakemake` on the
                                                                  # default config in a fresh copy
    .venv/bin/python bench/run_benchmarks.py --stages results/default   # stages of a finished run

Sections (each a function below; the Markdown names them the same way):
  (a) roofline: the machine's measured matmul GFLOP/s, fp32 and bf16, with the scorer's threads;
  (b) scorer: steady-state tokens/s and useful GFLOP/s of `score_samples` (fp32 and, where the CPU
      has native bf16, bf16) as a fraction of the roofline of the precision used;
  (c) loops: a reimplementation of the authors' per-sample loop (batch of 1, two fp32 forward
      passes per mask, gradients recorded) and the test oracle (`score_samples_oracle`) on the same
      model and samples, as ratios to the scorer;
  (d) whole process: `mlmia score` on 1, 200 and 2000 samples against the import floor (a process
      that imports torch and BertForMaskedLM and exits), and the authors' loop as a whole process;
  (e) stages: wall and CPU seconds per rule of a default run (its benchmark files), with the
      run's total wall and CPU time, and a one-table rerun after an alpha change;
  (f) memory: peak RSS of `mlmia score` against the number of samples;
  (g) GPU: BERT-base scoring MFU when a CUDA device is present (else stated as not measured).

The models are random BertForMaskedLM of the default world's Base shape (2 layers x 128, 3k
WordPiece vocabulary); timings are wall clock, best of `--repeats`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from authors_loop import K, authors_loop  # noqa: E402
from bench_scoring import build_model, build_tokenizer, synthetic_samples, useful_flops  # noqa: E402

from mlmia.report.markdown import markdown_table  # noqa: E402

LAYERS, HIDDEN, VOCAB = 2, 128, 3000
IMPORT_FLOOR = "import torch, transformers; from transformers import BertForMaskedLM; import os; os._exit(0)"


# --------------------------------------------------------------------------- processes


def timed_process(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """Wall seconds, CPU seconds (the process and the children it waited for) and peak RSS (MiB)
    of one command, from `os.wait4` on the child; fails on a non-zero exit."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024}


def best_of(repeats: int, fn) -> dict:
    runs = [fn() for _ in range(repeats)]
    return min(runs, key=lambda r: r["wall_s"])


# --------------------------------------------------------------------------- (a) roofline


def cpu_has_native_bf16() -> bool:
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def roofline(dtype_name: str, size: int = 2048, repeats: int = 5) -> float:
    """Best GFLOP/s of a size x size x size matmul in `dtype_name` (2 n^3 FLOPs)."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b  # warm-up
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e9


# --------------------------------------------------------------------------- (b) scorer, (c) loops


def workload(n: int, seed: int = 0):
    tok, words = build_tokenizer(VOCAB)
    df = synthetic_samples(words, n, 10, 60, seed=seed)
    return tok, df


def workload_flops(tok, df: pd.DataFrame) -> tuple[float, int]:
    """(useful FLOPs, tokens of all masked copies) of the masked energy at K masks."""
    from mlmia.scoring.masks import n_masked

    lengths = np.array([len(x) for x in tok(df.text.tolist(), add_special_tokens=False)["input_ids"]])
    copies = np.array([min(K, math.comb(int(t), n_masked(int(t)))) for t in lengths])
    masked = np.array([n_masked(int(t)) for t in lengths])
    return useful_flops(lengths, copies, masked, LAYERS, HIDDEN, VOCAB), int((copies * (lengths + 2)).sum())


def scorer_steady_state(model, tok, df, precision: str, repeats: int) -> dict:
    from mlmia.scoring.energy import score_samples

    score_samples(model, tok, df.head(16), k=K, precision=precision)  # warm-up and the head check
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = score_samples(model, tok, df, k=K, precision=precision)
        best = min(best, time.perf_counter() - t0)
    flops, tokens = workload_flops(tok, df)
    return {
        "precision": precision,
        "samples": len(df),
        "seconds": best,
        "samples_per_s": len(df) / best,
        "tokens_per_s": tokens / best,
        "gflop_per_s": flops / best / 1e9,
        "energies": out["energy"].to_numpy(),
    }


def loops(model, tok, df_small: pd.DataFrame, scorer_samples_per_s: float) -> dict:
    from mlmia.scoring.energy import score_samples_oracle

    t0 = time.perf_counter()
    authors_loop(model, tok, df_small.text.tolist())
    authors = len(df_small) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    score_samples_oracle(model, tok, df_small, k=K)
    oracle = len(df_small) / (time.perf_counter() - t0)
    return {
        "samples": len(df_small),
        "authors_samples_per_s": authors,
        "oracle_samples_per_s": oracle,
        "scorer_vs_authors": scorer_samples_per_s / authors,
        "scorer_vs_oracle": scorer_samples_per_s / oracle,
    }


# --------------------------------------------------------------------------- (d) whole process, (f) memory


def save_model(directory: Path) -> Path:
    tok, _ = build_tokenizer(VOCAB)
    model = build_model(LAYERS, HIDDEN, VOCAB)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def mlmia_score_cmd(model_dir: Path, samples: Path, out: Path, k: int = K) -> list[str]:
    return [str(Path(sys.executable).parent / "mlmia"), "score", "--model", str(model_dir), "--samples", str(samples),
            "--out", str(out), "--masks", str(k)]  # fmt: skip


def whole_process(work: Path, model_dir: Path, sizes: list[int], repeats: int) -> dict:
    tok, df = workload(max(sizes))
    floor = best_of(repeats, lambda: timed_process([sys.executable, "-c", IMPORT_FLOOR]))
    rows = []
    for n in sizes:
        path = work / f"samples_{n}.parquet"
        df.head(n).to_parquet(path)
        run = best_of(repeats, lambda path=path: timed_process(mlmia_score_cmd(model_dir, path, work / "out.parquet")))
        rows.append({"samples": n, **run})
    n_auth = 200 if 200 in sizes else min(sizes)
    authors = timed_process([sys.executable, str(BENCH / "authors_loop.py"), str(model_dir),
                             str(work / f"samples_{n_auth}.parquet"), str(work / "authors.parquet")])  # fmt: skip
    ours = next(r for r in rows if r["samples"] == n_auth)
    return {
        "import_floor": floor,
        "mlmia_score": rows,
        "authors_process": {"samples": n_auth, **authors},
        "whole_process_vs_authors": authors["wall_s"] / ours["wall_s"],
        "overhead_beyond_floor_s": next(r for r in rows if r["samples"] == min(sizes))["wall_s"] - floor["wall_s"],
    }


def memory(work: Path, model_dir: Path, sizes: list[int]) -> list[dict]:
    tok, df = workload(max(sizes), seed=1)
    rows = []
    for n in sizes:
        path = work / f"memory_{n}.parquet"
        df.head(n).to_parquet(path)
        rows.append({"samples": n, **timed_process(mlmia_score_cmd(model_dir, path, work / "out.parquet", k=10))})
    return rows


def training_throughput(work: Path, tokenizer_dir: Path, precisions: list[str], steps: int = 80) -> list[dict]:
    """Optimiser steps/s of `train_mlm` on the Base shape (batch 32 lines of 10-60 words), one
    row per precision, on the same texts and seed."""
    from mlmia.models.training import train_mlm

    _, df = workload(2000, seed=2)
    rows = []
    for p in precisions:
        config = {"hidden_size": HIDDEN, "num_layers": LAYERS, "num_heads": 2, "intermediate_size": 4 * HIDDEN,
                  "epochs": 1, "batch_size": 32, "precision": p}  # fmt: skip
        info = train_mlm(df.text.tolist(), tokenizer_dir, work / f"train_{p}", config=config,
                         threads=torch_threads(), device="cpu", max_steps=steps)  # fmt: skip
        rows.append({"precision": p, "steps": info["steps"], "steps_per_s": info["steps"] / info["train_seconds"],
                     "final_loss": info["final_loss"]})  # fmt: skip
    return rows


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# --------------------------------------------------------------------------- (e) stages


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


# --------------------------------------------------------------------------- (g) GPU


def gpu_mfu(repeats: int) -> dict | None:
    """BERT-base (12 x 768, 30522 vocabulary, random) masked-energy scoring in bf16 on CUDA: useful
    FLOPs / s over the device's dense bf16 peak (`--gpu-peak-tflops`), and the CUDA energies
    against the CPU fp32 ones on a subset."""
    import torch

    if not torch.cuda.is_available():
        return None
    from transformers import BertConfig, BertForMaskedLM

    from mlmia.scoring.energy import score_samples

    tok, words = build_tokenizer(30522)
    df = synthetic_samples(words, 4000, 20, 60)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).eval()
    cpu = score_samples(model, tok, df.head(50), k=K, device="cpu")
    score_samples(model, tok, df.head(200), k=K, device="cuda", precision="bf16")
    best = math.inf
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = score_samples(model, tok, df, k=K, device="cuda", precision="bf16")
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    from mlmia.scoring.masks import n_masked

    lengths = np.array([len(x) for x in tok(df.text.tolist(), add_special_tokens=False)["input_ids"]])
    copies = np.array([min(K, math.comb(int(t), n_masked(int(t)))) for t in lengths])
    masked = np.array([n_masked(int(t)) for t in lengths])
    flops = useful_flops(lengths, copies, masked, 12, 768, 30522)
    return {
        "device": torch.cuda.get_device_name(0),
        "samples_per_s": len(df) / best,
        "tflop_per_s": flops / best / 1e12,
        "max_abs_diff_vs_cpu_fp32": float(np.abs(out["energy"].to_numpy()[:50] - cpu["energy"].to_numpy()).max()),
    }


# --------------------------------------------------------------------------- report


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(r: dict) -> str:
    import torch

    m = r["machine"]
    lines = [
        "# Benchmark run",
        "",
        f"Written by `bench/run_benchmarks.py` on {r['date']} (commit {r['commit']}); rerun with `make bench`"
        + (" BENCH_ARGS=--default-run" if r.get("default_run") else "")
        + ". What each section measures and how: [benchmarks.md](benchmarks.md).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores used ({m['threads']} torch threads), native bf16: "
        f"{'yes' if m['native_bf16'] else 'no'}; load average at the start {m['load_start']:.2f}, at the end "
        f"{m['load_end']:.2f}; torch {torch.__version__}. Model: random BertForMaskedLM, {LAYERS} layers x {HIDDEN}, "
        f"{VOCAB} WordPiece vocabulary (the default world's Base shape); samples of 10-60 words; K = {K}.",
        "",
        "## (a) Roofline (matmul 2048^3, best of 5)",
        "",
        markdown_table(["precision", "GFLOP/s"], [[p, f"{v:.0f}"] for p, v in r["roofline"].items()]),
        "",
        "## (b) Scorer, steady state",
        "",
    ]
    lines.append(
        markdown_table(
            ["precision", "samples", "s", "samples/s", "tokens/s", "useful GFLOP/s", "of its roofline",
             "max abs energy diff vs fp32"],
            [[s["precision"], s["samples"], f"{s['seconds']:.2f}", f"{s['samples_per_s']:.0f}",
              f"{s['tokens_per_s'] / 1e3:.0f}k", f"{s['gflop_per_s']:.0f}", f"{s['roofline_share']:.0%}",
              f"{s.get('max_abs_diff_vs_fp32', 0):.2g}"] for s in r["scorer"]],
        )
    )  # fmt: skip
    lo = r["loops"]
    lines += [
        "",
        f"## (c) The authors' loop and the oracle ({lo['samples']} samples, in process)",
        "",
        markdown_table(
            ["loop", "samples/s", "scorer (fp32) is faster by"],
            [["authors' loop (batch 1, two fp32 passes per mask, gradients on)", f"{lo['authors_samples_per_s']:.1f}",
              f"{lo['scorer_vs_authors']:.0f}x"],
             ["oracle (`score_samples_oracle`: batch 1, one pass per mask)", f"{lo['oracle_samples_per_s']:.1f}",
              f"{lo['scorer_vs_oracle']:.0f}x"]],
        ),
    ]  # fmt: skip
    wp = r["whole_process"]
    floor, a = wp["import_floor"], wp["authors_process"]
    processes = [[f"import floor (`{IMPORT_FLOOR.rsplit(';', 2)[0]}`)", "-", f"{floor['wall_s']:.2f}",
                  f"{floor['cpu_s']:.2f}", f"{floor['peak_rss_mib']:.0f}"]]  # fmt: skip
    processes += [
        ["`mlmia score`", row["samples"], f"{row['wall_s']:.2f}", f"{row['cpu_s']:.2f}", f"{row['peak_rss_mib']:.0f}"]
        for row in wp["mlmia_score"]
    ]
    processes.append(
        ["authors' loop as a process", a["samples"], f"{a['wall_s']:.2f}", f"{a['cpu_s']:.2f}",
         f"{a['peak_rss_mib']:.0f}"]
    )  # fmt: skip
    lines += [
        "",
        "## (d) Whole process: `mlmia score` (fp32, K = 20)",
        "",
        markdown_table(["command", "samples", "wall s", "CPU s", "peak RSS MiB"], processes),
        "",
        f"Start-up overhead beyond the import floor (1 sample): {wp['overhead_beyond_floor_s']:.2f} s. "
        f"Whole process on {a['samples']} samples: {wp['whole_process_vs_authors']:.1f}x the authors' loop.",
    ]
    t0 = r["training"][0]["steps_per_s"]
    lines += ["", "## Training throughput (`train_mlm`, Base shape, batch 32, 80 steps)", "",
              markdown_table(["precision", "steps/s", "speed-up"],
                             [[t["precision"], f"{t['steps_per_s']:.1f}", f"{t['steps_per_s'] / t0:.2f}x"]
                              for t in r["training"]])]  # fmt: skip
    lines += ["", "## (e) Stages of the default run", ""]
    dr = r.get("default_run")
    if dr:
        lines += (
            [
                f"`snakemake --cores {m['cores']}` on config/config.yaml in a fresh copy: {dr['run']['wall_s'] / 60:.1f} "
                f"min wall, {dr['run']['cpu_s'] / 60:.1f} min CPU (every job and Snakemake itself), peak RSS of a "
                f"single process {dr['run']['peak_rss_mib']:.0f} MiB.",
                "",
            ]
            if "run" in dr
            else [f"The default run at {r['stages_dir']} (finished before this run; not timed here).", ""]
        )
        lines += [
            f"Table 2 rebuilt after its alpha changes to 0.05 (`snakemake table2`): "
            f"{dr['table2_alpha_rerun']['wall_s']:.1f} s.",
            "",
        ]
    if dr and "bf16_rescoring" in dr:
        lines += [
            f"The same run rescored in bf16 (`scoring.precision: bf16`; scoring and everything after it): "
            f"{dr['bf16_rescoring']['wall_s'] / 60:.1f} min wall, {dr['bf16_rescoring']['cpu_s'] / 60:.1f} min CPU. "
            f"Table 2: {dr['bf16_table2']['printed_cells_moved']} of {dr['bf16_table2']['cells']} printed cells move; "
            f"largest change {dr['bf16_table2']['max_abs_change_auc']:.4f} in an AUC, "
            f"{dr['bf16_table2']['max_abs_change_percent']:.2f} points in a precision, recall or TPR.",
            "",
        ]
    stages = r.get("stages")
    if stages:
        lines += [f"Per rule, from the run's benchmark files ({r['stages_dir']}):", "",
                  markdown_table(["stage", "jobs", "wall s (sum)", "CPU s (sum)", "max RSS MiB"],
                                 [[s["stage"], s["jobs"], f"{s['wall_s']:.0f}", f"{s['cpu_s']:.0f}",
                                   f"{s['max_rss_mib']:.0f}"] for s in stages])]  # fmt: skip
    else:
        lines.append("Not measured in this run (pass `--default-run`, or `--stages results/<run>`).")
    memory = [[x["samples"], f"{x['wall_s']:.1f}", f"{x['peak_rss_mib']:.0f}"] for x in r["memory"]]
    lines += ["", "## (f) Peak memory against corpus size (`mlmia score`, K = 10)", "",
              markdown_table(["samples", "wall s", "peak RSS MiB"], memory)]  # fmt: skip
    lines += ["", "## (g) GPU", ""]
    g = r.get("gpu")
    lines.append(
        f"{g['device']}: BERT-base bf16 {g['samples_per_s']:.0f} samples/s, {g['tflop_per_s']:.0f} useful TFLOP/s; "
        f"energies within {g['max_abs_diff_vs_cpu_fp32']:.2g} of CPU fp32."
        if g
        else "No CUDA device in this run: not measured."
    )
    met = [[t, v, "yes" if ok else "no"] for t, v, ok in targets(r)]
    lines += ["", "## Targets (issue 14)", "", markdown_table(["target", "measured", "met"], met)]
    return "\n".join(lines) + "\n"


def targets(r: dict) -> list[tuple[str, str, bool | None]]:
    wp = r["whole_process"]
    fp32 = next(s for s in r["scorer"] if s["precision"] == "fp32")
    best = max(r["scorer"], key=lambda s: s["roofline_share"])
    out = [
        ("`mlmia score` whole process, 200 samples: >= 20x the authors' loop",
         f"{wp['whole_process_vs_authors']:.1f}x", wp["whole_process_vs_authors"] >= 20),
        ("steady state >= 50% of the roofline of the precision used",
         f"fp32 {fp32['roofline_share']:.0%}; best {best['precision']} {best['roofline_share']:.0%}",
         best["roofline_share"] >= 0.5),
        ("start-up overhead beyond the import floor <= 1 s", f"{wp['overhead_beyond_floor_s']:.2f} s",
         wp["overhead_beyond_floor_s"] <= 1.0),
        ("peak memory flat in corpus size (largest / smallest run)",
         f"{r['memory'][-1]['peak_rss_mib'] / r['memory'][0]['peak_rss_mib']:.2f}x",
         r["memory"][-1]["peak_rss_mib"] <= 1.25 * r["memory"][0]["peak_rss_mib"]),
    ]  # fmt: skip
    dr = r.get("default_run") or {}
    if "run" in dr:
        out.append(("default run <= 10 min wall", f"{dr['run']['wall_s'] / 60:.1f} min", dr["run"]["wall_s"] <= 600))
    if "table2_alpha_rerun" in dr:
        out.append(("one-table rerun after an alpha change < 20 s", f"{dr['table2_alpha_rerun']['wall_s']:.1f} s",
                    dr["table2_alpha_rerun"]["wall_s"] < 20))  # fmt: skip
    return out


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: every core)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=2000, help="steady-state samples")
    ap.add_argument("--loop-samples", type=int, default=50, help="samples for the authors' loop and the oracle")
    ap.add_argument("--process-sizes", type=int, nargs="+", default=[1, 200, 2000])
    ap.add_argument("--memory-sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    ap.add_argument("--default-run", action="store_true", help="time snakemake on the default config (minutes)")
    ap.add_argument("--no-bf16-run", action="store_true", help="with a default run: skip its bf16 rescoring")
    ap.add_argument("--existing-run", type=Path, default=None,
                    help="a finished default run's workflow copy (with results/default): its stages, the bf16 "
                    "rescoring and the one-table rerun, instead of a new run")  # fmt: skip
    ap.add_argument("--stages", type=Path, default=None, help="a finished run's results/<run> folder")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmark_run.md")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    os.environ["MLMIA_NUM_THREADS"] = str(args.threads)
    r: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "threads": args.threads,
            "native_bf16": cpu_has_native_bf16(),
            "load_start": os.getloadavg()[0],
        },  # fmt: skip
    }
    precisions = ["fp32"] + (["bf16"] if r["machine"]["native_bf16"] else [])
    r["roofline"] = {p: roofline(p) for p in precisions}
    print("roofline", r["roofline"], flush=True)

    tok, df = workload(args.samples)
    model = build_model(LAYERS, HIDDEN, VOCAB)
    r["scorer"] = []
    for p in precisions:
        s = scorer_steady_state(model, tok, df, p, args.repeats)
        s["roofline_share"] = s["gflop_per_s"] / r["roofline"][p]
        r["scorer"].append(s)
    reference = r["scorer"][0]["energies"]  # fp32
    for s in r["scorer"]:
        s["max_abs_diff_vs_fp32"] = float(np.abs(s.pop("energies") - reference).max())
    print("scorer", [(s["precision"], round(s["gflop_per_s"])) for s in r["scorer"]], flush=True)
    r["loops"] = loops(model, tok, df.head(args.loop_samples), r["scorer"][0]["samples_per_s"])
    print("loops", r["loops"], flush=True)

    with tempfile.TemporaryDirectory(prefix="mlmia_bench_") as tmp:
        work = Path(tmp)
        model_dir = save_model(work / "model")
        r["whole_process"] = whole_process(work, model_dir, args.process_sizes, args.repeats)
        print("whole process", r["whole_process"]["overhead_beyond_floor_s"], flush=True)
        r["memory"] = memory(work, model_dir, args.memory_sizes)
        print("memory", r["memory"], flush=True)
        r["training"] = training_throughput(work, model_dir, precisions)
        print("training", r["training"], flush=True)
        save(r, args.out)
        copy = args.existing_run
        if args.default_run:
            run, copy = default_run(work, os.cpu_count())
            r["default_run"] = {"run": run}
            r["stages_dir"] = "the run above"
            save(r, args.out)
        if copy is not None:
            r["stages"] = stage_table(copy / "results" / "default").to_dict("records")
            r.setdefault("stages_dir", str(copy / "results" / "default"))
            r.setdefault("default_run", {}).update(rerun_checks(copy, os.cpu_count(), bf16=not args.no_bf16_run))
    if args.stages is not None:
        r["stages"] = stage_table(args.stages).to_dict("records")
        r["stages_dir"] = str(args.stages)
    r["gpu"] = gpu_mfu(args.repeats)
    r["machine"]["load_end"] = os.getloadavg()[0]
    save(r, args.out)
    args.out.write_text(markdown(r))
    print(f"wrote {args.out}")


def save(r: dict, out: Path) -> None:
    """The results so far as JSON beside the Markdown (a later step that fails loses nothing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(r, indent=1, default=float))


if __name__ == "__main__":
    main()
