"""The workflow on a real one-node SLURM cluster through profiles/slurm gives the local run's tables.

The cluster (tests/slurm_cluster.py: Debian's slurm-wlm and munge, installed here with
apt-get when missing, all state in a temp dir) runs config/ci.yaml's targets (`slurm_run.TARGETS`) with the SLURM
profile; every value of each of their results/ci/tables/*.csv must equal the local `ci_run`'s
(training and scoring are seeded, single-threaded on CPU, so bit-identical). The targets hold
every kind of job the default DAG has but the renderers of the other tables (corpora,
tokenizer, three trainings, both energy kinds, attack tables and metrics, the exposure
features, ROC curves, a figure): 37 jobs, not the whole DAG's 114, whose job start-ups on a
2-core cluster cost the suite ten minutes for nothing more that SLURM could get wrong. The profile's resource
requests are checked on what slurmctld recorded: the scoring jobs asked for a GPU, no other
job did. docs/slurm.md describes the flags (tests/slurm_run.py). The run starts in a thread as
soon as pytest has collected this file's tests (it is bound by the cluster's latency, not by
CPU, so it overlaps the rest of the suite); the tests here wait for what is left of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from slurm_cluster import SlurmUnavailable
from slurm_run import STASH_KEY, BackgroundSlurmRun
from workflow_helpers import SNAKEMAKE, copy_workflow, write_config

TABLES = ("table2.csv", "table7.csv", "table_zoo.csv")


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
def background_slurm_run(request, tmp_path_factory):
    """The run conftest started at collection (`slurm_run.BackgroundSlurmRun`), or one
    started now where it did not (a test selected some other way)."""
    started = request.config.stash.get(STASH_KEY, None)
    if started is None:
        started = BackgroundSlurmRun(tmp_path_factory.mktemp("slurm"))
        request.addfinalizer(started.stop)
    return started


@pytest.fixture(scope="session")
def slurm_packages(background_slurm_run):
    """Debian's slurm-wlm and munge, installed with apt-get when a daemon is missing (the
    background run's first step); skips (the reason printed, and in pytest's summary with -rs)
    where they cannot be. Session scope so that it comes before the session's local `ci_run`
    (~4 min), not after."""
    if not background_slurm_run.installed():
        exc = background_slurm_run.unavailable
        print(f"skipping the SLURM test: {exc}")
        pytest.skip(f"SLURM packages unavailable: {exc}")


@pytest.fixture(scope="module")
def slurm_run(slurm_packages, background_slurm_run):
    """config/ci.yaml's `TARGETS` through profiles/slurm; (workdir, the jobs slurmctld recorded)."""
    workdir, jobs, returncode, output, seconds = background_slurm_run.result()
    print(f"SLURM run: {seconds:.0f} s, return code {returncode}")
    assert returncode == 0, f"snakemake on SLURM failed ({returncode}):\n{output[-9000:]}"
    return workdir, jobs


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
