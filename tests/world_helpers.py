"""A config section as validation resolves it, for tests that give a part of it: the library's
entry points take every setting (`mlmia.terms.schema.validate` writes every default)."""

from __future__ import annotations

from mlmia.terms.schema import defaults


def _merged(base: dict, given: dict) -> dict:
    out = dict(base)
    for key, value in given.items():
        out[key] = _merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def resolved(given: dict | None, *keys: str) -> dict:
    """`given` (a part of the config section at `keys`, e.g. "corpus") with the schema's defaults
    for what it leaves out, nested sections merged key by key."""
    return _merged(defaults(*keys), dict(given or {}))
