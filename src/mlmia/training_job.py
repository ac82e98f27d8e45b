"""The job that trains one masked language model: the one training loop
(`mlmia.models.training.train_mlm`) with its plain step, or with DP-SGD's
(`mlmia.defences.dp_sgd.DpSgdStep`) for a model with a `dp` setting. The two are composed here,
where the job starts, so that the models know nothing of the defence built on them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from mlmia.core.io import read_table, require_columns
from mlmia.defences.dp_settings import dp_settings
from mlmia.defences.dp_sgd import DpSgdStep
from mlmia.models.objectives import check_dp_objective
from mlmia.models.settings import TrainingSettings
from mlmia.models.training import train_mlm


def training_settings(entry: Mapping) -> TrainingSettings:
    """A model's settings (a resolved `models:` entry, as the training rule passes it:
    `TrainingSettings`), its `dp` setting checked too (`dp_settings`), once; a wrong key or value
    is a UserError, as is dp with an objective DP-SGD does not take (`check_dp_objective`)."""
    cfg = TrainingSettings.from_entry(entry)
    if cfg.dp is not None:
        check_dp_objective(cfg.objective)
        cfg = dataclasses.replace(cfg, dp=dp_settings(cfg.dp))
    return cfg


def train_model(
    texts: Sequence[str], tokenizer_dir: str | os.PathLike, out_dir: str | os.PathLike, config: Mapping, **kwargs
) -> dict:
    """Train the model `config` (a resolved model entry, `training_settings`) describes on `texts`
    into `out_dir`: `train_mlm` (the other arguments, `kwargs`, as there), with DP-SGD's step
    (`DpSgdStep`) when the config has a `dp` setting; `groups`: each text's patient (`group_id`),
    which DP-SGD needs for its patient-level guarantee or its patient units. Returns the run's
    summary (train_info.json)."""
    cfg = training_settings(config)
    return train_mlm(texts, tokenizer_dir, out_dir, cfg, step=None if cfg.dp is None else DpSgdStep(), **kwargs)


def train_from_table(
    text_path: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: Mapping,
    **kwargs,
) -> dict:
    """Read a training-text table (column `text`, and `group_id` when it has one) and train a
    model on it (`train_model`, the other arguments as there; the training rule's entry point)."""
    df = read_table(text_path)
    require_columns(df, ["text"], str(text_path))
    groups = df["group_id"].astype(str).tolist() if "group_id" in df.columns else None
    return train_model(df["text"].astype(str).tolist(), tokenizer_dir, out_dir, config, groups=groups, **kwargs)
