"""The GPU check (bench/gpu_check.py, `make gpu-check`) on a machine without a GPU: its refusal and
exit code, its import closure without jsonschema, snakemake and opacus (a bare GPU machine has
none), and its verdicts on given figures. What it checks on a GPU is not run here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import bert_base
import gpu_check
import harness_report
import pytest
import yaml
from workflow_helpers import REPO

#: the modules a bare GPU machine lacks: blocked in a child process by a meta-path finder
BLOCKED = ("jsonschema", "snakemake", "opacus")
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}  # a refusal on a machine with a GPU too


@pytest.fixture
def blocker(tmp_path):
    """A folder whose sitecustomize.py makes importing any of BLOCKED raise ImportError."""
    folder = tmp_path / "block"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys

        class _Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked here as on a bare GPU machine: " + name)
                return None

        sys.meta_path.insert(0, _Block())
    """))  # fmt: skip
    return folder


def _run(cmd, pythonpath=(), **env):
    paths = [str(p) for p in pythonpath] + [str(REPO / "src")]
    full = {**os.environ, **NO_GPU_ENV, "PYTHONPATH": os.pathsep.join(paths), **env}
    return subprocess.run(cmd, cwd=REPO, env=full, capture_output=True, text=True, timeout=300)


def test_the_blocker_blocks(blocker):
    """Without this, the two tests below could pass with the modules imported after all."""
    for name in BLOCKED:
        proc = _run([sys.executable, "-c", f"import {name}"], pythonpath=[blocker])
        assert proc.returncode == 1 and f"blocked here as on a bare GPU machine: {name}" in proc.stderr


def test_without_a_gpu_it_refuses_in_one_line_after_importing_everything_without_the_blocked(blocker, tmp_path):
    out = tmp_path / "gpu_check.txt"
    proc = _run([sys.executable, "bench/gpu_check.py", "--out", str(out)], pythonpath=[blocker])
    assert proc.returncode == gpu_check.NO_GPU == 3, proc.stderr[-2000:]
    assert proc.stderr == ""  # no traceback, no warning
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("no GPU here: torch "), lines
    assert lines[0].endswith("nothing checked, nothing written")
    assert not out.exists()


def test_the_gpu_marked_tests_collect_without_the_blocked_modules(blocker):
    files = gpu_check.gpu_test_files()
    assert REPO / "tests" / "test_scoring.py" in files
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        *map(str, files),
    ]
    proc = _run(cmd, pythonpath=[blocker])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    collected = [x for x in proc.stdout.splitlines() if "::" in x]
    assert "tests/test_scoring.py::test_gpu_autocast_close_to_cpu_oracle[masked]" in collected


