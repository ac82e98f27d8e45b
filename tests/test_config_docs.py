"""config/README.md is what `mlmia.study.config_docs` writes from the schemas now, every schema key
has a description, and every worked example, merged onto its base config as Snakemake merges config
files, passes the schema and the whole config's checks (`Study.from_config`)."""

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config
from workflow_helpers import REPO

from mlmia.data.datasets import dataset_paths
from mlmia.data.importing import files_from_config
from mlmia.models.hub import looks_like_hub_id
from mlmia.study import config_docs
from mlmia.study.study import Study
from mlmia.terms.schema import load_schema, schema_path, validate

README = REPO / "config" / "README.md"


def test_config_readme_is_what_the_generator_writes():
    assert README.exists() and README.read_text() == config_docs.render(), (
        f"config/README.md is not what the schemas and mlmia.study.config_docs give now; regenerate it: "
        f"{config_docs.REGENERATE}"
    )


@pytest.mark.parametrize("name", ["config", "tables"])
def test_every_schema_key_has_a_description(name):
    missing = config_docs.undescribed(load_schema(schema_path(name)))
    assert not missing, f"{name}.schema.yaml: keys without a description: {', '.join(missing)}"


def test_every_kind_of_key_is_walked():
    """A property, an entry of a mapping of named entries, a list's items, an alternative, an
    if/then branch and a shared definition: each is a key that needs a description."""
    schema = {
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "integer"}}, "description": "x"},
            "m": {"type": "object", "additionalProperties": {"properties": {"c": {}}}, "description": "x"},
            "l": {"type": "array", "items": {"properties": {"d": {}}}, "description": "x"},
            "o": {"oneOf": [{"type": "string"}, {"properties": {"e": {}}}], "description": "x"},
        },
        "if": {"properties": {"k": {"const": 1}}},
        "then": {"properties": {"t": {"default": 2}}},
        "$defs": {"shared": {"properties": {"f": {}}}},
    }
    assert config_docs.undescribed(schema) == [
        "a.b", "m.<name>", "m.<name>.c", "l[].d", "o.e", "k (if)", "t (then)", "$defs.shared", "$defs.shared.f"
    ]  # fmt: skip
    (then,) = [key for key in config_docs.keys(schema) if key.branch == "then"]
    assert then.condition == "when k is 1"


def test_examples_merge_as_snakemake_merges_config_files():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1, "e": None}
    overlay = {"a": {"c": [3], "f": {"g": 1}}, "d": {"h": 2}, "e": {"i": 3}}
    expected = copy.deepcopy(base)
    update_config(expected, overlay)
    assert config_docs.merged(base, overlay) == expected


def stand_ins(config: dict, root: Path) -> None:
    """Empty stand-ins, under the working directory `root`, for the files and model directories a
    config names (the checks ask that they exist, not what they hold)."""
    for spec in config.get("datasets", {}).values():
        for path in dataset_paths(spec):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).touch()
    for spec in config.get("models", {}).values():
        path = spec.get("path")
        if path and not looks_like_hub_id(path):
            (root / path).mkdir(parents=True, exist_ok=True)
    imported = config.get("imported")
    for dataset in (imported or {}).get("datasets", {}).values():
        for model in dataset["models"]:
            for path in files_from_config(dataset, imported["root"], model).values():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text("0.5\n")


def test_every_registered_study_has_a_worked_example():
    # docs/adding_a_study.md: a study is a schema section, a plan, a rule file and an example
    from mlmia.study.plans import STUDIES

    assert set(STUDIES) | {"dp"} <= {example.study for example in config_docs.EXAMPLES}


@pytest.mark.parametrize("example", config_docs.EXAMPLES, ids=[e.study for e in config_docs.EXAMPLES])
def test_each_worked_example_passes_the_schema_and_the_checks(example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a check wrote would land here
    base = yaml.safe_load((REPO / example.base).read_text()) if example.base else {}
    config = config_docs.merged(base, yaml.safe_load(example.overlay))
    assert config["run"] != base.get("run"), "an example writes under a run of its own"
    stand_ins(config, tmp_path)
    validate(copy.deepcopy(config), schema_path("config"))
    Study.from_config(config, REPO).plans()
    assert not (tmp_path / "results").exists()
