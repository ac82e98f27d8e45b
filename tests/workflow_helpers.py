"""Run the workflow in a temporary copy of the repository."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "rules", "workflow", "config", "envs", "profiles", "report", "resources")
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def paper_scores_root() -> Path:
    """The authors' published scores: the folder $MLMIA_PAPER_SCORES names, else the copy the
    repository carries (resources/paper_scores)."""
    root = Path(os.environ.get("MLMIA_PAPER_SCORES") or REPO / "resources" / "paper_scores").resolve()
    assert root.is_dir(), f"the authors' published scores are expected at {root} (MLMIA_PAPER_SCORES)"
    return root


def copy_workflow(dest: Path) -> Path:
    for part in WORKFLOW_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / part)
    return dest


def write_config(dest: Path, base: str, **overrides) -> Path:
    """A copy of config/<base> with nested keys (a__b=value) changed, as dest/test_config.yaml."""
    path = dest / "test_config.yaml"
    shutil.copy2(REPO / "config" / base, path)
    edit_yaml(path, **overrides)
    return path


def start_snakemake(workdir: Path, *args: str, env: dict | None = None, log: Path | None = None) -> subprocess.Popen:
    """Snakemake on 2 cores in `workdir`, started in its own process group; its output goes
    to pipes, or to the file `log` for a run nobody reads while it runs (a full pipe would
    stall it)."""
    out = subprocess.PIPE if log is None else open(log, "w")  # noqa: SIM115 (the child holds it)
    try:
        return subprocess.Popen(
            [SNAKEMAKE, "--cores", "2", *args],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.PIPE if log is None else subprocess.STDOUT,
            text=True,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,
        )
    finally:
        if log is not None:
            out.close()


def wait_snakemake(
    process: subprocess.Popen, check: bool = True, timeout: int = 1200, log: Path | None = None
) -> subprocess.CompletedProcess:
    """Wait for a started Snakemake. `timeout` is a guard against a hung run, not a timing
    check (a busy machine can take several times as long); on expiry the whole process group
    is killed, so that no job outlives the test."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        stdout = log.read_text() if log is not None else stdout
        raise AssertionError(f"snakemake ran past {timeout} s:\n{stdout[-3000:]}\n{(stderr or '')[-3000:]}") from None
    if log is not None:
        stdout, stderr = "", log.read_text()
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
    return result


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict | None = None, timeout: int = 1200
) -> subprocess.CompletedProcess:
    """Snakemake on 2 cores in `workdir`, waited for (`wait_snakemake`)."""
    return wait_snakemake(start_snakemake(workdir, *args, env=env), check=check, timeout=timeout)


def planned_jobs(workdir: Path, *args: str, env: dict | None = None) -> list[tuple[str, str]]:
    """(rule, output line) of every job a dry run would execute."""
    result = run_snakemake(workdir, "-n", *args, env=env)
    jobs, rule = [], None
    for line in result.stdout.splitlines():
        stripped = line.strip()
        if line.startswith("rule ") and stripped.endswith(":"):
            rule = stripped[5:-1]
        elif line.startswith("localrule ") and stripped.endswith(":"):
            rule = stripped[10:-1]
        elif rule and stripped.startswith("output:"):
            jobs.append((rule, stripped[len("output:") :].strip()))
            rule = None
        elif rule and stripped.startswith("jobid:") and rule in ("all",):
            jobs.append((rule, ""))
            rule = None
    return jobs


def edit_yaml(path: Path, **changes) -> None:
    """Set nested keys (a__b__c=value) in a YAML file; a section the file leaves to its defaults
    is written in."""
    data = yaml.safe_load(path.read_text())
    for dotted, new in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = new
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def start_config(workdir: Path, base: str, *targets: str) -> tuple[subprocess.Popen, Path]:
    """The workflow on config/<base> (its named `targets`, or everything) started in a fresh copy
    of the repository at `workdir`; (the process, its log file)."""
    copy_workflow(workdir)
    write_config(workdir, base)
    log = workdir / "snakemake_run.log"
    # the targets first: --configfile takes every word after it
    return start_snakemake(workdir, *targets, "--configfile", "test_config.yaml", log=log), log


def run_config(workdir: Path, base: str, *targets: str, timeout: int = 5400) -> Path:
    """The workflow on config/<base> (its named `targets`, or everything) in a fresh copy of the
    repository at `workdir`."""
    copy_workflow(workdir)
    write_config(workdir, base)
    run_snakemake(workdir, *targets, "--configfile", "test_config.yaml", timeout=timeout)
    return workdir
