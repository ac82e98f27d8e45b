"""The SLURM test's workflow run, started in a thread as soon as pytest has collected a test
that needs it (`conftest.pytest_collection_finish`).

The run is bound by latency, not by CPU: each wave of the DAG waits for sbatch, the job
step's two Snakemake start-ups and the plugin's status checks, and its cores sit idle
meanwhile. Started at collection, it overlaps the CPU-bound part of the suite (as the
default run does) instead of holding the suite for its whole length when its test's turn
comes; `slurm_run` then only waits for what is left of it.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import slurm_cluster
from workflow_helpers import SNAKEMAKE, copy_workflow, write_config

RUN_TIMEOUT = 2400  # seconds; a guard against a hung run (it shares the machine with the suite), not a timing check
#: what the cluster runs: Table 2, the exposure features' Table 7, the zoo's loss-only table, Figure 4
TARGETS = ("table2", "table7", "table_zoo", "fig4")

# Flags the test adds to the profile. For a machine with 2 cores that runs ~40 jobs of a
# few seconds each, every second of latency counts:
TEST_FLAGS = [
    # no accounting database here: squeue sees finished jobs for MinJobAge seconds
    "--slurm-status-command",
    "squeue",
    # first check after 1 s, and 1 s again after any job finished (the plugin adds 10 s
    # per check that saw none finish)
    "--seconds-between-status-checks",
    "1",
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--latency-wait",
    "10",
    "--scheduler",
    "greedy",  # the ILP scheduler costs the main process seconds per round
    # the attack/metrics/render jobs of a second each: one SLURM job (and one Snakemake
    # job-step start-up) per 7 of them. --cores 1 keeps each group job at 1 CPU (a group
    # asks for the sum over its parallel jobs, capped by --cores).
    "--cores",
    "1",
    "--groups",
    "attack_table=post",
    "attack_metrics=post",
    "roc_curve=post",
    "render_table=render",
    "render_figure=render",
    "--group-components",
    "post=7",
    "render=7",
]


def run_on_slurm(
    cluster: slurm_cluster.SlurmCluster,
    workdir: Path,
    *args: str,
    timeout: int = RUN_TIMEOUT,
    stop: threading.Event | None = None,
):
    """Snakemake with the SLURM profile in workdir; (return code, output, seconds).

    Stops Snakemake with SIGINT (it then cancels its SLURM jobs) on a timeout, when `stop`
    is set (the session ends: Ctrl-C, -x), or when a cluster daemon dies under it (it would
    wait for its jobs forever)."""
    cmd = [SNAKEMAKE, "--workflow-profile", "profiles/slurm", *TEST_FLAGS, *args]
    log_path = workdir / "slurm_run.log"
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT)
        problem = None
        try:
            while proc.poll() is None and problem is None:
                time.sleep(1)
                if time.monotonic() - start > timeout:
                    problem = f"timed out after {timeout} s"
                elif stop is not None and stop.is_set():
                    problem = "stopped: the test session ended first"
                elif dead := cluster.dead():
                    problem = f"SLURM daemons exited during the run: {dead}"
        finally:
            if proc.poll() is None:  # a problem, or an exception (Ctrl-C) in the loop
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    output = log_path.read_text()
    if problem:
        raise AssertionError(f"snakemake on SLURM: {problem}\n{output[-6000:]}\n{cluster.logs()}")
    return proc.returncode, output, time.monotonic() - start


#: where conftest keeps the run it started at collection
STASH_KEY = pytest.StashKey["BackgroundSlurmRun"]()


class BackgroundSlurmRun:
    """In a thread: install the packages (`slurm_cluster.ensure_installed`), start a cluster
    under `root` and run config/ci.yaml's `TARGETS` on it in a fresh copy of the workflow.

    `installed()` says whether the packages are there (False: `unavailable` holds why);
    `result()` waits for the run and returns (workdir, the jobs slurmctld recorded, the
    return code, the output, seconds), or raises what the thread raised; `stop()` ends the
    run and the cluster (the session's end)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.cluster: slurm_cluster.SlurmCluster | None = None
        self.unavailable: slurm_cluster.SlurmUnavailable | None = None
        self._installed = threading.Event()
        self._stop = threading.Event()
        self._outcome: tuple | BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="slurm-run", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            try:
                slurm_cluster.ensure_installed()  # looked up at call time: a test may replace it
            except slurm_cluster.SlurmUnavailable as exc:
                self.unavailable = exc
                return
            finally:
                self._installed.set()
            # 4 CPUs on 2 cores: jobs spend much of their life starting up and waiting on status
            # checks; 2 fake GPUs so the scoring jobs do not form one serial chain
            self.cluster = slurm_cluster.SlurmCluster(self.root / "cluster", cpus=4, gpus=2)
            self.cluster.start()
            (self.root / "workflow").mkdir()
            workdir = copy_workflow(self.root / "workflow")
            write_config(workdir, "ci.yaml")
            returncode, output, seconds = run_on_slurm(
                self.cluster, workdir, "--configfile", "test_config.yaml", "--", *TARGETS, stop=self._stop
            )
            self._outcome = (workdir, self.cluster.jobs(), returncode, output + "\n" + self.cluster.logs(), seconds)
        except BaseException as exc:  # handed to the test that waits for it
            self._outcome = exc
        finally:
            if self.cluster is not None:
                self.cluster.stop()  # its jobs are read: the suite gets the cores back

    def installed(self) -> bool:
        self._installed.wait()
        return self.unavailable is None

    def result(self, timeout: float = RUN_TIMEOUT + 300) -> tuple:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"the SLURM run did not end within {timeout} s")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        if self.cluster is not None:
            self.cluster.stop()
