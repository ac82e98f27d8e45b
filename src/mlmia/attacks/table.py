"""One attack table per experiment: each selected sample's role and the columns its attacks
read, named by `mlmia.attacks.base.input_column` (``target_energy``, ``references_energy``,
``sample_zlib_bytes``, ...).

Inputs by role (the attack-table builder is the only place that knows where they come from):

- ``target`` / ``reference``: that model's score table, per energy kind;
- ``references``: one score table per reference model, joined into lists (one value per
  reference, in the experiment's reference order) with ``references_in``, whether the
  sample was in that reference's training split (from the splits table);
- ``neighbours``: the target's scores of the neighbour samples, joined into lists in the
  neighbour table's order: a neighbour belongs to the sample its ``neighbour_of`` column names
  (`mlmia.scoring.neighbours`; no id is parsed); None for a sample without neighbour texts (a
  population sample, or one outside `neighbours.subsample`);
- ``sample``: features computed from the selected samples themselves (`SAMPLE_FEATURES`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pandas as pd

from mlmia.attacks.base import attack_names, input_column
from mlmia.core.errors import UserError, shown_id
from mlmia.terms.manifest import NEIGHBOUR_OF, NEIGHBOUR_ROLES, neighbour_subsample, taken
from mlmia.terms.scores import read_score_table

SAMPLE_COLUMNS = ["sample_id", "group_id", "role", "source", "length", "n_tokens"]

#: name -> function(selected samples with `text`, `role`, `group_id`; settings) -> one value per row
SAMPLE_FEATURES: dict[str, Callable[[pd.DataFrame, dict], np.ndarray]] = {}


def sample_feature(name: str):
    """Register a sample feature (a function of the selected samples and the run's settings)."""

    def register(function):
        SAMPLE_FEATURES[name] = function
        return function

    return register


@sample_feature("zlib_bytes")
def zlib_bytes(selected: pd.DataFrame, settings: dict) -> np.ndarray:
    """The zlib-compressed length of each text in bytes (zlib's default level, UTF-8): the zlib
    entropy of Carlini et al., "Extracting training data from large language models", USENIX
    Security 2021, as their code and MIMIR's compute it."""
    return np.array([len(zlib.compress(str(text).encode("utf-8"))) for text in selected["text"]], dtype=float)


def select_samples(
    manifest: pd.DataFrame, *, nonmembers: str, population: str, length: str | None, where: str
) -> pd.DataFrame:
    """The samples an experiment takes: every member and held-in member, the non-members of
    source `nonmembers`, the population samples of source `population`, of one length
    bucket (None: every length)."""
    for column in ("sample_id", "group_id", "role", "source"):
        if column not in manifest.columns:
            raise UserError(f"{where}: the sample table lacks column {column!r}")
    if length is not None and "length" not in manifest.columns:
        raise UserError(f"{where}: length {length!r} asked for but the samples have no length bucket")
    selected = manifest[taken(manifest, nonmembers, population, length)]
    for role, detail in (("member", ""), ("nonmember", f" from source {nonmembers!r}")):
        if not (selected["role"] == role).any():
            bucket = f" of length {length!r}" if length else ""
            raise UserError(f"{where}: role {role!r}{detail} has no samples{bucket}")
    return selected.reset_index(drop=True)


def _indexed(scores: pd.DataFrame, model: str, columns: list[str], energy: str, where: str) -> pd.DataFrame:
    """A model's score table indexed by sample id, checked to hold `columns` of kind `energy`."""
    missing = [c for c in ["sample_id", *columns] if c not in scores.columns]
    if missing:
        raise UserError(f"{where}: {energy} scores of model {model!r} lack column(s) {', '.join(missing)}")
    if "energy_kind" in scores.columns and not (scores["energy_kind"] == energy).all():
        raise UserError(f"{where}: scores of model {model!r} are not all of energy kind {energy!r}")
    duplicated = scores["sample_id"].duplicated()
    if duplicated.any():
        raise UserError(
            f"{where}: scores of model {model!r} repeat sample_id {shown_id(scores['sample_id'][duplicated].iloc[0])}"
        )
    return scores.set_index("sample_id")


def _values(indexed: pd.DataFrame, ids: pd.Series, column: str, model: str, energy: str, where: str) -> np.ndarray:
    absent = ~ids.isin(indexed.index)
    if absent.any():
        raise UserError(
            f"{where}: model {model!r} has no {energy} score for sample {shown_id(ids[absent].iloc[0])} "
            f"({int(absent.sum())} missing)"
        )
    values = indexed[column].reindex(ids).to_numpy()
    return values.astype(float) if column == "energy" else values


def group_score_inputs(paths: dict[str, str]) -> dict[tuple[str, str], pd.DataFrame | list[pd.DataFrame]]:
    """The score tables of an attack table's inputs, read from {"<role>__<kind>": path}; the
    references' ("references.<i>__<kind>") as one list per kind, in reference order."""
    scores: dict = {}
    references: dict[str, dict[int, pd.DataFrame]] = {}
    for key, path in paths.items():
        role, kind = key.split("__", 1)
        if role.startswith("references."):
            references.setdefault(kind, {})[int(role.split(".", 1)[1])] = read_score_table(path)
        else:
            scores[(role, kind)] = read_score_table(path)
    for kind, tables in references.items():
        scores[("references", kind)] = [tables[i] for i in sorted(tables)]
    return scores


def split_column(column: str, energy: str) -> tuple[str, str]:
    """("energy", kind) of a column spec: "energy@normalized" -> ("energy", "normalized")."""
    return tuple(column.split("@", 1)) if "@" in column else (column, energy)


def build_attack_table(
    manifest: pd.DataFrame,
    scores: dict[tuple[str, str], pd.DataFrame | list[pd.DataFrame]],
    models: dict[str, str | list[str]],
    columns: dict[str, list[str]],
    *,
    nonmembers: str,
    population: str,
    # a tables spec experiment's defaults, for a direct call (pinned by tests/test_study.py);
    # the attack_table job passes both
    length: str | None = None,
    energy: str = "masked",
    splits: pd.DataFrame | None = None,
    neighbours: pd.DataFrame | None = None,
    subsample: dict | None = None,
    settings: dict | None = None,
    where: str = "attack table",
) -> pd.DataFrame:
    """Select an experiment's samples and join every input its attacks read.

    `scores[(role, energy kind)]` is that role's score table (a list of tables, one per
    reference, for ``references``; the target's scores of the neighbour samples for
    ``neighbours``); `models[role]` names the model(s), for messages; `columns[role]` lists
    the columns its attacks read ("energy", "energy@normalized", "token_logp", ...; for
    ``sample``, feature names). `splits` (sample_id, reference, in) says which samples each
    reference was trained on; `neighbours` (sample_id, neighbour_of), the neighbour table
    whose scores ``neighbours`` holds; `subsample` ({"subsample": ..., "seed": ...}, config key
    `neighbours`), which audited samples have neighbour texts (None or an empty subsample: all)."""
    attack_names()  # the attack modules register their sample features (blind) when discovered
    selected = select_samples(manifest, nonmembers=nonmembers, population=population, length=length, where=where)
    table = selected.copy()
    for column in ("length", "n_tokens"):
        if column not in table.columns:
            table[column] = None
    table = table[SAMPLE_COLUMNS].copy()
    ids = table["sample_id"].astype(str)
    for role, wanted in columns.items():
        if role == "sample":
            for feature in wanted:
                if feature not in SAMPLE_FEATURES:
                    raise UserError(
                        f"{where}: unknown sample feature {feature!r} (known: {', '.join(SAMPLE_FEATURES)})"
                    )
                if "text" not in selected.columns:
                    raise UserError(f"{where}: sample feature {feature!r} needs the samples' text")
                table[input_column(role, feature)] = SAMPLE_FEATURES[feature](selected, settings or {})
            continue
        if role not in models:
            raise UserError(f"{where}: an attack needs input {role!r} and the experiment gives none")
        for column in wanted:
            name, kind = split_column(column, energy)
            given = scores.get((role, kind))
            if given is None:
                raise UserError(f"{where}: no {kind} scores for input {role!r}")
            if role == "references":
                table[input_column(role, column)] = _reference_lists(given, models[role], ids, name, kind, where)
            elif role == "neighbours":
                scored = _with_neighbours(table, manifest, subsample)
                table[input_column(role, column)] = _neighbour_lists(
                    given, neighbours, models[role], ids, scored, name, kind, where
                )
            else:
                indexed = _indexed(given, models[role], [name], kind, where)
                table[input_column(role, column)] = _values(indexed, ids, name, models[role], kind, where)
                if role == "target" and name == "energy" and "n_tokens" in indexed.columns:
                    if indexed["n_tokens"].notna().any():  # the tokens the target scored (after any cut)
                        table["n_tokens"] = indexed["n_tokens"].reindex(ids).to_numpy()
        if role == "references":
            table["references_in"] = _reference_membership(splits, models[role], ids, where)
    return table


def _reference_lists(tables: list[pd.DataFrame], names: list[str], ids, column, kind, where) -> list:
    per_model = [
        _values(_indexed(t, n, [column], kind, where), ids, column, n, kind, where) for t, n in zip(tables, names)
    ]
    return [list(values) for values in zip(*per_model)] if per_model else [[] for _ in ids]


def _with_neighbours(table: pd.DataFrame, manifest: pd.DataFrame, subsample: dict | None) -> np.ndarray:
    """Which rows of the attack table have scored neighbour texts: the audited ones
    (`NEIGHBOUR_ROLES`), and with `neighbours.subsample` those it drew, on the whole sample
    table as the neighbour table was (`neighbour_subsample`)."""
    audited = table["role"].isin(NEIGHBOUR_ROLES).to_numpy()
    if not subsample or not subsample.get("subsample"):
        return audited
    chosen = neighbour_subsample(manifest, subsample["subsample"], subsample["seed"])
    return audited & table["sample_id"].astype(str).isin(manifest.loc[chosen, "sample_id"].astype(str)).to_numpy()


def _neighbour_lists(
    scores: pd.DataFrame, neighbours: pd.DataFrame | None, model: str, ids, scored: np.ndarray, column, kind, where
):
    """Each scored sample's neighbours' `column` (`scored`: `_with_neighbours`), in the neighbour
    table's order (its ``neighbour_of`` names the sample); None for a population sample, whose
    neighbours are not scored (`mlmia.terms.manifest.NEIGHBOUR_ROLES`), and for one outside
    the neighbour subsample."""
    if neighbours is None:
        raise UserError(f"{where}: the neighbours' scores come without their neighbour table")
    missing = [c for c in ("sample_id", NEIGHBOUR_OF) if c not in neighbours.columns]
    if missing:
        raise UserError(f"{where}: the neighbour table lacks column(s) {', '.join(missing)}")
    indexed = _indexed(scores, model, [column], kind, where)
    # only the selected samples' neighbours: a model's neighbour scores cover the samples its
    # experiments read (`mlmia.terms.manifest.rows_read`), not every sample's
    audited = ids[scored]
    neighbours = neighbours[neighbours[NEIGHBOUR_OF].astype(str).isin(audited)]
    values = _values(indexed, neighbours["sample_id"].astype(str), column, model, kind, where)
    grouped = pd.Series(list(values)).groupby(neighbours[NEIGHBOUR_OF].astype(str).to_numpy(), sort=False).agg(list)
    absent = ~audited.isin(grouped.index)
    if absent.any():
        raise UserError(
            f"{where}: sample {shown_id(audited[absent].iloc[0])} has no neighbours ({int(absent.sum())} missing)"
        )
    lists = dict(zip(audited, grouped.reindex(audited)))
    return [lists.get(i) for i in ids]


def _reference_membership(splits: pd.DataFrame | None, names: list[str], ids, where) -> list:
    if splits is None:
        raise UserError(f"{where}: reference models need their training splits")
    wide = splits.pivot_table(index="sample_id", columns="reference", values="in", aggfunc="first")
    missing = [n for n in names if n not in wide.columns]
    if missing:
        raise UserError(f"{where}: the splits table has no reference {missing[0]!r}")
    wide = wide.reindex(ids)[names].fillna(False).astype(bool)
    return [list(row) for row in wide.to_numpy()]
