"""The library's imports, read from its source, and the code digests derived from them.

`script_digest` derives the code a workflow step runs from its script: the `mlmia` modules it
imports, at module or function level, and theirs, transitively, with the `__init__` of every
package on the way (Python runs those on import). A digest of them, declared as a rule's
param, makes Snakemake rerun the step when that code changes (Snakemake tracks a script's
mtime, not what it imports). Nothing is imported to find them: the sources are parsed where
`mlmia` lies on `sys.path`, so a copy of the library first on `PYTHONPATH` is the one read.
Every script imports `mlmia.core` (the step runner), so an edit there reruns every job.

A registry that imports the modules of its package by name declares it (a module-level
``LOADS_BY_NAME = "<package>"``): for a digest every module of that package counts as
imported. A module that reads package data at run time declares it (a module-level
``READS_FILES = "<glob>"``, relative to its folder): those files count as its code (the config
schemas, whose defaults the trainers read, `mlmia.terms.schema`). What is loaded from outside
the library (a user's plug-in) cannot be seen in the source: the rule names those modules as
extras.

`SourceTree.graph` is the same reading as an import graph (the import-cycle test).

What a result was made from, named by content: `config_digest` (a validated config) and
`file_digest` (a file, or a directory's files), read by the audit cards' provenance.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
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


def with_packages(names: set[str]) -> set[str]:
    """`names` and every package above them (importing `a.b.c` runs `a` and `a.b` first)."""
    out = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


class SourceTree:
    """The modules of one package (`package`, whose folder is `root`), read from their source."""

    def __init__(self, root: str | os.PathLike, package: str) -> None:
        self.root, self.package = Path(root), package
        self._imports: dict[tuple[str, bool], frozenset[str]] = {}
        self._data: dict[str, tuple[Path, ...]] = {}

    def module_file(self, name: str) -> Path | None:
        """The source file of module `name` (a package: its `__init__.py`), or None."""
        parts = name.split(".")
        if parts[0] != self.package:
            return None
        base = self.root.joinpath(*parts[1:])
        for path in (base / "__init__.py", base.with_suffix(".py")):
            if path.is_file():
                return path
        return None

    def modules(self) -> list[str]:
        """Every module of the tree, packages included."""
        names = []
        for path in sorted(self.root.rglob("*.py")):
            parts = (self.package, *path.relative_to(self.root).with_suffix("").parts)
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        return names

    def _loaded_by_name(self, tree: ast.Module) -> set[str]:
        """Every module of the package a registry declares it loads by name (`LOADS_BY_NAME`)."""
        package = _declared(tree, "LOADS_BY_NAME")
        if package is None:
            return set()
        init = self.module_file(package)
        if init is None or init.name != "__init__.py":
            raise ValueError(f"LOADS_BY_NAME names no package of {self.package}: {package}")
        return {f"{package}.{p.stem}" for p in init.parent.glob("*.py") if p.stem != "__init__"}

    def data_files(self, name: str) -> tuple[Path, ...]:
        """The package data module `name` declares it reads (`READS_FILES`), sorted; read once."""
        if name not in self._data:
            path = self.module_file(name)
            pattern = _declared(_parse_imports(path.read_text()), "READS_FILES")
            files = tuple(sorted(path.parent.glob(pattern))) if pattern else ()
            if pattern and not files:
                raise ValueError(f"{name}: READS_FILES matches no file: {pattern}")
            self._data[name] = files
        return self._data[name]

    def imported_modules(
        self, source: str, module: str | None = None, is_package: bool = False, by_name: bool = True
    ) -> set[str]:
        """The tree's modules that `source` imports anywhere (in functions too): `import a.b`,
        and `from a import b` as `a` and, when `b` is a module, `a.b`; with `by_name`, also
        those a registry in it declares it loads by name. `module` names the source's own
        module (relative imports are resolved against it)."""
        tree = _parse_imports(source)
        found = self._loaded_by_name(tree) if by_name else set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                if base is not None:
                    found.add(base)
                    found.update(f"{base}.{a.name}" for a in node.names if self.module_file(f"{base}.{a.name}"))
        return {name for name in found if self.module_file(name)}

    def module_imports(self, name: str, by_name: bool = True) -> frozenset[str]:
        """What module `name` imports (`imported_modules` of its source), read once."""
        key = (name, by_name)
        if key not in self._imports:
            path = self.module_file(name)
            if path is None:
                raise ValueError(f"no such module of {self.package}: {name}")
            found = self.imported_modules(path.read_text(), name, path.name == "__init__.py", by_name)
            self._imports[key] = frozenset(found)
        return self._imports[key]

    def closure(self, names: set[str]) -> list[str]:
        """`names`, every module they import, directly or through others, and the packages above them."""
        todo, seen = with_packages(names), set()
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo |= with_packages(set(self.module_imports(name))) - seen
        return sorted(seen)

    def graph(self) -> dict[str, set[str]]:
        """{module: the modules its import statements load}: with the packages above an imported
        module (their `__init__` runs first) except the importer's own (already running); loading
        by name is not an import statement and makes no edge."""
        graph = {}
        for name in self.modules():
            own = with_packages({name})
            graph[name] = with_packages(set(self.module_imports(name, by_name=False))) - own
        return graph


# A line that starts an import statement, or a declaration (`_loaded_by_name`, `data_files`)
_IMPORT_LINE = re.compile(
    r"[ \t]*(?:import[ \t]+\w|from[ \t]+[\w.]+[ \t]*(?:import\b|\\|$)|(?:LOADS_BY_NAME|READS_FILES)[ \t]*=)"
)


def _declared(tree: ast.Module, name: str) -> str | None:
    """The string a module-level `name = "..."` assigns, or None."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def _parse_imports(source: str) -> ast.Module:
    """The import statements of `source` (and the declaration lines), parsed: each line that
    starts one is taken with its continuation lines, at column 0. Every Snakemake start reads
    the library's imports this way, in a tenth of the time of parsing whole modules. Where the
    lines taken do not parse (prose in a docstring that reads like an import), the whole source
    is parsed instead. An import that does not start its line (`try: import x`) is not seen:
    tests/test_provenance.py checks that the library has none."""
    lines, taken, i = source.splitlines(), [], 0
    while i < len(lines):
        if _IMPORT_LINE.match(lines[i]):
            statement, depth = [lines[i].strip()], _open_parentheses(lines[i])
            while (depth > 0 or statement[-1].endswith("\\")) and i + 1 < len(lines):
                i += 1
                statement.append(lines[i])
                depth += _open_parentheses(lines[i])
            taken.append("\n".join(statement))
        i += 1
    try:
        return ast.parse("\n".join(taken))
    except SyntaxError:
        return ast.parse(source)


