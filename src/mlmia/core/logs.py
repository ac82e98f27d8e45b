"""Logging set-up shared by the CLI and the workflow scripts."""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "mlmia"


def get_logger(name: str | None = None) -> logging.Logger:
    """The package logger, or a module's (`get_logger(__name__)`: "mlmia.data.datasets")."""
    if name is None or name == LOGGER_NAME or name.startswith(LOGGER_NAME + "."):
        return logging.getLogger(name or LOGGER_NAME)
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


def setup_logging(log_path: str | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send mlmia's log records to `log_path` (a rule's log file) or to stderr."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler: logging.Handler = (
        logging.FileHandler(log_path, mode="w") if log_path else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    return logger
