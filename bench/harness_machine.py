"""The benchmark harness's machine facts and timers: a timed child process (wall, CPU, peak RSS),
best-of-n, the CPU's model and native bf16, the matmul roofline (section (a)), the commit."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


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


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
