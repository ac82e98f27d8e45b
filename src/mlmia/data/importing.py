"""Import published or external scores into the scorer's Parquet layout.

A *score set* is one file per model holding one float per line, in the same sample order
for every model (line i of every model's file is the same sample), or a Parquet/CSV with
`sample_id` and `energy`. A role manifest says which role and source each set plays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import as_text, numbers, read_table
from mlmia.terms.manifest import MANIFEST_COLUMNS, ROLES, check_roles_disjoint
from mlmia.terms.scores import SCORE_COLUMNS, TOKEN_COLUMNS


@dataclass(frozen=True)
class ScoreSet:
    name: str  # e.g. "nonmembers_mimic"; sample ids are "{name}:{line}"
    role: str  # one of ROLES
    source: str  # e.g. "mimic", "i2b2"


def read_line_scores(path: str | Path) -> np.ndarray:
    """One finite float per line; the error names the file and line."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: score file not found")
    values = []
    with path.open() as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text:
                raise UserError(f"{path}: line {number}: empty line (expected one score per line)")
            try:
                value = float(text)
            except ValueError:
                raise UserError(f"{path}: line {number}: not a number (one score per line)") from None
            if not math.isfinite(value):
                raise UserError(f"{path}: line {number}: score is {text} (NaN or inf)")
            values.append(value)
    if not values:
        raise UserError(f"{path}: empty score file (no samples)")
    return np.asarray(values, dtype=float)


def read_scores_any(path: str | Path) -> pd.DataFrame:
    """A score file as (sample_id or None, energy): one float per line, or a table."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq", ".csv", ".tsv", ".jsonl"):
        table = read_table(path)
        if "energy" not in table.columns or "sample_id" not in table.columns:
            raise UserError(f"{path}: a score table needs columns sample_id and energy")
        if table.empty:
            raise UserError(f"{path}: empty score table (no samples)")
        ids = as_text(table["sample_id"])
        if (ids == "").any():
            raise UserError(f"{path}: row {int((ids == '').to_numpy().nonzero()[0][0]) + 1}: empty sample_id")
        return pd.DataFrame({"sample_id": ids, "energy": numbers(table["energy"], str(path), "energy")})
    return pd.DataFrame({"sample_id": None, "energy": read_line_scores(path)})


def _set_sample_ids(score_set: ScoreSet, scores: pd.DataFrame) -> list[str]:
    if scores["sample_id"].isna().all():
        return [f"{score_set.name}:{i}" for i in range(len(scores))]
    return scores["sample_id"].tolist()


def import_manifest(sets: list[ScoreSet], files: dict[str, dict[str, str]], length: str | None = None) -> pd.DataFrame:
    """The role manifest of imported score sets, checking every model's files agree.

    `files[model][set_name]` is that model's score file for that set: every model must hold
    the same number of samples (and, for tables, the same sample ids) in a set.
    """
    if not files:
        raise UserError("score import: no models given")
    manifests = []
    for score_set in sets:
        if score_set.role not in ROLES:
            raise UserError(
                f"score set {score_set.name!r}: unknown role {score_set.role!r} (use one of {', '.join(ROLES)})"
            )
        loaded = {}
        for model, by_set in files.items():
            if score_set.name not in by_set:
                raise UserError(f"score import: model {model!r} has no file for set {score_set.name!r}")
            loaded[model] = (by_set[score_set.name], read_scores_any(by_set[score_set.name]))
        (first_model, (first_path, first)), *others = loaded.items()
        sample_ids = _set_sample_ids(score_set, first)
        for model, (path, scores) in others:
            if len(scores) != len(first):
                raise UserError(
                    f"{path}: {len(scores)} scores but {first_path} has {len(first)}: the {model!r} and "
                    f"{first_model!r} files of set {score_set.name!r} must hold the same samples in the same order"
                )
            if _set_sample_ids(score_set, scores) != sample_ids:
                raise UserError(f"{path}: sample ids differ from {first_path} for set {score_set.name!r}")
        manifests.append(
            pd.DataFrame(
                {
                    "sample_id": sample_ids,
                    # The published scores carry no patient ids: each sample is its own group.
                    "group_id": sample_ids,
                    "text": None,  # published scores come without their text
                    "role": score_set.role,
                    "source": score_set.source,
                    "length": length,
                    "n_tokens": pd.NA,
                }
            )
        )
    manifest = pd.concat(manifests, ignore_index=True)
    duplicated = manifest["sample_id"].duplicated()
    if duplicated.any():
        raise UserError(f"score import: duplicate sample_id {shown_id(manifest['sample_id'][duplicated].iloc[0])}")
    check_roles_disjoint(manifest, "score import")
    return manifest[MANIFEST_COLUMNS]


def import_model_scores(
    sets: list[ScoreSet], files: dict[str, str], model: str, energy_kind: str, patterns: int | None = None
) -> pd.DataFrame:
    """One model's score files (`files[set_name]`) in the layout the scorer writes; `patterns`, the
    masking patterns K the energies were averaged over (the `k` column; None: not known)."""
    parts = []
    for score_set in sets:
        if score_set.name not in files:
            raise UserError(f"score import: model {model!r} has no file for set {score_set.name!r}")
        scores = read_scores_any(files[score_set.name])
        parts.append(
            pd.DataFrame({"sample_id": _set_sample_ids(score_set, scores), "energy": scores["energy"].to_numpy()})
        )
    table = pd.concat(parts, ignore_index=True)
    n = len(table)
    missing = pd.array([pd.NA] * n, dtype="Int64")
    table.insert(1, "model", model)
    table.insert(2, "energy_kind", energy_kind)
    table["n_tokens"] = missing
    table["n_masked"] = missing
    table["per_pattern"] = [[] for _ in range(n)]
    for column in TOKEN_COLUMNS:  # published scores carry no per-token evidence
        table[column] = [[] for _ in range(n)]
    table["patterns"] = pd.array([patterns] * n, dtype="Int64")
    table["seed"] = missing
    return table[SCORE_COLUMNS]


def score_sets_from_config(dataset: dict) -> list[ScoreSet]:
    """The ScoreSets of one `imported.datasets` entry of the workflow config."""
    return [ScoreSet(name, entry["role"], entry["source"]) for name, entry in dataset["sets"].items()]


def files_from_config(dataset: dict, root: str, model: str) -> dict[str, str]:
    """`{set_name: path}` of one model in one `imported.datasets` entry."""
    return {name: dataset["files"].format(root=root, model=model, set=name) for name in dataset["sets"]}
