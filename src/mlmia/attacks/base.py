"""The attack interface and the registry.

An attack turns per-sample columns of an attack table into one statistic per sample. It
declares what it reads (`inputs`: for each input role, the columns it needs), the direction
of its statistic (`lower_is_member`), whether a patient's statistic is the mean of its
samples' (`aggregates`) and its `parameters` with their defaults (a config's
``attacks.<name>`` section overrides them). Tables, figures and findings name attacks by
`name`; nothing dispatches on a string.

Input roles and the attack-table columns they give (`input_column`):

- ``target``, ``reference``: one model's score columns, ``{role}_{column}``: "energy" (the
  experiment's energy kind: ``target_energy``), "energy@<kind>" (another energy kind of the
  same model: ``target_normalized_energy``), and the per-token evidence of the scored
  positions, lists in pattern order: "token_logp" (log p of the true token), "token_mean"
  and "token_var" (mean and variance of log p under the model's distribution at that
  position), "token_top1" (whether the top-1 prediction is the true token);
- ``references``: the same columns for each of the experiment's reference models, as lists
  (one value per reference: ``references_energy``), with ``references_in`` (whether the
  sample was in that reference's training split);
- ``neighbours``: the target's columns on the sample's neighbours (texts with a few tokens
  replaced), as lists: ``neighbours_energy``;
- ``sample``: features of the sample itself, computed from its text when the attack table
  is built (`mlmia.attacks.table.SAMPLE_FEATURES`): ``sample_zlib_bytes``.

Per-slot evidence: an attack may also say where in a sample its evidence lies
(`Attack.token_statistics`): per row, one score per slot, a slot being one masked position of
one masking pattern, in the order of the row's ``target_token_logp`` list (a reference's slot j
is the target's slot j: the patterns are a function of the sample). Higher means "member-like"
there whatever the statistic's direction; None (the default) when the attack has no per-slot
evidence. The scores are computed on the whole table as the statistic is, so they can be
written beside the attack table as they are.

Attacks are found in three places, in this order: the modules of this package (one module,
one attack: a new built-in attack needs no other change), the Python entry-point group
``mlmia.attacks`` (a user's own attack, from any installed distribution), and `register`
(an attack defined at run time, e.g. in a test).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from importlib.metadata import entry_points
from typing import ClassVar

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError

#: where an attack's inputs come from (see the module docstring)
INPUT_ROLES = ("target", "reference", "references", "neighbours", "sample")
#: the roles whose columns come from a model's score table
MODEL_ROLES = ("target", "reference", "references", "neighbours")
ENTRY_POINT_GROUP = "mlmia.attacks"
#: the registry imports this package's modules by name (read by mlmia.core.provenance)
LOADS_BY_NAME = "mlmia.attacks"
#: modules of this package that hold no attack
_NOT_ATTACKS = ("base", "shared", "table")


class Attack:
    """One membership-inference attack. Subclasses set the class attributes and `statistic`.

    - `name`: the registry name (letters, digits and underscores) that configs use;
    - `label`: how tables and figures print it, e.g. "(B) likelihood ratio";
    - `inputs`: {input role: (columns, ...)}, roles from `INPUT_ROLES`;
    - `lower_is_member`: True when a lower statistic means "member" (an energy, a loss);
    - `aggregates`: True when a patient's statistic is the mean of its samples' statistics;
    - `row_local`: True when a row's statistic reads that row only (False: it compares the
      row with others, as RMIA's population or a pooled variance does, so it is computed
      once on the whole table and never on a part of it);
    - `scored_roles`: the roles of the rows its statistic is defined on (None: every role);
      the metrics drop the other rows for this attack before they compute anything (`scored`,
      which an attack may narrow to the rows that have its inputs), and a threshold taken on a
      role it does not score is not computed for it;
    - `reads_population`: True when a row's statistic compares it with the population rows
      (RMIA), so that a table of it says which population each column took;
    - `parameters`: the attack's settings and their defaults; `self.params` holds them with
      the config's values (``attacks.<name>``) applied, checked on construction (`check_params`);
    - `tuned` (set by `statistic`): the parameters the last call chose from the table it was
      given, e.g. RMIA's ``{"a": 1.0}`` (empty when none was chosen); the metrics write them
      as rows of metric ``parameter`` and the tables print them under the table, saying how
      they were chosen with `tuning` (RMIA: "tuned on the reference models");
    - `token_statistics` (optional): the per-slot scores behind the statistic (see the module
      docstring), None when it has none.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    inputs: ClassVar[dict[str, tuple[str, ...]]] = {}
    lower_is_member: ClassVar[bool] = True
    aggregates: ClassVar[bool] = True
    row_local: ClassVar[bool] = True
    scored_roles: ClassVar[tuple[str, ...] | None] = None
    reads_population: ClassVar[bool] = False
    tuning: ClassVar[str] = ""
    parameters: ClassVar[dict[str, object]] = {}

    def __init__(self, **params) -> None:
        unknown = sorted(set(params) - set(self.parameters))
        if unknown:
            known = ", ".join(self.parameters) or "none"
            raise UserError(
                f"config key attacks.{self.name}: unknown parameter(s) {', '.join(unknown)} (known: {known})"
            )
        self.params = {**self.parameters, **params}
        self.tuned: dict[str, float] = {}
        self.check_params()

    def check_params(self) -> None:
        """Refuse a parameter value out of its range, in one line naming the config key
        (``attacks.<name>.<key>``). Called on construction, so the config check that builds every
        configured attack (`mlmia.study.checks`) refuses it before any job, with the code the
        attack job runs. Attacks with parameters override it; this one has none to check."""

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        """One float per row of `table` (an attack table or a part of it)."""
        raise NotImplementedError

    def token_statistics(self, table: pd.DataFrame) -> list[np.ndarray] | None:
        """Per row of `table`, one float per scored slot (a masked position of one masking
        pattern, in the order of the row's ``target_token_logp``), higher meaning "member-like"
        at that slot; None (this default): the attack has no per-slot evidence. Like `statistic`
        it is computed on the table it is given (it may compare rows and set `tuned`)."""
        return None

    def scored(self, table: pd.DataFrame) -> np.ndarray | None:
        """Which rows of `table` its statistic is defined on (None: every row): those of
        `scored_roles`. An attack whose inputs exist for some rows only narrows it further."""
        if self.scored_roles is None:
            return None
        return table["role"].isin(self.scored_roles).to_numpy()

    def reads_other_rows(self) -> bool:
        """Whether a row's statistic depends on the other rows of the table it is given."""
        return not self.row_local

    def references_lack(self, count: int, online: bool) -> str | None:
        """What a reference pool of `count` models, each trained on a random half of the pool's
        patients and, when `online`, of the audited (member and non-member) patients
        (`mlmia.data.splits`), lacks for this attack's statistic, in words (None: nothing). Only
        an attack that reads the pool (input role ``references``) can lack anything."""
        return None

    def columns(self) -> list[str]:
        """The attack-table columns this attack reads."""
        out = [input_column(role, column) for role, columns in self.inputs.items() for column in columns]
        return out + (["references_in"] if "references" in self.inputs else [])

    def member_score(self, table: pd.DataFrame) -> np.ndarray:
        """The statistic turned so that higher means "member" (what ROC curves rank by)."""
        statistic = np.asarray(self.statistic(table), dtype=float)
        return -statistic if self.lower_is_member else statistic

    def __repr__(self) -> str:
        return f"<attack {self.name}>"