def _open_parentheses(line: str) -> int:
    code = line.split("#", 1)[0]
    return code.count("(") - code.count(")")


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


@cache
def library() -> SourceTree:
    """The `mlmia` package that an import would load (found from its spec alone, no import)."""
    spec = importlib.util.find_spec(ROOT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {ROOT_PACKAGE} not found")
    return SourceTree(next(iter(spec.submodule_search_locations)), ROOT_PACKAGE)


def imported_modules(source: str, module: str | None = None, is_package: bool = False) -> set[str]:
    """The library modules `source` imports (`SourceTree.imported_modules` of the library)."""
    return library().imported_modules(source, module, is_package)


def import_closure(script: str | os.PathLike, *extra: str) -> list[str]:
    """Every library module that running `script` imports, directly or through other library
    modules, with the packages above them; `extra` library modules (and what they import) join them."""
    return library().closure(imported_modules(Path(script).read_text()) | set(extra))


def script_digest(script: str | os.PathLike, *extra: str) -> str:
    """A short sha256 over the source of every library module in `import_closure(script, ...)`
    and the package data each reads (`READS_FILES`): an edit to any module the script reaches, or
    to a file one of them reads, changes it, an edit elsewhere does not. `extra`:
    modules the script loads by name; those outside the library (a user's plug-in) count by
    their own source files."""
    tree = library()
    inside = [name for name in extra if name.split(".")[0] == ROOT_PACKAGE]
    digest = hashlib.sha256()
    for name in import_closure(script, *inside):
        digest.update(name.encode())
        digest.update(tree.module_file(name).read_bytes())
        for path in tree.data_files(name):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    outside = sorted(set(extra) - set(inside))
    if outside:
        digest.update(module_digest(*outside).encode())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- what a result was made from


def config_digest(config: dict) -> str:
    """A short sha256 of a config as validated (defaults filled in), keys sorted: two runs with the
    same settings give the same digest, however their files spell them (an audit card's provenance)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def file_digest(path: str | os.PathLike) -> str:
    """A short sha256 of a file's bytes, or of a directory's files (each file's path relative to it
    and its bytes, in sorted order): what a result read, named by content (an audit card's provenance)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]
