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
  (g) GPU: BERT-base-shaped scoring at the paper's K in bf16, samples/s and MFU against the card's
      dense peak, when a CUDA device is present (else stated as not measured; `make gpu-check`
      checks the whole GPU path);
  (h) BERT-base-shaped scoring on the CPU at the paper's K (`bench/bert_base.py` as a process):
      samples/s, share of the roofline, peak RSS.

The models of (b)-(f) are random BertForMaskedLM of the default world's Base shape (2 layers x
128, 3k WordPiece vocabulary); those of (g) and (h) BERT-base's shape (12 x 768, 30522);
timings are wall clock, best of `--repeats`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_scoring import build_model
from harness_machine import REPO, commit, cpu_has_native_bf16, cpu_model, roofline
from harness_report import markdown, save
from harness_scorer import (
    HIDDEN,
    LAYERS,
    VOCAB,
    bert_base_cpu,
    gpu_mfu,
    loops,
    memory,
    save_model,
    scorer_steady_state,
    training_throughput,
    whole_process,
    workload,
)
from harness_stages import default_run, rerun_checks, stage_table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: every core)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=2000, help="steady-state samples")
    ap.add_argument("--loop-samples", type=int, default=50, help="samples for the authors' loop and the oracle")
    ap.add_argument("--process-sizes", type=int, nargs="+", default=[1, 200, 2000])
    ap.add_argument("--memory-sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    ap.add_argument("--bert-base-samples", type=int, default=16, help="samples of section (h), BERT-base on the CPU")
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
        r["bert_base_cpu"] = bert_base_cpu(work, args.bert_base_samples, args.repeats, args.threads)
        print("bert-base cpu", [(x["precision"], round(x["samples_per_s"], 2)) for x in r["bert_base_cpu"]["rows"]])
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


if __name__ == "__main__":
    main()
