"""The GPU check in one command: does the CUDA scoring path work on this machine, and how fast is it.

    PYTHONPATH=src python3 bench/gpu_check.py          # bare: the machine's own python3, no venv
    make gpu-check                                     # the same with .venv's python (GPU_CHECK_ARGS=...)

It needs torch (a CUDA build), transformers, numpy, pandas, pyarrow, PyYAML and pytest, nothing else
of the project's dependencies: no snakemake, jsonschema or opacus, and no install of the library
(`PYTHONPATH=src`). Every module it uses is imported before it looks for a GPU, so reaching the
refusal below proves the import closure (tests/test_gpu_check.py runs it with jsonschema,
snakemake and opacus blocked). About 2 minutes on one H100 by its sizes (an estimate: it has not
yet run on a GPU); the budget is 5.

Items, each one summary line, PASS or FAIL with its figures, on stdout and in `--out` (default
results/gpu_check.txt, after a header line naming the commit, the card, torch and CUDA):

  gpu-tests     the suite's gpu-marked tests (`python -m pytest -m gpu` on the files that hold them)
  cuda-vs-cpu   BERT-base-shaped energies on CUDA, bf16 autocast and fp32, against the CPU's fp32 ones
  bf16          BERT-base-shaped scoring at the paper's K in bf16: samples/s, useful TFLOP/s, MFU
                against the card's dense peak (`bert_base.GPU_PEAKS`), batch size from free memory
  fp32          the same in fp32
  free-memory   most of the GPU's memory taken by a plain tensor: the batch size read from the free
                memory shrinks and the run completes with the same energies
  oom-halving   with that tensor still held, a batch far too large: halved on out-of-memory until it
                fits, the same energies

The MFU is reported against issue 14's 40% target, not judged: an item fails on a wrong energy, a
wrong dtype or batch policy, an error or a test failure, never on speed. The memory tensor is
`torch.empty(..., device="cuda")` (device memory through torch's caching allocator, never managed
memory) and is freed before the check ends, whatever happens.

Exit codes: 0 every item passed; 1 an item failed; 2 bad arguments; 3 no GPU here (one line on
stdout, nothing checked, nothing written).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Everything the items use, imported before the GPU is looked for (see the docstring).
import numpy as np
import pandas  # noqa: F401 - the scorer's tables
import pyarrow  # noqa: F401 - the scorer's Parquet
import torch
import transformers
import yaml  # noqa: F401 - the library's schema defaults
from bert_base import PAPER_K, model, workload
from harness_machine import REPO, commit
from harness_scorer import gpu_mfu
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast  # noqa: F401 - bert_base's, eagerly

from mlmia.models.loading import load_mlm  # noqa: F401 - the gpu-marked tests'
from mlmia.scoring.energy import score_samples

OK, FAILED, NO_GPU = 0, 1, 3
ITEMS = ("gpu-tests", "cuda-vs-cpu", "bf16", "fp32", "free-memory", "oom-halving")
#: bf16 autocast against the CPU's fp32 (tests/test_scoring.py's GPU_RTOL, GPU_ATOL); fp32 on CUDA
#: against fp32 on the CPU (TF32 off, torch's default): summation order only
BF16_RTOL, BF16_ATOL, FP32_ATOL = 0.02, 0.05, 1e-3
MFU_TARGET = 0.40
DEFAULT_OUT = REPO / "results" / "gpu_check.txt"


@dataclass
class Result:
    item: str
    ok: bool
    text: str
    seconds: float = 0.0

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.item}: {self.text} [{self.seconds:.0f} s]"


def no_gpu_reason() -> str | None:
    """Why this process cannot check the GPU path (one line), or None when it can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"no GPU here: torch {torch.__version__} is a CPU build (install a CUDA build); nothing checked, nothing written"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    return f"no GPU here: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device{seen}; nothing checked, nothing written"


def exit_code(results: list[Result]) -> int:
    return OK if results and all(r.ok for r in results) else FAILED


def gpu_test_files() -> list[Path]:
    """The test files that hold a gpu-marked test."""
    return sorted(p for p in (REPO / "tests").glob("test_*.py") if "pytest.mark.gpu" in p.read_text())


