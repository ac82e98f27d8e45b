"""Resolve once: a job gets every setting through its rule's params (the torch device and the
scoring batch size, which choose how it runs, through its resources: tests/test_plans.py), from
the validated config, which carries every default. So no module a workflow script runs reads the
config schema (`mlmia.terms.schema.defaults`), and the schema's bytes are no job's code:
rewording a description, adding a section or changing one study's default reruns only what the
value reaches (tests/test_workflow_embedded.py checks that on a finished run)."""

from __future__ import annotations

import ast
import copy

import pytest
import yaml
from workflow_helpers import REPO

from mlmia.core.errors import UserError
from mlmia.core.provenance import import_closure, library
from mlmia.terms.schema import schema_path, validate

SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))
SCHEMA_MODULE = "mlmia.terms.schema"


def _reads_defaults(source: str) -> bool:
    """Whether a module's source calls `defaults(...)` (the schema's defaults), found by the
    parser, not by a string search: a docstring naming it is no call."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == "defaults":
                return True
    return False


def test_the_parser_finds_a_call_and_not_a_mention():
    # the case that must make the check fail, and the one it must let through
    assert _reads_defaults("from mlmia.terms.schema import defaults\nX = defaults('scoring')\n")
    assert _reads_defaults("import mlmia.terms.schema as s\ndef f():\n    return s.defaults('x')\n")
    assert not _reads_defaults('"""read with defaults("scoring") by the CLI"""\nX = 1\n')


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_job_reads_the_schema(script):
    closure = import_closure(script)
    tree = library()
    readers = [m for m in closure if _reads_defaults(tree.module_file(m).read_text())]
    assert not readers, f"{script.name} runs modules that read schema defaults: {', '.join(readers)}"
    assert SCHEMA_MODULE not in closure, f"{script.name} imports {SCHEMA_MODULE}: the schema would be its code"


# ---------------------------------------------------------------------- defaults once, in the repository

#: the shipped configs that stand alone (the overlays add to one of these)
STANDALONE = ("config.yaml", "ci.yaml", "paper.yaml", "large.yaml", "byo_example.yaml", "paper_scores.yaml")
#: a value equal to its default stays in a shipped config only with this on its line
KEPT = "the default, kept for the reader"


def _leaves(node: yaml.Node, path: tuple = ()):
    """(key path, line) of every leaf of a composed YAML mapping."""
    if isinstance(node, yaml.MappingNode) and node.value:
        for key, value in node.value:
            yield from _leaves(value, (*path, key.value))
    else:
        yield path, node.start_mark.line


def _resolved(config: dict) -> dict:
    return validate(copy.deepcopy(config), schema_path("config"))


def restated_defaults(path) -> list[str]:
    """The leaves of a config file whose removal leaves its validated config as it is: values
    that only restate a default (those marked `KEPT` on their line left out)."""
    text = path.read_text()
    lines, config = text.splitlines(), yaml.safe_load(text)
    resolved = _resolved(config)
    found = []
    for keys, line in _leaves(yaml.compose(text)):
        if KEPT in lines[line]:
            continue
        trial = copy.deepcopy(config)
        parent = trial
        for key in keys[:-1]:
            parent = parent[key]
        del parent[keys[-1]]
        try:
            same = _resolved(trial) == resolved
        except UserError:  # a required key: no default to restate
            same = False
        if same:
            found.append(".".join(keys))
    return found


def test_restated_defaults_are_found(tmp_path):
    # the case that must make the check fail: a default written out; and one a run sets apart
    text = (REPO / "config" / "paper_scores.yaml").read_text()  # the smallest shipped config
    written = tmp_path / "config.yaml"
    written.write_text(text + "figure_style: {dpi: 80, context: paper}\n")  # dpi set apart, paper the default
    assert restated_defaults(written) == ["figure_style.context"]
    written.write_text(written.read_text().replace("context: paper}", f"context: paper}}  # {KEPT}"))
    assert restated_defaults(written) == []


@pytest.mark.parametrize("name", STANDALONE)
def test_shipped_configs_hold_only_what_they_set_apart(name):
    assert restated_defaults(REPO / "config" / name) == []
