"""Telling a hub id (bert-base-uncased, org/name) from a local path, without importing torch
(the workflow asks this while it builds the DAG); transformers' warnings silenced while a model
is built or loaded."""

from __future__ import annotations

import contextlib
import os
import re

# "name" or "org/name", as the hub spells repository ids.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def looks_like_path(name: str) -> bool:
    """True for anything the hub could not name: absolute, relative, home or Windows paths,
    deeper than org/name, or ids with '..' / '--'."""
    if name.startswith(("/", ".", "~")) or "\\" in name or name.endswith("/"):
        return True
    if os.sep in name and name.count(os.sep) > 1:
        return True
    return not HUB_ID.match(name) or ".." in name or "--" in name


def looks_like_hub_id(name: str) -> bool:
    return not looks_like_path(str(name))


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' warnings and progress bars inside the block (our errors say what matters)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
