"""Digests of library modules, declared as rule params so that Snakemake reruns a step
when the code it runs changes (Snakemake tracks a script's mtime, not what it imports)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


def module_digest(*modules: str) -> str:
    """A short sha256 over the source files of the named modules (e.g. "mlmia.tables")."""
    digest = hashlib.sha256()
    for name in sorted(modules):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"no such module: {name}")
        digest.update(name.encode())
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:16]
