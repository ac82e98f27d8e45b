"""Code digests derived from what a workflow script imports (mlmia.core.provenance)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from mlmia.core.provenance import import_closure, imported_modules, script_digest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"


def test_imports_inside_functions_relative_ones_and_from_imports_of_modules_count():
    source = """
import os
from mlmia.core.errors import UserError

def late():
    from mlmia.report import findings
    import mlmia.metrics.bootstrap
"""
    found = imported_modules(source)
    assert found == {"mlmia.core.errors", "mlmia.report", "mlmia.report.findings", "mlmia.metrics.bootstrap"}
    # `from . import x` inside mlmia.report.tables is mlmia.report.x; `from .. import y` climbs one more
    relative = "from .findings import check_findings\nfrom ..metrics import bootstrap\n"
    assert imported_modules(relative, "mlmia.report.tables") == {
        "mlmia.report.findings", "mlmia.metrics", "mlmia.metrics.bootstrap",
    }  # fmt: skip
    # in a package's __init__, `.` is the package itself
    assert imported_modules("from .base import Attack\n", "mlmia.attacks", is_package=True) == {"mlmia.attacks.base"}


def test_the_import_lines_read_as_much_as_parsing_whole_sources(monkeypatch):
    """`_parse_imports` reads only the lines that start imports: on every module of the library
    and every workflow script it finds what parsing the whole source finds, and it falls back
    to the whole source where the lines it took do not parse."""
    import ast

    from mlmia.core import provenance

    tree = provenance.library()
    scripts = {path.name: path.read_text() for path in sorted(SCRIPTS.glob("*.py"))}
    fast = {name: tree.module_imports(name) for name in tree.modules()}
    fast_scripts = {name: imported_modules(text) for name, text in scripts.items()}
    monkeypatch.setattr(provenance, "_parse_imports", ast.parse)
    whole = provenance.SourceTree(tree.root, tree.package)
    assert fast == {name: whole.module_imports(name) for name in tree.modules()}
    assert fast_scripts == {name: imported_modules(text) for name, text in scripts.items()}
    monkeypatch.undo()
    # continuation lines (parentheses with a comment holding parentheses, a backslash) on the
    # fast path: only the import statements are parsed, not the assignment between them
    continued = """
from mlmia.core import (  # the runner (and its errors)
    errors,
    runner,
)
WIDTH = 3
from mlmia.metrics \\
    import bootstrap
