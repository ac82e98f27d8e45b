"""A BERT-base-shaped scoring workload (12 layers x 768, 30,522 WordPiece vocabulary, random
weights: nothing downloaded), shared by `make bench` (section (g) on CUDA, section (h) on the CPU)
and `bench/gpu_check.py`: the samples (20-60 words, the paper's long bucket), the useful FLOPs of
the masked energy at K patterns, the GPUs' dense peak TFLOP/s, and one timed scoring run.

Run alone, it is section (h) of `make bench`: BERT-base-shaped scoring on this machine's CPU at the
paper's K, fp32 (and bf16 where the CPU has native bf16), samples/s, the share of the matmul
roofline measured in the same process, and the process's peak RSS:

    .venv/bin/python bench/bert_base.py                          # 16 samples, prints the JSON
    .venv/bin/python bench/bert_base.py --out docs/benchmark_bert_base_cpu.md   # and writes it
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import time
from pathlib import Path

import numpy as np
from bench_scoring import build_model, build_tokenizer, synthetic_samples, useful_flops

LAYERS, HIDDEN, VOCAB = 12, 768, 30522
#: the paper's K, masking patterns per sample (its text; config/paper.yaml's scoring.patterns);
#: the authors' code used 20 (authors_loop.K)
PAPER_K = 10
#: words per sample: the paper's long samples (20-60 tokens; one token per word here)
MIN_WORDS, MAX_WORDS = 20, 60

#: dense (no sparsity) peak TFLOP/s by precision, from NVIDIA's data sheets, matched on
#: `torch.cuda.get_device_name` in this order (case-insensitive). fp32 is the CUDA cores' peak:
#: torch keeps TF32 off for fp32 matmuls by default, so the tensor cores' TF32 rate does not apply.
GPU_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    (r"H100.*PCIe", {"bf16": 756.0, "fp32": 51.2}),
    (r"H100.*NVL", {"bf16": 835.0, "fp32": 60.0}),
    (r"H100", {"bf16": 989.4, "fp32": 66.9}),  # SXM5 ("NVIDIA H100 80GB HBM3")
    (r"H200.*NVL", {"bf16": 835.0, "fp32": 60.0}),
    (r"H200", {"bf16": 989.4, "fp32": 66.9}),  # SXM
    (r"A100", {"bf16": 312.0, "fp32": 19.5}),  # SXM4 and PCIe, 40 and 80 GB
    (r"\bL4\b", {"bf16": 121.0, "fp32": 30.3}),  # not the L40 or L40S
)


def gpu_peak(device_name: str, precision: str) -> float | None:
    """The card's dense peak TFLOP/s in `precision` (bf16, fp32), or None for a card not in
    `GPU_PEAKS` (its MFU is then not computed)."""
    for pattern, peaks in GPU_PEAKS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return peaks.get(precision)
    return None


def workload(n: int, seed: int = 0):
    """(tokenizer, samples): `n` synthetic samples of 20-60 words of the 30,522-word vocabulary."""
    tok, words = build_tokenizer(VOCAB)
    return tok, synthetic_samples(words, n, MIN_WORDS, MAX_WORDS, seed=seed)


def model(seed: int = 0):
    """A random BertForMaskedLM of BERT-base's shape (12 heads, intermediate 3072), on the CPU, eval mode."""
    return build_model(LAYERS, HIDDEN, VOCAB, seed=seed)


def flops(tok, df, patterns: int = PAPER_K) -> float:
    """Useful FLOPs of the masked energy of `df` at `patterns` masks (bench_scoring.useful_flops:
    the encoder on unpadded copies, the LM head on the masked positions only)."""
    from mlmia.scoring.masks import n_masked

    lengths = np.array([len(x) for x in tok(df.text.tolist(), add_special_tokens=False)["input_ids"]])
    copies = np.array([min(patterns, math.comb(int(t), n_masked(int(t), "ceil"))) for t in lengths])
    masked = np.array([n_masked(int(t), "ceil") for t in lengths])
    return useful_flops(lengths, copies, masked, LAYERS, HIDDEN, VOCAB)


