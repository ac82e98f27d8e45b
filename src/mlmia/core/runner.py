"""Run a workflow step: log to the rule's log file, turn user errors into one line."""

from __future__ import annotations

import logging
import os
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
    exit_without_teardown(0)


def exit_without_teardown(code: int) -> None:
    """End the process now, its outputs written: flush the streams and logs, then `os._exit`.

    Why: the interpreter's teardown of torch and transformers (module and object finalisation)
    takes about a second per process, longer than the rest of a small job's work after import
    (docs/benchmarks.md). Only for a process that has finished everything: files are closed by
    the code that wrote them, log handlers are flushed and closed here."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing left to flush
            pass
    logging.shutdown()
    os._exit(code)