"""
    taken = provenance._parse_imports(continued)
    assert [type(node) for node in taken.body] == [ast.ImportFrom, ast.ImportFrom]
    assert imported_modules(continued) == {"mlmia.core", "mlmia.core.errors", "mlmia.core.runner", "mlmia.metrics",
                                           "mlmia.metrics.bootstrap"}  # fmt: skip
    # prose in a docstring that reads like an import: the whole source is parsed instead
    prose = '"""Prose,\nimport time is what we measure."""\nfrom mlmia.report import findings\n'
    assert [type(node) for node in provenance._parse_imports(prose).body] == [ast.Expr, ast.ImportFrom]
    assert imported_modules(prose) == {"mlmia.report", "mlmia.report.findings"}


def test_the_closure_follows_modules_transitively_with_the_packages_above_them(tmp_path):
    script = tmp_path / "step.py"
    script.write_text("def main():\n    from mlmia.report.findings import check_findings\n")
    closure = set(import_closure(script))
    # mlmia.report.findings imports mlmia.report.tables, which imports mlmia.attacks.protocols
    assert {"mlmia", "mlmia.report", "mlmia.report.findings", "mlmia.report.tables"} <= closure
    assert "mlmia.scoring.energy" not in closure
    assert set(import_closure(script, "mlmia.scoring.energy")) >= closure | {"mlmia.scoring", "mlmia.scoring.energy"}


def _digest_with(copy: Path, script: Path) -> str:
    code = f"from mlmia.core.provenance import script_digest; print(script_digest({str(script)!r}))"
    env = {"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_an_edit_reached_only_through_another_module_changes_the_digest_and_one_elsewhere_does_not(tmp_path):
    shutil.copytree(REPO / "src" / "mlmia", tmp_path / "mlmia", ignore=shutil.ignore_patterns("__pycache__"))
    findings = SCRIPTS / "findings.py"
    assert "mlmia.report.tables" not in imported_modules(findings.read_text())  # reached through report.findings
    before = _digest_with(tmp_path, findings)
    assert before.strip() == script_digest(findings)  # the copy is what is digested, and it is unchanged
    energy = tmp_path / "mlmia" / "scoring" / "energy.py"
    energy.write_text(energy.read_text() + "\n# an edit to the scorer\n")
    assert _digest_with(tmp_path, findings) == before
    tables = tmp_path / "mlmia" / "report" / "tables.py"
    tables.write_text(tables.read_text() + "\n# an edit to the table renderer\n")
    assert _digest_with(tmp_path, findings) != before


def test_an_edit_to_a_word_list_of_the_world_changes_the_digest_of_the_steps_that_read_it(tmp_path):
    # the embedded world's word lists are package data (mlmia/world/data), read, never imported
    shutil.copytree(REPO / "src" / "mlmia", tmp_path / "mlmia", ignore=shutil.ignore_patterns("__pycache__"))
    corpora, metrics = SCRIPTS / "build_corpora.py", SCRIPTS / "attack_metrics.py"
    before = {script: _digest_with(tmp_path, script) for script in (corpora, metrics)}
    words = tmp_path / "mlmia" / "world" / "data" / "complaints.txt"
    words.write_text(words.read_text() + "hiccups\n")
    assert _digest_with(tmp_path, corpora) != before[corpora]
    assert "mlmia.world" not in import_closure(metrics)
    assert _digest_with(tmp_path, metrics) == before[metrics]


def test_every_script_reaches_the_step_runner_in_mlmia_core():
    for script in sorted(SCRIPTS.glob("*.py")):
        assert "mlmia.core.runner" in import_closure(script), script.name


def test_a_registry_that_loads_its_package_by_name_brings_every_module_of_it(tmp_path):
    # the attack registry and the training objectives import their modules by name at run time
    script = tmp_path / "step.py"
    script.write_text("from mlmia.models.objectives import make_objective\n")
    closure = set(import_closure(script))
    assert "mlmia.models.objectives.bert_mlm" in closure  # never named in an import statement
    script.write_text("from mlmia.attacks.base import get_attack\n")
    assert {"mlmia.attacks.rmia", "mlmia.attacks.lira_online"} <= set(import_closure(script))


def test_package_data_a_module_reads_counts_as_its_code(tmp_path):
    # the world's word lists are package data (mlmia.world.lexicon reads them): an edit to one
    # changes the digest of a step that builds the world, not of one that never reads them
    shutil.copytree(REPO / "src" / "mlmia", tmp_path / "mlmia", ignore=shutil.ignore_patterns("__pycache__"))
    build, join = SCRIPTS / "build_corpora.py", SCRIPTS / "join_scores.py"
    assert "mlmia.world.lexicon" in import_closure(build)
    assert "mlmia.world.lexicon" not in import_closure(join)
    before = {script: _digest_with(tmp_path, script) for script in (build, join)}
    words = tmp_path / "mlmia" / "world" / "data" / "months.txt"
    words.write_text(words.read_text() + "Smarch\n")
    assert _digest_with(tmp_path, build) != before[build]
    assert _digest_with(tmp_path, join) == before[join]


def test_what_a_result_was_made_from_is_named_by_content(tmp_path):
    from mlmia.core.provenance import config_digest, file_digest

    # a config's digest: the same however its keys are ordered, another for another value
    assert config_digest({"a": 1, "b": {"c": [1, 2]}}) == config_digest({"b": {"c": [1, 2]}, "a": 1})
    assert config_digest({"a": 1}) != config_digest({"a": 2})
    # a file's and a directory's: its bytes, and a directory's file names too
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.bin").write_bytes(b"\x00" * 10)
    before = file_digest(tmp_path / "model")
    assert len(before) == 16 and file_digest(tmp_path / "model" / "weights.bin") != before
    (tmp_path / "model" / "weights.bin").rename(tmp_path / "model" / "other.bin")
    assert file_digest(tmp_path / "model") != before
