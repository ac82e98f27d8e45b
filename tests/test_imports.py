"""The library's import graph: no cycle among mlmia's modules, with the imports inside
functions counted (an import moved into a function to dodge a cycle still is one), and the
floors its packages stand on (`FLOORS`): no package imports one on its own floor or above."""

from __future__ import annotations

from pathlib import Path

from workflow_helpers import REPO

from mlmia.core.provenance import SourceTree

SRC = REPO / "src"

#: the library's packages (and top-level modules) by floor, lowest first: a package imports only
#: packages of lower floors. `core` (errors, the step runner, provenance); the shared terms
#: (schemas and defaults, specs, layout, table columns); the stages, each above those it builds on;
#: `Study`, the one seam to Snakemake, and the entry points (the CLI, the training job) on top.
FLOORS = (
    ("core",),
    ("terms",),
    ("models", "metrics"),
    ("data", "scoring", "attacks"),
    ("world", "report"),
    ("shadow", "memorization"),
    ("defences",),
    ("study", "training_job", "cli"),
    ("__main__",),
)


def import_graph(root: Path = SRC / "mlmia", package: str = "mlmia") -> dict[str, set[str]]:
    """{module: modules of the same tree it imports}, read from the source by the library's own
    reader (`mlmia.core.provenance.SourceTree`, which the code digests use too): every import
    statement anywhere in the file (module level, in functions, under `if`), and for `import
    a.b.c` the packages a and a.b too, except the importer's own packages."""
    return SourceTree(root, package).graph()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a, b, ..., a) through each strongly connected component of more than one
    module, or of one module that imports itself (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        components.append(sorted(component))
    return [_cycle_in(graph, set(component)) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first within it)."""
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parent:
                    parent[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # unreachable for a strongly connected component


def test_the_library_has_no_import_cycle_counting_imports_inside_functions():
    graph = import_graph()
    assert "mlmia.models.training" in graph and len(graph) > 50
    found = cycles(graph)
    assert not found, "import cycles in src/mlmia:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_models_import_nothing_of_the_defences():
    graph = import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("mlmia.models")
        for target in targets
        if target.startswith("mlmia.defences")
    )
    assert not wrong, "mlmia.models imports mlmia.defences: " + ", ".join(wrong)


def test_the_graph_sees_imports_inside_functions_relative_imports_and_packages(tmp_path):
    """On a small tree: a cycle closed by an import inside a function is found and reported."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "from pkg.a.core import X\n",
        "pkg/a/core.py": "X = 1\n",
        "pkg/a/train.py": "def run():\n    from pkg.b import dp\n    return dp\n",
        "pkg/b/__init__.py": "",
        "pkg/b/dp.py": "from ..a import train\nfrom . import helper\n",
        "pkg/b/helper.py": "import pkg.a.core\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path / "pkg", "pkg")
    assert graph["pkg.a.train"] == {"pkg.b", "pkg.b.dp"}
    assert graph["pkg.b.dp"] == {"pkg.a", "pkg.a.train", "pkg.b.helper"}
    assert graph["pkg.b.helper"] == {"pkg.a", "pkg.a.core"}
    assert graph["pkg.a"] == {"pkg.a.core"}  # its own package is no edge
    assert cycles(graph) == [["pkg.a.train", "pkg.b.dp", "pkg.a.train"]]


def package_of(module: str, package: str = "mlmia") -> str:
    """The package (or top-level module) a module belongs to: mlmia.<name>."""
    return module.removeprefix(f"{package}.").split(".")[0]


def climbing_imports(graph: dict[str, set[str]], floors, package: str = "mlmia") -> list[str]:
    """Every import of a module into a package on its own floor or above ("a -> b"), and every
    package no floor declares; `floors` as `FLOORS`."""
    floor = {name: level for level, names in enumerate(floors) for name in names}
    found = []
    for module, targets in sorted(graph.items()):
        if module == package:
            continue
        own = package_of(module, package)
        if own not in floor:
            found.append(f"{own}: on no floor (add it to FLOORS)")
            continue
        for target in sorted(targets):
            other = package_of(target, package)
            if target != package and other != own and floor.get(other, len(floors)) >= floor[own]:
                found.append(f"{module} -> {target}")
    return sorted(set(found))


def test_no_package_imports_one_on_its_floor_or_above():
    found = climbing_imports(import_graph(), FLOORS)
    assert not found, "imports that climb (tests/test_imports.py FLOORS):\n" + "\n".join(found)


def test_every_package_of_the_library_is_on_a_floor():
    root = SRC / "mlmia"
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    packages |= {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    declared = {name for names in FLOORS for name in names}
    assert packages == declared, f"on no floor: {sorted(packages - declared)}; gone: {sorted(declared - packages)}"


def test_the_floors_check_finds_an_import_that_climbs_and_one_across_a_floor():
    """Hand-made graph: c is below s; s -> c is fine, c -> s climbs, a -> b crosses one floor."""
    graph = {
        "pkg.c.x": set(),
        "pkg.s.y": {"pkg.c.x"},
        "pkg.c.z": {"pkg.s.y"},
        "pkg.a.m": {"pkg.b.n"},
        "pkg.b.n": set(),
        "pkg.new.k": set(),
    }
    floors = (("c",), ("a", "b"), ("s",))
    assert climbing_imports(graph, floors, "pkg") == sorted(
        ["pkg.c.z -> pkg.s.y", "pkg.a.m -> pkg.b.n", "new: on no floor (add it to FLOORS)"]
    )
