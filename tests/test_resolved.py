"""Resolve once: a job gets every setting through its rule's params, from the validated config,
which carries every default. So no module a workflow script runs reads the config schema
(`mlmia.terms.schema.defaults`), and the schema's bytes are no job's code: rewording a
description, adding a section or changing one study's default reruns only what the value
reaches (tests/test_workflow_embedded.py checks that on a finished run)."""

from __future__ import annotations

import ast

import pytest
from workflow_helpers import REPO

from mlmia.core.provenance import import_closure, library

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
