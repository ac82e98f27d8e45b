"""Telling a hub id (bert-base-uncased, org/name) from a local path, without importing torch
(the workflow asks this while it builds the DAG)."""

from __future__ import annotations

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
