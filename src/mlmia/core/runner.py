"""Run a workflow step: log to the rule's log file, turn user errors into one line."""

from __future__ import annotations

import sys
from collections.abc import Callable

from mlmia.core.errors import UserError
from mlmia.core.logs import setup_logging


def run_step(snakemake, step: Callable) -> None:
    """Call `step(snakemake)`; a UserError becomes one line on stderr and in the log, exit 1."""
    log_path = snakemake.log[0] if len(snakemake.log) else None
    logger = setup_logging(log_path)
    try:
        step(snakemake)
    except UserError as exc:
        logger.error("%s", exc)
        print(f"mlmia: error: {exc}", file=sys.stderr)
        sys.exit(1)
