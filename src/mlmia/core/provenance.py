"""Digests of library code, declared as rule params so that Snakemake reruns a step when the
code it runs changes (Snakemake tracks a script's mtime, not what it imports).

`script_digest` derives the code a step runs from the script itself: the `mlmia` modules it
imports, at module or function level, and theirs, transitively, with the `__init__` of every
package on the way (Python runs those on import). Nothing is imported to find them: the
sources are parsed where `mlmia` lies on `sys.path`, so a copy of the library first on
`PYTHONPATH` is the one digested. Every script imports `mlmia.core` (the step runner), so an
edit there reruns every job. What a script loads by name at run time (a registry's plug-ins)
cannot be seen in its imports: the rule names those modules as extras.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
from functools import cache
from pathlib import Path

ROOT_PACKAGE = "mlmia"


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


@cache
def _package_root() -> Path:
    """The folder of the `mlmia` package that an import would load (its spec alone, no import)."""
    spec = importlib.util.find_spec(ROOT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {ROOT_PACKAGE} not found")
    return Path(next(iter(spec.submodule_search_locations)))


def module_file(name: str) -> Path | None:
    """The source file of module `name` of the library (a package: its `__init__.py`), or None."""
    parts = name.split(".")
    if parts[0] != ROOT_PACKAGE:
        return None
    base = _package_root().joinpath(*parts[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _absolute(node: ast.ImportFrom, module: str | None, is_package: bool) -> str | None:
    """The absolute module name of a `from ... import` (relative ones resolved against `module`)."""
    if not node.level:
        return node.module
    if module is None:
        return None
    package = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        package = package[: -(node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def imported_modules(source: str, module: str | None = None, is_package: bool = False) -> set[str]:
    """The library modules that `source` imports anywhere (in functions too): `import a.b`, and
    `from a import b` as `a` and, when `b` is a module, `a.b`. `module` names the source's own
    module, for relative imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            if base is None:
                continue
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if module_file(f"{base}.{alias.name}"))
    return {name for name in found if name.split(".")[0] == ROOT_PACKAGE and module_file(name)}


def _with_packages(names: set[str]) -> set[str]:
    """`names` and every package above them (importing `a.b.c` runs `a` and `a.b` first)."""
    out = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


@cache
def _module_imports(name: str) -> frozenset[str]:
    path = module_file(name)
    return frozenset(imported_modules(path.read_text(), name, path.name == "__init__.py"))


def import_closure(script: str | os.PathLike, *extra: str) -> list[str]:
    """Every library module that running `script` imports, directly or through other library
    modules, with the packages above them; `extra` library modules (and what they import) join them."""
    todo = _with_packages(imported_modules(Path(script).read_text()) | set(extra))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if module_file(name) is None:
            raise ValueError(f"no such module of {ROOT_PACKAGE}: {name}")
        seen.add(name)
        todo |= _with_packages(set(_module_imports(name))) - seen
    return sorted(seen)


def script_digest(script: str | os.PathLike, *extra: str) -> str:
    """A short sha256 over the source of every library module in `import_closure(script, ...)`:
    an edit to any module the script reaches changes it, an edit elsewhere does not. `extra`:
    modules the script loads by name (a registry's); those outside the library (a user's
    plug-in) count by their own source files."""
    library = [name for name in extra if name.split(".")[0] == ROOT_PACKAGE]
    digest = hashlib.sha256()
    for name in import_closure(script, *library):
        digest.update(name.encode())
        digest.update(module_file(name).read_bytes())
    outside = sorted(set(extra) - set(library))
    if outside:
        digest.update(module_digest(*outside).encode())
    return digest.hexdigest()[:16]
