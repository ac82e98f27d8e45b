"""Validating a config (or a tables spec) against its JSON schema, defaults filled in.

The schemas (`SCHEMAS`, package data of the library; the workflow's `config/schema` links to
them) hold every default once: validation writes each missing key's `default` into the
instance, as Snakemake's ``validate(config, schema, set_default=True)`` does, so the validated
config is the resolved one (the defaults that come from other sections, a model's precision and
a DP model's canaries, are written when the study reads it: `mlmia.study.resolve`). A violation
becomes one line naming the key (`config key a.b.c: ...`). No job reads this module: jobs get
their settings whole, by their rules' params (tests/test_resolved.py). The config checks, the
plans, the CLI and the tests read a section's defaults here (`defaults`).

A key that was renamed (`RENAMED`) is refused before validation, naming the new key
("config key scoring.k: renamed to scoring.patterns").
"""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path

import yaml

from mlmia.core.errors import UserError

#: the config's and the tables spec's schemas (`config.schema.yaml`, `tables.schema.yaml`)
SCHEMAS = Path(__file__).with_name("schemas")
#: the schemas are this module's code for a step's digest (mlmia.core.provenance): a job that
#: imported this module would rerun on any schema edit; none does (tests/test_resolved.py)
READS_FILES = "schemas/*.schema.yaml"


#: keys renamed, by schema: the old key's path ("*": any entry of a mapping of named entries)
#: -> its new last part. One word per concept: `patterns` is the count of masking patterns (the
#: paper's K; the CLI's --patterns), `top_k` extraction's top-k, `fraction` the share of tokens
#: Min-K% and Min-K%++ average over.
RENAMED: dict[str, dict[tuple[str, ...], str]] = {
    "config": {
        ("scoring", "k"): "patterns",
        ("imported", "datasets", "*", "k"): "patterns",
        ("extraction", "k"): "top_k",
        ("attacks", "min_k", "k"): "fraction",
        ("attacks", "min_k_plus_plus", "k"): "fraction",
    },
    "tables": {},
}


def schema_path(name: str) -> Path:
    """The schema `name` (config, tables) of the library."""
    return SCHEMAS / f"{name}.schema.yaml"


def _schema_name(schema_file: str | os.PathLike) -> str:
    return Path(schema_file).name.removesuffix(".schema.yaml")


def _found(instance, path: tuple[str, ...], at: tuple[str, ...] = ()):
    """The concrete paths of `instance` that `path` ("*": any key) matches."""
    if not path:
        yield at
        return
    if not isinstance(instance, dict):
        return
    head, rest = path[0], path[1:]
    for key in list(instance) if head == "*" else [head] if head in instance else []:
        yield from _found(instance[key], rest, (*at, str(key)))


def check_renamed(instance: dict, schema: str = "config", what: str = "config key") -> None:
    """Refuse a key that schema `schema` renamed (`RENAMED`), in one line naming the new key."""
    for old, new in RENAMED.get(schema, {}).items():
        for path in _found(instance, old):
            raise UserError(f"{what} {'.'.join(path)}: renamed to {'.'.join((*path[:-1], new))}")


def _filling_defaults(validator_class):
    """A validator class that sets each missing property's default before checking it."""
    import jsonschema  # here, not at the top: reading defaults needs no validator (the scorer on a bare GPU machine)

    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


# libyaml's parser where PyYAML was built with it: the same documents, a tenth of the time (every
# Snakemake start reads the config, the tables spec and the schemas)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last)."""


def _mapping_without_duplicates(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise UserError(
                f"line {key_node.start_mark.line + 1}: key {key!r} given twice in one mapping "
                f"(first on line {seen[key] + 1}); YAML would silently keep only the last"
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def load_yaml(path: str | os.PathLike, key: str | None = None) -> dict:
    """A YAML file (a config, a tables spec) with one-line errors: missing file, bad YAML, a
    key given twice. `key` names the config key that pointed to it."""
    named = f"config key {key}: " if key else ""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=_StrictLoader) or {}
    except FileNotFoundError:
        raise UserError(f"{named}file not found: {path}") from None
    except UserError as exc:
        raise UserError(f"{named}{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise UserError(f"{named}{path}: {where}not valid YAML ({getattr(exc, 'problem', None) or 'syntax'})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{named}{path}: not UTF-8 text (byte {exc.start})") from None


def defaults(*keys: str, schema: str = "config") -> dict:
    """The config schema's defaults of the section at `keys`, in the schema's order
    (``defaults("dexposure", "model")``; ``"*"`` for an entry of a mapping: ``defaults("models",
    "*")``, ``defaults("models", "*", "dp")``): what validation writes into an empty section.
    A fresh copy. `schema`
    "tables": the tables spec's (``defaults("experiments", "*", schema="tables")``)."""
    return copy.deepcopy(_section_defaults(schema, keys))


@cache
def _schema(name: str) -> dict:
    return load_schema(schema_path(name))


@cache
def _section_defaults(name: str, keys: tuple[str, ...]) -> dict:
    schema = _schema(name)
    for depth, key in enumerate(keys):
        # "*": any entry of a mapping of named entries (`models`)
        schema = schema.get("additionalProperties") if key == "*" else schema.get("properties", {}).get(key)
        if not isinstance(schema, dict):
            raise KeyError(f"the {name} schema has no section {'.'.join(keys[: depth + 1])}")
    return _defaults_of(schema)


def _defaults_of(schema: dict) -> dict:
    """Every default of an object schema's properties (those validation leaves to the library
    too), in the schema's order; a default mapping completed with its own properties' defaults."""
    out = {}
    for name, subschema in schema.get("properties", {}).items():
        if isinstance(subschema, dict) and "default" in subschema:
            value = copy.deepcopy(subschema["default"])
            if isinstance(value, dict):
                value.update({k: v for k, v in _defaults_of(subschema).items() if k not in value})
            out[name] = value
    return out


def load_schema(path: str | os.PathLike) -> dict:
    try:
        with open(path) as handle:
            return yaml.load(handle, Loader=_SafeLoader)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the schema: {exc.strerror}") from None


def validate(instance: dict, schema_file: str | os.PathLike, what: str = "config key") -> dict:
    """Fill `instance`'s defaults from the schema (in place) and check it; the first, most
    relevant violation is raised as a UserError of one line ("config key a.b.c: ..."). A renamed
    key (`RENAMED`) is refused first, naming the new one."""
    if not isinstance(instance, dict):
        raise UserError(f"{what} (top level): must be a mapping, got {type(instance).__name__}")
    check_renamed(instance, _schema_name(schema_file), what)
    import jsonschema

    schema = load_schema(schema_file)
    validator_class = _filling_defaults(jsonschema.validators.validator_for(schema))
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(instance))
    if error is not None:
        path = ".".join(str(part) for part in error.absolute_path) or "(top level)"
        raise UserError(f"{what} {path}: {error.message}")
    return instance
