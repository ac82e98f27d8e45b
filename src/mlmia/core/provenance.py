"""Digests of library code, declared as rule params so that Snakemake reruns a step when the
code it runs changes (Snakemake tracks a script's mtime, not what it imports)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


def _sources(name: str) -> list[Path]:
    """The source files of a module, or of every module of a package."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ValueError(f"no such module: {name}")
    if spec.submodule_search_locations:
        return sorted(p for folder in spec.submodule_search_locations for p in Path(folder).rglob("*.py"))
    return [Path(spec.origin)]


def module_digest(*modules: str) -> str:
    """A short sha256 over the source files of the named modules or packages ("mlmia.report.tables",
    "mlmia.metrics"): any change to them changes the digest."""
    digest = hashlib.sha256()
    for name in sorted(set(modules)):
        digest.update(name.encode())
        for path in _sources(name):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
