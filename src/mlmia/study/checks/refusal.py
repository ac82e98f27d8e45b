"""How a config check refuses: one line naming the config key as the user wrote it."""

from __future__ import annotations

from mlmia.core.errors import UserError


def refused(key: str, message: str) -> UserError:
    """The one-line refusal of config key `key` (dotted, list items as [i])."""
    return UserError(f"config key {key}: {message}")


def rekeyed(exc: UserError, key: str, prefix: str = "") -> UserError:
    """A library's refusal (`exc`, its own name for the setting, `prefix`, removed) under the
    config key the user wrote."""
    return refused(key, str(exc).removeprefix(prefix))


def item(key: str, values, i: int) -> str:
    """The key of item `i` of list `values` at `key` (`key[i]`), or `key` for a single value."""
    return key if isinstance(values, str) else f"{key}[{i}]"


def has_world(config: dict) -> bool:
    """Whether the config builds the embedded world (a `corpus:` section)."""
    return "corpus" in config
