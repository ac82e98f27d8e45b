"""Run the workflow in a temporary copy of the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "rules", "workflow", "config", "envs", "profiles")
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def paper_scores_root() -> Path:
    root = (REPO / ".." / "shared" / "paper-scores").resolve()
    assert root.is_dir(), f"the authors' published scores are expected at {root} (shared/ beside the clone)"
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
    config = yaml.safe_load((REPO / "config" / base).read_text())
    for dotted, new in overrides.items():
        node = config
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[key]
        node[last] = new
    path = dest / "test_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [SNAKEMAKE, "--cores", "2", *args], cwd=workdir, capture_output=True, text=True, timeout=1200
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result
