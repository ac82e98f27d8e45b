"""The benchmark harness's report: docs/benchmark_run.md from the measured results, each figure
against its target, and the results as JSON beside it."""

from __future__ import annotations

import json
from pathlib import Path

from authors_loop import K
from bert_base import cpu_markdown
from harness_scorer import HIDDEN, IMPORT_FLOOR, LAYERS, VOCAB

from mlmia.report.markdown import markdown_table


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
    lines += ["", "## (g) GPU", ""] + gpu_lines(r.get("gpu"))
    lines += ["", "## (h) BERT-base-shaped scoring on the CPU", ""]
    lines += cpu_markdown(r["bert_base_cpu"]) if r.get("bert_base_cpu") else ["Not measured in this run."]
    met = [[t, v, "yes" if ok else "no"] for t, v, ok in targets(r)]
    lines += ["", "## Targets", "", markdown_table(["target", "measured", "met"], met)]
    return "\n".join(lines) + "\n"


GPU_COLUMNS = ["precision", "samples", "samples/s", "useful TFLOP/s", "dense peak TFLOP/s", "MFU", "batches",
               "max abs energy diff vs CPU fp32"]  # fmt: skip


def gpu_lines(g: dict | None) -> list[str]:
    """Section (g): one row per precision of `harness_scorer.gpu_mfu`, or why there is none."""
    if not g:
        return ["No CUDA device in this run: not measured (`make gpu-check` on a machine with one)."]
    rows = [[x["precision"], x["samples"], f"{x['samples_per_s']:.0f}", f"{x['tflop_per_s']:.1f}",
             f"{x['peak_tflop_per_s']:.0f}" if x["peak_tflop_per_s"] else "card not listed",
             f"{x['mfu']:.0%}" if x["mfu"] is not None else "-", x["batch_policy"],
             f"{x['max_abs_diff_vs_cpu_fp32']:.2g}"] for x in g["runs"]]  # fmt: skip
    return [
        f"{g['device']} (torch {g['torch']}, CUDA {g['cuda']}): BERT-base-shaped scoring, K = {g['patterns']}; "
        f"energies of the first {g['cpu_samples']} samples against the CPU's fp32 ones.",
        "",
        markdown_table(GPU_COLUMNS, rows),
    ]


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
    bf16 = next((x for x in (r.get("gpu") or {}).get("runs", []) if x["precision"] == "bf16"), None)
    if bf16 is not None and bf16["mfu"] is not None:
        out.append(("BERT-base >= 40% MFU in bf16 on an H100/H200", f"{bf16['mfu']:.0%} ({r['gpu']['device']})",
                    bf16["mfu"] >= 0.4))  # fmt: skip
    dr = r.get("default_run") or {}
    if "run" in dr:
        out.append(("default run <= 10 min wall", f"{dr['run']['wall_s'] / 60:.1f} min", dr["run"]["wall_s"] <= 600))
    if "table2_alpha_rerun" in dr:
        out.append(("one-table rerun after an alpha change < 20 s", f"{dr['table2_alpha_rerun']['wall_s']:.1f} s",
                    dr["table2_alpha_rerun"]["wall_s"] < 20))  # fmt: skip
    return out


def save(r: dict, out: Path) -> None:
    """The results so far as JSON beside the Markdown (a later step that fails loses nothing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(r, indent=1, default=float))