def input_column(role: str, column: str) -> str:
    """The attack-table column holding `column` of input `role`: "target_energy", and for
    another energy kind "energy@normalized", "target_normalized_energy"."""
    if "@" in column:
        name, kind = column.split("@", 1)
        return f"{role}_{kind}_{name}"
    return f"{role}_{column}"


_registry: dict[str, type[Attack]] = {}
_discovered = False


def _check(cls) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Attack)):
        raise UserError(f"attack registry: {cls!r} is not a subclass of mlmia.attacks.base.Attack")
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise UserError(f"attack registry: {cls.__qualname__} needs a `name` of letters, digits and underscores")
    unknown = set(cls.inputs) - set(INPUT_ROLES)
    if unknown:
        raise UserError(
            f"attack {cls.name!r}: unknown input role(s) {', '.join(sorted(unknown))} (use {', '.join(INPUT_ROLES)})"
        )


def register(cls: type[Attack]) -> type[Attack]:
    """Add an attack class to the registry (usable as a class decorator)."""
    _check(cls)
    known = _registry.get(cls.name)
    if known is not None and known is not cls:
        raise UserError(
            f"attack {cls.name!r} is defined twice: {known.__module__}.{known.__qualname__} and "
            f"{cls.__module__}.{cls.__qualname__}"
        )
    _registry[cls.name] = cls
    return cls


def _discover() -> None:
    """Register the attacks of this package's modules, then those of the entry points."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("mlmia.attacks")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name in _NOT_ATTACKS or module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"mlmia.attacks.{module.name}")
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, Attack) and value.__module__ == loaded.__name__:
                if value.name:
                    register(value)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = entry.load()
        except Exception as exc:  # a broken plug-in: say which, in one line
            raise UserError(f"attack entry point {entry.name!r} ({entry.value}): cannot load: {exc}") from None
        _check(cls)
        if cls.name != entry.name:
            raise UserError(f"attack entry point {entry.name!r} ({entry.value}): its class is named {cls.name!r}")
        register(cls)


def attack_names() -> list[str]:
    """Every registered attack's name, built-in ones first."""
    _discover()
    return list(_registry)


def builtin_attack_names() -> list[str]:
    """The registered attacks of this package's modules (not an entry point's, nor one `register`ed
    at run time), in the registry's order."""
    _discover()
    return [name for name, cls in _registry.items() if cls.__module__.startswith(f"{LOADS_BY_NAME}.")]


def get_attack(name: str, params: dict | None = None) -> Attack:
    """The attack registered as `name`, with `params` over its default parameters."""
    _discover()
    if name not in _registry:
        raise UserError(f"unknown attack {name!r} (known: {', '.join(_registry)})")
    return _registry[name](**(params or {}))


def attack_modules() -> list[str]:
    """The modules that define the registered attacks (a code digest over them makes the
    metrics rerun when an attack changes, a user's own included)."""
    _discover()
    modules = {cls.__module__ for cls in _registry.values()}
    return sorted(m for m in modules if m != "__main__" and importlib.util.find_spec(m) is not None)
