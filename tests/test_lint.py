"""The code stays clean: ruff (lint and format), snakefmt and Snakemake's own linter, as `make lint` runs them."""

import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["snakefmt", "--check", "Snakefile", "rules"],
        ["snakemake", "--lint"],
    ],
    ids=["ruff-check", "ruff-format", "snakefmt", "snakemake-lint"],
)
def test_lint(command):
    result = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    if command[0] == "snakemake":
        assert "Congratulations, your workflow is in a good condition" in result.stdout + result.stderr
