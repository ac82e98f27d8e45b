"""One readable line for a config that violates the workflow's JSON schema."""

from __future__ import annotations

import jsonschema
import yaml


def schema_violation(config: dict, schema_path: str) -> str | None:
    """`config key a.b.c: <what is wrong>` for the most relevant violation, or None."""
    with open(schema_path) as handle:
        schema = yaml.safe_load(handle)
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    path = ".".join(str(part) for part in error.absolute_path) or "(top level)"
    return f"config key {path}: {error.message}"
