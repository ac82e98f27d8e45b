"""Dependencies that earn their place: every import declared, every declared package used,
the conda environment equal to pyproject.toml, the package's subpackages, py.typed and the
config schemas shipped."""

import ast
import importlib.metadata
import re
import sys

import setuptools
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from workflow_helpers import REPO

from mlmia.terms.schema import schema_path

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DECLARED = {canonicalize_name(Requirement(r).name): Requirement(r) for r in PYPROJECT["project"]["dependencies"]}
# declared, but never imported by name: why each is there
NOT_IMPORTED = {
    "pyarrow": "pandas' Parquet engine (Parquet between rules)",
    "snakemake": "runs the workflow; the library knows nothing of it",
}


def imported_modules(*folders):
    """Top-level names of every module the Python files under `folders` import, or whose
    installed data files they read (`package_dir("gensim")` in mlmia.world.lexicon)."""
    names = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
                elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "package_dir":
                    names.add(node.args[0].value)
    return names


def distributions_of(modules):
    mapping = importlib.metadata.packages_distributions()
    third_party = {m for m in modules if m not in sys.stdlib_module_names and m != "mlmia"}
    return {m: {canonicalize_name(d) for d in mapping.get(m, [])} for m in third_party}


def test_every_import_of_the_library_and_scripts_is_declared():
    for module, dists in distributions_of(imported_modules("src", "workflow/scripts")).items():
        assert dists & set(DECLARED), f"{module} is imported but no dependency in pyproject.toml provides it"


def test_every_declared_dependency_is_used():
    used = set().union(*distributions_of(imported_modules("src", "workflow/scripts")).values())
    unused = set(DECLARED) - used - set(NOT_IMPORTED)
    assert not unused, f"declared but never imported: {sorted(unused)}"


def test_the_conda_environment_lists_the_same_packages():
    env = yaml.safe_load((REPO / "envs" / "mlmia.yaml").read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    listed = {canonicalize_name(Requirement(r).name): Requirement(r) for r in pip}
    assert set(listed) == set(DECLARED), set(listed) ^ set(DECLARED)
    for name, requirement in listed.items():
        if name == "torch":  # the env pins the CPU build inside pyproject's range
            (pin,) = requirement.specifier
            assert DECLARED["torch"].specifier.contains(pin.version)
        else:
            assert requirement.specifier == DECLARED[name].specifier, name
    # the library itself comes from the checkout, through the post-deploy script
    script = (REPO / "envs" / "mlmia.post-deploy.sh").read_text()
    assert re.search(r'pip install --no-deps --editable "\$MLMIA_WORKFLOW_DIR"', script)
    assert "os.environ.update(MLMIA_WORKFLOW_DIR=workflow.basedir)" in (REPO / "Snakefile").read_text()


def test_the_package_ships_its_subpackages_py_typed_schemas_and_word_lists():
    found = set(setuptools.find_packages(str(REPO / "src")))
    stages = {
        "core",
        "terms",
        "world",
        "data",
        "models",
        "scoring",
        "attacks",
        "metrics",
        "memorization",
        "study",
        "report",
    }
    assert {f"mlmia.{stage}" for stage in stages} <= found
    data = PYPROJECT["tool"]["setuptools"]["package-data"]["mlmia"]
    assert data == ["py.typed", "terms/schemas/*.schema.yaml", "world/data/*.txt"]
    assert (REPO / "src" / "mlmia" / "py.typed").exists()
    # the library reads the schemas' defaults: the installed package has every one it names
    shipped = {path.name for pattern in data for path in (REPO / "src" / "mlmia").glob(pattern)}
    assert {schema_path(name).name for name in ("config", "tables")} <= shipped
    # the workflow's config/schema, where users look, is a link to them, not a copy
    link = REPO / "config" / "schema"
    assert link.is_symlink() and link.resolve() == (REPO / "src" / "mlmia" / "terms" / "schemas").resolve()
    # the embedded world's word lists (mlmia.world.lexicon.word_list): every data file matches a pattern
    package = REPO / "src" / "mlmia"
    words = [path.relative_to(package) for path in (package / "world" / "data").iterdir()]
    assert words and all(path.match(data[2]) for path in words), words