def pytest_counts(summary: str) -> dict[str, int]:
    """{'passed': 2, 'skipped': 1, ...} from pytest's last summary line."""
    return {word.rstrip("s") if word.startswith("error") else word: int(n)
            for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary)}  # fmt: skip


def gpu_tests(timeout: float = 240.0) -> Result:
    files = gpu_test_files()
    src = str(REPO / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", *map(str, files)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    counts = pytest_counts(lines[-1] if lines else "")
    ok = proc.returncode == 0 and counts.get("passed", 0) > 0 and not counts.get("skipped")
    names = ", ".join(p.relative_to(REPO).as_posix() for p in files)
    text = (f"{counts.get('passed', 0)} passed, {counts.get('skipped', 0)} skipped, {counts.get('failed', 0)} failed, "
            f"{counts.get('error', 0)} errors in {names} (pytest exit {proc.returncode})")  # fmt: skip
    if not ok:
        failing = [x for x in lines if x.startswith(("FAILED", "ERROR", "SKIPPED"))]
        text += "; " + " | ".join(failing[:3] or lines[-1:] or [proc.stderr.strip()[-300:]])
    return Result("gpu-tests", ok, text)


def speed_results(g: dict) -> list[Result]:
    """cuda-vs-cpu, bf16 and fp32 from one `harness_scorer.gpu_mfu` run."""
    runs = {x["precision"]: x for x in g["runs"]}
    bf16, fp32 = runs["bf16"], runs["fp32"]
    # every energy within atol + rtol |E| of the CPU's, |E| taken at its smallest (the strictest)
    bf16_bound = BF16_ATOL + BF16_RTOL * g["cpu_min_abs_energy"]
    close = bf16["max_abs_diff_vs_cpu_fp32"] <= bf16_bound and fp32["max_abs_diff_vs_cpu_fp32"] <= FP32_ATOL
    out = [
        Result("cuda-vs-cpu", close,
               f"{g['cpu_samples']} samples, K = {g['patterns']}: max |E_cuda - E_cpu| bf16 "
               f"{bf16['max_abs_diff_vs_cpu_fp32']:.2g} (bound {bf16_bound:.2g}), fp32 "
               f"{fp32['max_abs_diff_vs_cpu_fp32']:.2g} (bound {FP32_ATOL:g})"),
    ]  # fmt: skip
    for name, run, dtype in (("bf16", bf16, "bfloat16"), ("fp32", fp32, "float32")):
        ok = (run["energies_finite"] and run["dtype"] == dtype and run["batch_policy"].startswith("free memory")
              and run["oom_halvings"] == 0)  # fmt: skip
        if run["mfu"] is None:
            mfu = f"MFU not computed ({g['device']} not in bench/bert_base.py's GPU_PEAKS)"
        else:
            target = (
                f"; target {MFU_TARGET:.0%}: {'met' if run['mfu'] >= MFU_TARGET else 'not met'}"
                if name == "bf16"
                else ""
            )
            mfu = f"MFU {run['mfu']:.1%} of {run['peak_tflop_per_s']:.0f} TFLOP/s dense {name} peak{target}"
        out.append(Result(name, ok,
                          f"{run['samples']} samples, K = {run['patterns']}: {run['samples_per_s']:.0f} samples/s, "
                          f"{run['tflop_per_s']:.1f} useful TFLOP/s, {mfu}; dtype {run['dtype']}, batches up to "
                          f"{run['batch_size']} ({run['batch_policy']}), {run['oom_halvings']} halvings"))  # fmt: skip
    return out


def take_memory(nbytes: int, step: int = 256 * 2**20, tries: int = 16) -> torch.Tensor:
    """A plain device tensor of about `nbytes` (less by `step` per try where that much cannot be
    had in one piece); device memory, never managed memory."""
    for _ in range(tries):
        try:
            return torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            nbytes -= step
    raise RuntimeError(f"could not allocate a filler tensor in {tries} tries")


def memory_results(n: int, leave_gib: float) -> list[Result]:
    """free-memory and oom-halving: BERT-base-shaped bf16 scoring of `n` samples with all but
    `leave_gib` GiB of the free memory taken by a plain tensor, against the same run without it."""
    tok, df = workload(n, seed=1)
    mdl = model().to("cuda")
    kwargs = dict(patterns=PAPER_K, precision="bf16", return_stats=True)
    ref, ref_stats = score_samples(mdl, tok, df, **kwargs)
    copies = int(ref["patterns"].sum())
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free0, total = torch.cuda.mem_get_info()
    results = []
    filler = take_memory(free0 - int(leave_gib * 2**30))
    try:
        left = torch.cuda.mem_get_info()[0]
        held = f"{filler.numel() / 2**30:.1f} GiB held by a plain tensor, {left / 2**30:.2f} GiB left"
        for item, batch_size in (("free-memory", None), ("oom-halving", copies)):
            t0 = time.perf_counter()
            try:
                out, stats = score_samples(mdl, tok, df, batch_size=batch_size, **kwargs)
                diff = float(np.abs(out["energy"].to_numpy() - ref["energy"].to_numpy()).max())
                if item == "free-memory":
                    ok = stats.batch_policy.startswith("free memory") and stats.batch_size < ref_stats.batch_size
                    text = (f"{held}: batches up to {stats.batch_size} ({stats.batch_policy}) against "
                            f"{ref_stats.batch_size} ({ref_stats.batch_policy}) without it, {stats.oom_halvings} halvings")  # fmt: skip
                else:
                    ok = stats.oom_halvings >= 1 and stats.batch_size < copies
                    text = (f"{held}: one batch of all {copies} copies asked for, {stats.oom_halvings} halvings, "
                            f"batches up to {stats.batch_size}")  # fmt: skip
                ok = ok and diff <= BF16_ATOL
                text += f"; {n} samples, max |E - E_without| {diff:.2g} (bound {BF16_ATOL:g})"
            except Exception as exc:  # noqa: BLE001 - an item fails, the check goes on
                ok, text = False, f"{held}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            results.append(Result(item, ok, text, time.perf_counter() - t0))
    finally:
        del filler
        mdl.cpu()
        torch.cuda.empty_cache()
    after = torch.cuda.mem_get_info()[0]
    for r in results:
        r.text += f"; {after / 2**30:.1f} of {total / 2**30:.1f} GiB free after"
    return results


def header() -> str:
    props = torch.cuda.get_device_properties(0)
    return (f"# gpu_check {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit()}: "
            f"{props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"transformers {transformers.__version__}, python {sys.version.split()[0]}")  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the summary lines (default: %(default)s)")
    ap.add_argument("--items", nargs="+", choices=ITEMS, default=list(ITEMS), help="run only these")
    ap.add_argument("--samples", type=int, default=4000, help="bf16 samples (fp32: a quarter)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per precision, the best kept")
    ap.add_argument("--memory-samples", type=int, default=400)
    ap.add_argument("--leave-gib", type=float, default=2.0, help="GiB left free by the memory items' tensor")
    args = ap.parse_args(argv)
    reason = no_gpu_reason()
    if reason:
        print(reason, flush=True)
        return NO_GPU
    lines = [header()]
    results: list[Result] = []

    def record(new: list[Result]) -> None:
        results.extend(new)
        for r in new:
            print(r.line(), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines + [r.line() for r in results]) + "\n")

    print(lines[0], flush=True)
    wanted = set(args.items)
    steps = [({"gpu-tests"}, gpu_tests),
             ({"cuda-vs-cpu", "bf16", "fp32"},
              lambda: speed_results(gpu_mfu(args.repeats, args.samples, precisions=("bf16", "fp32")))),
             ({"free-memory", "oom-halving"}, lambda: memory_results(args.memory_samples, args.leave_gib))]  # fmt: skip
    for names, step in steps:
        if not names & wanted:
            continue
        t0 = time.perf_counter()
        try:
            out = step()
            out = [out] if isinstance(out, Result) else out
        except Exception as exc:  # noqa: BLE001 - every item of the step fails, the check goes on
            out = [Result(name, False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
                   for name in ITEMS if name in names]  # fmt: skip
        seconds = time.perf_counter() - t0
        for r in out:
            r.seconds = r.seconds or seconds
        record([r for r in out if r.item in wanted])
    print(f"wrote {args.out}", flush=True)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
