"""Faults and knobs that must not change a result (slow tier, on config/ci.yaml):

- a workflow killed with SIGKILL while it scores, unlocked and resumed with
  --rerun-incomplete, ends with tables byte-identical to an uninterrupted run's;
- the shard count and the batch size change raw energies by rounding only, and no printed
  table cell.

Both run the named targets `TARGETS` (29 of the CI DAG's 114 jobs: the corpora, the tokenizer,
Base and the domain reference, both energy kinds, attack tables and metrics), not the whole
DAG: what they check is the scoring and resuming machinery, which every table shares. They
share one directory: the resumed run's models and corpora serve the second check, which
changes scoring settings only and so reruns the scoring jobs (the shard size) and what follows
them (each process start-up of the whole DAG costs the suite seconds).
"""

import os
import signal
import subprocess
import time

import pytest
from workflow_helpers import SNAKEMAKE, copy_workflow, planned_jobs, run_snakemake, write_config

pytestmark = pytest.mark.slow
TABLES = "results/ci/tables"
TARGETS = ("table2", "table_zoo")  # Table 2 (both non-member sources) and the zoo's loss-only attacks


def table_files(workdir, suffix):
    return {p.name: p.read_bytes() for p in sorted((workdir / TABLES).glob(f"*{suffix}"))}


def same_tables(ours: dict, ci_run, suffix) -> bool:
    """`ours` ({file name: bytes}, the tables of `TARGETS`) equal the session run's, byte for byte."""
    theirs = table_files(ci_run, suffix)
    assert set(ours) == {f"{name}{suffix}" for name in TARGETS}, sorted(ours)
    return ours == {name: theirs.get(name) for name in ours}


@pytest.fixture(scope="module")
def resumed_run(ci_run, tmp_path_factory):
    """`TARGETS` on config/ci.yaml killed (SIGKILL, the whole process group) while a scoring
    job writes, then unlocked and resumed with --rerun-incomplete; (its directory, its tables
    {suffix: {file name: bytes}} and leftover temporary files as the resume left them: the
    shard check rescores in the same directory, whichever test runs first)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("resumed"))
    config = write_config(workdir, "ci.yaml")
    process = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", str(config), "--", *TARGETS],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    logs = workdir / "results/ci/logs/score"
    deadline = time.time() + 900
    while time.time() < deadline and process.poll() is None:
        if logs.exists() and any(logs.rglob("*.log")):
            time.sleep(1.0)  # a scoring job has started and is writing
            break
        time.sleep(0.5)
    assert process.poll() is None, "the run ended before any scoring job started"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    assert not (workdir / TABLES / "table2.csv").exists()  # it was killed mid-run (the static Table 8 may be there)
    run_snakemake(workdir, "--configfile", str(config), "--unlock")
    run_snakemake(workdir, "--configfile", str(config), "--rerun-incomplete", "--", *TARGETS)
    tables = {suffix: table_files(workdir, suffix) for suffix in (".csv", ".md", ".tex")}
    return workdir, tables, list((workdir / "results").rglob("*.tmp"))


def test_a_killed_run_resumes_to_the_same_tables(ci_run, resumed_run):
    _, tables, leftovers = resumed_run
    for suffix, ours in tables.items():
        assert same_tables(ours, ci_run, suffix), suffix
    assert not leftovers


def test_shards_and_batch_size_change_no_table_cell(ci_run, resumed_run):
    workdir = resumed_run[0]
    # the shard size reruns the scoring jobs (other shards), which score with the new batch size (a
    # resource of theirs: alone it would rerun nothing)
    config = write_config(workdir, "ci.yaml", scoring__shard_size=60, scoring__batch_size=7)
    rules = {rule for rule, _ in planned_jobs(workdir, "--configfile", str(config), "--", *TARGETS)}
    assert "score_shard" in rules and not rules & {"train_model", "build_corpora", "train_tokenizer"}, rules
    run_snakemake(workdir, "--configfile", str(config), "--", *TARGETS)
    shards = sorted((workdir / "results/ci/logs/score/clinical").glob("base.masked.*.log"))
    assert len(shards) > 1  # really more shards than the CI run's
    # every printed cell (the Markdown tables) is the same
    assert same_tables(table_files(workdir, ".md"), ci_run, ".md")
