"""The benchmark harness's scorer sections: (b) the scorer's steady state, (c) the authors' loop
and the oracle against it, (d) whole processes against the import floor, (f) peak memory, the
training throughput, (g) BERT-base-shaped scoring on a GPU where there is one (also
`bench/gpu_check.py`'s) and (h) the same on the CPU."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import bert_base
import numpy as np
import pandas as pd
from authors_loop import K, authors_loop
from bench_scoring import build_model, build_tokenizer, synthetic_samples, useful_flops
from bert_base import PAPER_K
from harness_machine import BENCH, best_of, timed_process, torch_threads

LAYERS, HIDDEN, VOCAB = 2, 128, 3000
IMPORT_FLOOR = "import torch, transformers; from transformers import BertForMaskedLM; import os; os._exit(0)"


def workload(n: int, seed: int = 0):
    tok, words = build_tokenizer(VOCAB)
    df = synthetic_samples(words, n, 10, 60, seed=seed)
    return tok, df


def workload_flops(tok, df: pd.DataFrame) -> tuple[float, int]:
    """(useful FLOPs, tokens of all masked copies) of the masked energy at K masks."""
    from mlmia.scoring.masks import n_masked

    lengths = np.array([len(x) for x in tok(df.text.tolist(), add_special_tokens=False)["input_ids"]])
    copies = np.array([min(K, math.comb(int(t), n_masked(int(t), "ceil"))) for t in lengths])
    masked = np.array([n_masked(int(t), "ceil") for t in lengths])
    return useful_flops(lengths, copies, masked, LAYERS, HIDDEN, VOCAB), int((copies * (lengths + 2)).sum())


def scorer_steady_state(model, tok, df, precision: str, repeats: int) -> dict:
    from mlmia.scoring.energy import score_samples

    score_samples(model, tok, df.head(16), patterns=K, precision=precision)  # warm-up and the head check
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = score_samples(model, tok, df, patterns=K, precision=precision)
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
    score_samples_oracle(model, tok, df_small, patterns=K)
    oracle = len(df_small) / (time.perf_counter() - t0)
    return {
        "samples": len(df_small),
        "authors_samples_per_s": authors,
        "oracle_samples_per_s": oracle,
        "scorer_vs_authors": scorer_samples_per_s / authors,
        "scorer_vs_oracle": scorer_samples_per_s / oracle,
    }


def save_model(directory: Path) -> Path:
    tok, _ = build_tokenizer(VOCAB)
    model = build_model(LAYERS, HIDDEN, VOCAB)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def mlmia_score_cmd(model_dir: Path, samples: Path, out: Path, patterns: int = K) -> list[str]:
    return [str(Path(sys.executable).parent / "mlmia"), "score", "--model", str(model_dir), "--samples", str(samples),
            "--out", str(out), "--patterns", str(patterns)]  # fmt: skip


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
        rows.append(
            {"samples": n, **timed_process(mlmia_score_cmd(model_dir, path, work / "out.parquet", patterns=10))}
        )
    return rows


def training_throughput(work: Path, tokenizer_dir: Path, precisions: list[str], steps: int = 80) -> list[dict]:
    """Optimiser steps/s of `train_mlm` on the Base shape (batch 32 lines of 10-60 words), one
    row per precision, on the same texts and seed."""
    from mlmia.models.training import train_mlm
    from mlmia.study.resolve import resolved_settings

    _, df = workload(2000, seed=2)
    rows = []
    for p in precisions:
        config = {"hidden_size": HIDDEN, "num_layers": LAYERS, "num_heads": 2, "intermediate_size": 4 * HIDDEN,
                  "epochs": 1, "batch_size": 32, "precision": p}  # fmt: skip
        info = train_mlm(df.text.tolist(), tokenizer_dir, work / f"train_{p}", config=resolved_settings(config, p),
                         threads=torch_threads(), device="cpu", max_steps=steps)  # fmt: skip
        rows.append({"precision": p, "steps": info["steps"], "steps_per_s": info["steps"] / info["train_seconds"],
                     "final_loss": info["final_loss"]})  # fmt: skip
    return rows


def bert_base_cpu(work: Path, samples: int, repeats: int, threads: int) -> dict:
    """Section (h): `bench/bert_base.py` as a child process (BERT-base-shaped scoring on the CPU at
    the paper's K): its rows, and the child's wall time and peak RSS from `os.wait4`."""
    out = work / "bert_base.json"
    run = timed_process([sys.executable, str(BENCH / "bert_base.py"), "--samples", str(samples), "--repeats",
                         str(repeats), "--threads", str(threads), "--json", str(out)])  # fmt: skip
    r = json.loads(out.read_text())
    return {**r, "peak_rss_mib": run["peak_rss_mib"], "wall_s": run["wall_s"]}


def gpu_mfu(repeats: int, samples: int = 4000, precisions: tuple[str, ...] = ("bf16",), cpu_samples: int = 50,
            patterns: int = PAPER_K) -> dict | None:  # fmt: skip
    """BERT-base-shaped (12 x 768, 30522 vocabulary, random) masked-energy scoring on CUDA at the
    paper's K, one run per precision (autocast bf16; fp32): samples/s, useful TFLOP/s and the MFU
    against the card's dense peak (`bert_base.GPU_PEAKS`; None for a card not listed), with the
    energies of the first `cpu_samples` against the CPU's fp32 ones. None without a CUDA device.
    fp32 runs a quarter of the samples (its peak is a fifteenth of bf16's on an H100)."""
    import torch

    if not torch.cuda.is_available():
        return None
    tok, df = bert_base.workload(samples)
    mdl = bert_base.model()
    cpu = bert_base.timed_scoring(mdl, tok, df.head(cpu_samples), device="cpu", precision="fp32",
                                  patterns=patterns)["energies"]  # fmt: skip
    device = torch.cuda.get_device_name(0)
    runs = []
    for precision in precisions:
        part = df if precision != "fp32" else df.head(max(cpu_samples, samples // 4))
        run = bert_base.timed_scoring(mdl, tok, part, device="cuda", precision=precision, patterns=patterns,
                                      repeats=repeats)  # fmt: skip
        run["max_abs_diff_vs_cpu_fp32"] = float(np.abs(run.pop("energies")[:cpu_samples] - cpu).max())
        run["peak_tflop_per_s"] = bert_base.gpu_peak(device, precision)
        run["mfu"] = run["tflop_per_s"] / run["peak_tflop_per_s"] if run["peak_tflop_per_s"] else None
        runs.append(run)
    mdl.cpu()
    torch.cuda.empty_cache()
    return {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "patterns": patterns,
            "cpu_samples": cpu_samples, "cpu_min_abs_energy": float(np.abs(cpu).min()), "runs": runs}  # fmt: skip