def test_make_gpu_check_runs_the_script_with_the_venvs_python_and_refuses(tmp_path):
    # under `make test` the outer make's MAKEFLAGS and MAKELEVEL would make this one a sub-make
    # that prints "Entering/Leaving directory" lines around the recipe
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dry = subprocess.run(["make", "-n", "--no-print-directory", "gpu-check", f"GPU_CHECK_ARGS=--out {tmp_path / 'x.txt'}"],
                         cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    command = dry[-1].split()
    assert command[:2] == [".venv/bin/python", "bench/gpu_check.py"] and command[2:] == [
        "--out",
        str(tmp_path / "x.txt"),
    ]
    # the recipe as make would run it, with this suite's interpreter (the venv's under `make test`)
    proc = _run([sys.executable, *command[1:]])
    assert proc.returncode == 3 and proc.stdout.startswith("no GPU here: ") and proc.stdout.count("\n") == 1
    assert not (tmp_path / "x.txt").exists()


def test_the_gpu_tests_item_fails_when_they_skip(monkeypatch):
    """On this machine the gpu-marked tests skip (no CUDA device): the item must say FAIL, not PASS."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    r = gpu_check.gpu_tests()
    assert not r.ok and r.item == "gpu-tests"
    assert r.text.startswith("0 passed, 2 skipped, 0 failed, 0 errors in tests/test_scoring.py (pytest exit 0)")
    assert r.line().startswith("FAIL gpu-tests: 0 passed, 2 skipped")


def test_pytest_summary_counts():
    assert gpu_check.pytest_counts("2 passed, 69 deselected in 5.12s") == {"passed": 2}
    assert gpu_check.pytest_counts("1 failed, 1 passed, 1 skipped, 2 errors in 3s") == {
        "failed": 1, "passed": 1, "skipped": 1, "error": 2}  # fmt: skip
    assert gpu_check.pytest_counts("1 error in 0.5s") == {"error": 1}


def _gpu(device="NVIDIA H100 80GB HBM3", **bf16):
    """What harness_scorer.gpu_mfu returns, with bf16's fields replaced by `bf16`."""
    run = {"samples": 4000, "patterns": 10, "samples_per_s": 3000.0, "tflop_per_s": 220.0, "batch_size": 4000,
           "batch_policy": "free memory 76.1 GiB", "oom_halvings": 0, "energies_finite": True}  # fmt: skip
    runs = [
        {**run, "precision": "bf16", "dtype": "bfloat16", "max_abs_diff_vs_cpu_fp32": 0.01, **bf16},
        {**run, "precision": "fp32", "dtype": "float32", "samples": 1000, "tflop_per_s": 30.0,
         "max_abs_diff_vs_cpu_fp32": 2e-5},
    ]  # fmt: skip
    for x in runs:
        x["peak_tflop_per_s"] = bert_base.gpu_peak(device, x["precision"])
        x["mfu"] = x["tflop_per_s"] / x["peak_tflop_per_s"] if x["peak_tflop_per_s"] else None
    return {"device": device, "torch": "2.11.0", "cuda": "12.8", "patterns": 10, "cpu_samples": 50,
            "cpu_min_abs_energy": 10.0, "runs": runs}  # fmt: skip


def _verdicts(g):
    return {r.item: r for r in gpu_check.speed_results(g)}


def test_speed_items_judge_energies_dtype_and_batches_not_speed():
    good = _verdicts(_gpu())
    assert [r.ok for r in good.values()] == [True, True, True] and list(good) == ["cuda-vs-cpu", "bf16", "fp32"]
    assert "MFU 22.2% of 989 TFLOP/s dense bf16 peak; target 40%: not met" in good["bf16"].text  # slow, still PASS
    assert "MFU 44.8% of 67 TFLOP/s dense fp32 peak;" in good["fp32"].text
    assert "bf16 0.01 (bound 0.25), fp32 2e-05 (bound 0.001)" in good["cuda-vs-cpu"].text
    assert not _verdicts(_gpu(max_abs_diff_vs_cpu_fp32=0.26))["cuda-vs-cpu"].ok  # 0.05 + 0.02 x 10
    assert not _verdicts(_gpu(dtype="float16"))["bf16"].ok
    assert not _verdicts(_gpu(batch_policy="token budget 65536"))["bf16"].ok
    assert not _verdicts(_gpu(oom_halvings=1))["bf16"].ok
    assert not _verdicts(_gpu(energies_finite=False))["bf16"].ok
    unknown = _verdicts(_gpu(device="NVIDIA GeForce RTX 4090"))
    assert unknown["bf16"].ok and "MFU not computed (NVIDIA GeForce RTX 4090 not in" in unknown["bf16"].text


def test_peaks_by_card_name():
    peak = bert_base.gpu_peak
    assert peak("NVIDIA H100 80GB HBM3", "bf16") == 989.4 and peak("NVIDIA H100 80GB HBM3", "fp32") == 66.9
    assert peak("NVIDIA H100 PCIe", "bf16") == 756.0 and peak("NVIDIA H100 NVL", "bf16") == 835.0
    assert peak("NVIDIA H200", "bf16") == 989.4 and peak("NVIDIA H200 NVL", "fp32") == 60.0
    assert peak("NVIDIA A100-SXM4-80GB", "bf16") == 312.0 and peak("NVIDIA A100 80GB PCIe", "fp32") == 19.5
    assert peak("NVIDIA L4", "bf16") == 121.0
    assert peak("NVIDIA L40S", "bf16") is None and peak("NVIDIA GeForce RTX 4090", "bf16") is None


def test_exit_codes():
    passed, failed = gpu_check.Result("a", True, ""), gpu_check.Result("b", False, "")
    assert gpu_check.exit_code([passed, passed]) == 0
    assert gpu_check.exit_code([passed, failed]) == 1
    assert gpu_check.exit_code([]) == 1
    assert (gpu_check.OK, gpu_check.FAILED, gpu_check.NO_GPU) == (0, 1, 3)
    doc = (REPO / "docs" / "testing.md").read_text()
    assert "exit code 3" in doc and "`make gpu-check`" in doc and "PYTHONPATH=src python3 bench/gpu_check.py" in doc


def test_the_bert_base_workload_runs_at_the_papers_k():
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    assert bert_base.PAPER_K == paper["scoring"]["patterns"] == 10
    assert (bert_base.LAYERS, bert_base.HIDDEN, bert_base.VOCAB) == (12, 768, 30522)


def test_the_benchmark_report_writes_sections_g_and_h():
    assert harness_report.gpu_lines(None)[0].startswith("No CUDA device in this run: not measured")
    g = harness_report.gpu_lines(_gpu())
    assert g[0].startswith("NVIDIA H100 80GB HBM3 (torch 2.11.0, CUDA 12.8): BERT-base-shaped scoring, K = 10")
    assert "| bf16 | 4000 | 3000 | 220.0 | 989 | 22% | free memory 76.1 GiB | 0.01 |" in g[-1]
    row = {"precision": "fp32", "samples": 16, "seconds": 14.2, "samples_per_s": 1.13, "tflop_per_s": 0.09,
           "roofline_gflop_per_s": 190.0, "roofline_share": 0.47, "max_abs_diff_vs_first": 0.0}  # fmt: skip
    h = bert_base.cpu_markdown({"patterns": 10, "threads": 2, "repeats": 1, "rows": [row], "peak_rss_mib": 1206.6})
    assert "| fp32 | 16 | 14.2 | 1.13 | 90 | 190 | 47% | 0 |" in h[2]
    assert h[-1] == "Peak RSS of the process (model, imports, every precision): 1207 MiB."
