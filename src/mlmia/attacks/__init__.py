"""Attacks: one class per attack behind one interface (`Attack`), found by name in a registry.

A built-in attack is one module of this package; a user's own attack is registered through
the Python entry-point group ``mlmia.attacks`` (docs/byo.md, "Bring your own attack")."""

from mlmia.attacks.base import Attack, attack_names, get_attack, input_column, register

__all__ = ["Attack", "attack_names", "get_attack", "input_column", "register"]