def timed_scoring(mdl, tok, df, *, device: str, precision: str, patterns: int = PAPER_K, repeats: int = 1,
                  batch_size: int | None = None) -> dict:  # fmt: skip
    """Best of `repeats` whole `score_samples` calls (tokenization, masks and forward passes), after
    a warm-up on 8 samples: seconds, samples/s, useful TFLOP/s, the scorer's batch facts and the
    energies (a NumPy array, for comparisons; drop it before writing JSON)."""
    import torch

    from mlmia.scoring.energy import score_samples

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    kwargs = dict(patterns=patterns, device=device, precision=precision, batch_size=batch_size, return_stats=True)
    score_samples(mdl, tok, df.head(8), **kwargs)
    best, out, stats = math.inf, None, None
    for _ in range(max(1, repeats)):
        sync()
        t0 = time.perf_counter()
        out, stats = score_samples(mdl, tok, df, **kwargs)
        sync()
        best = min(best, time.perf_counter() - t0)
    energies = out["energy"].to_numpy()
    return {
        "precision": precision,
        "dtype": stats.dtype,
        "samples": len(df),
        "patterns": patterns,
        "seconds": best,
        "samples_per_s": len(df) / best,
        "tflop_per_s": flops(tok, df, patterns) / best / 1e12,
        "batch_size": stats.batch_size,
        "batch_policy": stats.batch_policy,
        "oom_halvings": stats.oom_halvings,
        "energies_finite": bool(np.isfinite(energies).all()),
        "energies": energies,
    }


def cpu_rows(samples: int, repeats: int, precisions: list[str]) -> list[dict]:
    """Section (h): BERT-base-shaped scoring on the CPU, one row per precision, each with the matmul
    roofline of its precision measured in this process (`harness_machine.roofline`)."""
    from harness_machine import roofline

    tok, df = workload(samples)
    mdl = model()
    rows = []
    for p in precisions:
        row = timed_scoring(mdl, tok, df, device="cpu", precision=p, repeats=repeats)
        row["roofline_gflop_per_s"] = roofline(p)
        row["roofline_share"] = row["tflop_per_s"] * 1e3 / row["roofline_gflop_per_s"]
        rows.append(row)
    reference = rows[0]["energies"]
    for row in rows:
        row["max_abs_diff_vs_first"] = float(np.abs(row.pop("energies") - reference).max())
    return rows


def cpu_markdown(r: dict) -> list[str]:
    """Section (h)'s table and its line on memory (harness_report and this script's `--out`)."""
    from mlmia.report.markdown import markdown_table

    table = markdown_table(
        ["precision", "samples", "s", "samples/s", "useful GFLOP/s", "roofline GFLOP/s", "of its roofline",
         "max abs energy diff vs fp32"],
        [[x["precision"], x["samples"], f"{x['seconds']:.1f}", f"{x['samples_per_s']:.2f}",
          f"{x['tflop_per_s'] * 1e3:.0f}", f"{x['roofline_gflop_per_s']:.0f}", f"{x['roofline_share']:.0%}",
          f"{x['max_abs_diff_vs_first']:.2g}"] for x in r["rows"]],
    )  # fmt: skip
    return [
        f"Random BertForMaskedLM, {LAYERS} layers x {HIDDEN}, {VOCAB} WordPiece vocabulary (BERT-base's shape); "
        f"samples of {MIN_WORDS}-{MAX_WORDS} words; K = {r['patterns']} (the paper's); {r['threads']} torch threads; "
        f"best of {r['repeats']}; the time is the whole `score_samples` call (tokenization and masks included).",
        "",
        table,
        "",
        f"Peak RSS of the process (model, imports, every precision): {r['peak_rss_mib']:.0f} MiB.",
    ]


def main(argv=None) -> dict:
    from harness_machine import commit, cpu_has_native_bf16, cpu_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: every core)")
    ap.add_argument("--precisions", nargs="+", default=None, help="default: fp32, and bf16 where native")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--out", type=Path, default=None, help="write them as Markdown here (and .json beside it)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    precisions = args.precisions or (["fp32"] + (["bf16"] if cpu_has_native_bf16() else []))
    r = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": args.threads,
        "load_start": os.getloadavg()[0],
        "torch": torch.__version__,
        "patterns": PAPER_K,
        "repeats": args.repeats,
        "rows": cpu_rows(args.samples, args.repeats, precisions),
    }
    r["load_end"] = os.getloadavg()[0]
    r["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    text = json.dumps(r, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    if args.out:
        args.out.with_suffix(".json").write_text(text)
        head = [
            "# BERT-base-shaped scoring on the CPU",
            "",
            f"Written by `bench/bert_base.py` on {r['date']} (commit {r['commit']}); `make bench` measures the "
            "same as its section (h). What it measures: [benchmarks.md](benchmarks.md#bert-base-on-the-cpu).",
            "",
            f"Machine: {r['cpu']}, {r['cores']} cores; load average {r['load_start']:.2f} at the start, "
            f"{r['load_end']:.2f} at the end; torch {r['torch']}.",
            "",
        ]
        args.out.write_text("\n".join(head + cpu_markdown(r)) + "\n")
    return r


if __name__ == "__main__":
    main()
