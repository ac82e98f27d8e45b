"""The workflow on a real one-node SLURM cluster through profiles/slurm gives the local run's tables.

The cluster (tests/slurm_cluster.py: Debian's slurm-wlm and munge, installed here with
apt-get when missing, all state in a temp dir) runs config/ci.yaml's `TARGETS` with the SLURM
profile; every value of each of their results/ci/tables/*.csv must equal the local `ci_run`'s
(training and scoring are seeded, single-threaded on CPU, so bit-identical). The targets hold
every kind of job the default DAG has but the renderers of the other tables (corpora,
tokenizer, three trainings, both energy kinds, attack tables and metrics, the exposure
features, ROC curves, a figure): 37 jobs, not the whole DAG's 114, whose job start-ups on a
2-core cluster cost the suite ten minutes for nothing more that SLURM could get wrong. The profile's resource
requests are checked on what slurmctld recorded: the scoring jobs asked for a GPU, no other
job did. docs/slurm.md describes the flags below.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from slurm_cluster import SlurmCluster, SlurmUnavailable, ensure_installed
from workflow_helpers import SNAKEMAKE, copy_workflow, write_config

RUN_TIMEOUT = 1200  # seconds; a guard against a hung run, not a timing check
#: what the cluster runs: Table 2, the exposure features' Table 7, the zoo's loss-only table, Figure 4
TARGETS = ("table2", "table7", "table_zoo", "fig4")
TABLES = ("table2.csv", "table7.csv", "table_zoo.csv")

# Flags the test adds to the profile. For a machine with 2 cores that runs ~110 jobs of a
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
    # ~70 attack/metrics/render jobs of a second each: one SLURM job (and one Snakemake
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


def run_on_slurm(cluster: SlurmCluster, workdir: Path, *args: str, timeout: int = RUN_TIMEOUT):
    """Snakemake with the SLURM profile in workdir; (return code, output, seconds).

    Stops Snakemake with SIGINT (it then cancels its SLURM jobs) on a timeout, on Ctrl-C,
    or when a cluster daemon dies under it (it would wait for its jobs forever)."""
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


def table_differences(expected: Path, actual: Path) -> list[str]:
    """Every difference between the `TABLES` of two workflow directories (`actual` must hold
    exactly those)."""
    names = sorted(TABLES)
    problems = []
    if names != sorted(p.name for p in (actual / "results/ci/tables").glob("*.csv")):
        problems.append(
            f"table files differ: {names} vs {sorted(p.name for p in (actual / 'results/ci/tables').glob('*.csv'))}"
        )
        names = [name for name in names if (actual / "results/ci/tables" / name).is_file()]
    for name in names:
        a = pd.read_csv(expected / "results/ci/tables" / name)
        b = pd.read_csv(actual / "results/ci/tables" / name)
        if list(a.columns) != list(b.columns) or a.shape != b.shape:
            problems.append(f"{name}: columns/shape {list(a.columns)} {a.shape} vs {list(b.columns)} {b.shape}")
            continue
        for column in a.columns:
            same = (a[column] == b[column]) | (a[column].isna() & b[column].isna())
            if not same.all():
                rows = a.index[~same][:5].tolist()
                problems.append(
                    f"{name}.{column}: {int((~same).sum())} of {len(a)} rows differ, e.g. rows {rows}: "
                    f"{a.loc[rows, column].tolist()} vs {b.loc[rows, column].tolist()}"
                )
    return problems


@pytest.fixture(scope="session")
def slurm_packages():
    """Debian's slurm-wlm and munge, installed with apt-get when a daemon is missing; skips
    (the reason printed, and in pytest's summary with -rs) where they cannot be. Session
    scope so that it comes before the session's local `ci_run` (~4 min), not after."""
    try:
        ensure_installed()
    except SlurmUnavailable as exc:
        print(f"skipping the SLURM test: {exc}")
        pytest.skip(f"SLURM packages unavailable: {exc}")


@pytest.fixture(scope="module")
def cluster(slurm_packages, tmp_path_factory):
    # 4 CPUs on 2 cores: jobs spend much of their life starting up and waiting on status
    # checks; 2 fake GPUs so the scoring jobs do not form one serial chain
    with SlurmCluster(tmp_path_factory.mktemp("slurm"), cpus=4, gpus=2) as running:
        yield running


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    """config/ci.yaml through profiles/slurm; (workdir, the jobs slurmctld recorded)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm_run"))
    write_config(workdir, "ci.yaml")
    returncode, output, seconds = run_on_slurm(cluster, workdir, "--configfile", "test_config.yaml", "--", *TARGETS)
    print(f"SLURM run: {seconds:.0f} s, return code {returncode}")
    assert returncode == 0, f"snakemake on SLURM failed ({returncode}):\n{output[-6000:]}\n{cluster.logs()}"
    return workdir, cluster.jobs()


@pytest.mark.slurm
def test_slurm_run_equals_local_run(slurm_packages, slurm_run, ci_run):
    workdir, _ = slurm_run
    assert not (differences := table_differences(ci_run, workdir)), "\n".join(differences)


@pytest.mark.slurm
def test_slurm_jobs_ask_for_what_the_profile_says(slurm_run):
    workdir, jobs = slurm_run
    assert jobs and {job["JobState"] for job in jobs} == {"COMPLETED"}
    # the plugin names each job after its rule (or group) in the comment
    by_kind = {}
    for job in jobs:
        by_kind.setdefault(job["Comment"].split("_wildcards_")[0], []).append(job)
    assert len(by_kind["rule_score_shard"]) == 4  # Base and the domain reference, masked and normalized
    for job in by_kind.pop("rule_score_shard"):
        assert job["TresPerJob"] == "gres:gpu:1", job
        assert job["TimeLimit"] == "02:00:00" and job["NumCPUs"] == "1", job
        assert job["MinMemoryNode"] == "3000M", job  # the rule's own mem_mb
    for job in [j for kind in by_kind.values() for j in kind]:
        assert "gpu" not in job.get("TresPerJob", "") and "gpu" not in job.get("TRES", ""), job
    assert {j["TimeLimit"] for j in by_kind["rule_train_model"]} == {"12:00:00"}
    assert {j["TimeLimit"] for j in by_kind["rule_build_corpora"]} == {"00:30:00"}
    assert {j["MinMemoryNode"] for j in by_kind["rule_build_corpora"]} == {"2000M"}
    assert set(by_kind) >= {"rule_train_model", "rule_join_scores", "rule_exposure", "rule_select_samples"}
    assert (workdir / "results/ci/figures/fig4.png").read_bytes()[:4] == b"\x89PNG"
    assert any(kind.startswith("rule_post") for kind in by_kind)  # group jobs: rule_<group>_<rules>


def test_profile_resources_dry_run(tmp_path):
    """Without a cluster: what the profile makes each rule ask for (Snakemake's dry run)."""
    workdir = copy_workflow(tmp_path)
    write_config(workdir, "ci.yaml")
    result = subprocess.run(
        [SNAKEMAKE, "--workflow-profile", "profiles/slurm", "--configfile", "test_config.yaml", "-n"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    resources, rule = {}, None
    for line in result.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
        elif rule and line.strip().startswith("resources:"):
            resources.setdefault(rule, set()).add(line.split(":", 1)[1].strip())
    assert set(resources) >= {"score_shard", "train_model", "attack_table", "build_corpora"}
    for rule, lines in resources.items():
        for line in lines:
            assert ("gpu=1" in line) == (rule == "score_shard"), (rule, line)
            assert "runtime=" in line and "mem_mb=" in line, (rule, line)
    assert all("runtime=120" in line and "mem_mb=3000" in line for line in resources["score_shard"])
    assert all("runtime=720" in line for line in resources["train_model"])


def test_missing_packages_are_installed_with_apt_get(monkeypatch):
    """Without a cluster: the set-up installs slurm-wlm and munge with apt-get when a daemon
    is missing, and says why when it cannot (the SLURM tests then skip with that reason)."""
    import slurm_cluster

    calls, state = [], {"installed": False, "returncode": 0}

    def which(name, *args, **kwargs):
        if name in slurm_cluster.DAEMONS:
            return f"/usr/sbin/{name}" if state["installed"] else None
        return f"/usr/bin/{name}"

    def run(cmd, **kwargs):
        calls.append(list(cmd))
        assert kwargs["env"]["DEBIAN_FRONTEND"] == "noninteractive" and kwargs["timeout"] > 0
        if cmd[:2] == ["apt-get", "install"] and state["returncode"] == 0:
            state["installed"] = True
        return subprocess.CompletedProcess(cmd, state["returncode"], "", "E: Unable to locate package slurm-wlm")

    monkeypatch.setattr(slurm_cluster.shutil, "which", which)
    monkeypatch.setattr(slurm_cluster.subprocess, "run", run)
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    slurm_cluster.ensure_installed()
    assert calls == [
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"],
    ]
    calls.clear()
    slurm_cluster.ensure_installed()  # all there now: nothing to do
    assert calls == []

    state.update(installed=False, returncode=100)
    with pytest.raises(SlurmUnavailable, match="apt-get update failed .100.: E: Unable to locate"):
        slurm_cluster.ensure_installed()
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    with pytest.raises(SlurmUnavailable, match="no root apt-get"):
        slurm_cluster.ensure_installed()


def test_slurm_tests_skip_with_the_reason(tmp_path):
    """Where the packages cannot be installed, the SLURM tests skip and pytest prints why."""
    plugin = tmp_path / "no_slurm_here.py"
    plugin.write_text(
        "import slurm_cluster\n\n\n"
        "def pytest_configure(config):\n"
        "    def unavailable(timeout=600):\n"
        "        raise slurm_cluster.SlurmUnavailable('apt-get install failed (100): no network here')\n"
        "    slurm_cluster.ensure_installed = unavailable\n"
    )
    tests = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(tests)]))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no_slurm_here",
            "-p",
            "no:cacheprovider",
            "-m",
            "slurm",
            "-q",
            "-rs",
            str(tests / "test_slurm.py"),
        ],
        cwd=tests.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 skipped" in result.stdout, result.stdout[-3000:]  # at once: no local run first
    assert (
        "SKIPPED" in result.stdout
        and "SLURM packages unavailable: apt-get install failed (100): no network here" in result.stdout
    )
