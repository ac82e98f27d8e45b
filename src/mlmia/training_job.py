"""The job that trains one masked language model: the one training loop
(`mlmia.models.training.train_mlm`) with its plain step, or with DP-SGD's
(`mlmia.defences.dp_sgd.DpSgdStep`) for a model with a `dp` setting. The two are composed here,
where the job starts, so that the models know nothing of the defence built on them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mlmia.core.io import read_table, require_columns
from mlmia.defences.dp_settings import dp_settings
from mlmia.defences.dp_sgd import DpSgdStep
from mlmia.models.objectives import check_dp_objective
from mlmia.models.settings import model_settings
from mlmia.models.training import train_mlm


def training_settings(config: dict | None) -> dict:
    """A model's settings with the defaults filled in (`model_settings`), its `dp` setting too
    (`dp_settings`); a wrong key or value is a UserError, as is dp with an objective DP-SGD does
    not take (`check_dp_objective`)."""
    cfg = model_settings(config)
    if cfg["dp"] is not None:
        check_dp_objective(cfg["objective"])
        cfg["dp"] = dp_settings(cfg["dp"])
    return cfg


def train_model(
    texts: Sequence[str],
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: dict | None = None,
    init_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    device: str | None = None,
    max_steps: int | None = None,
    log_every: int = 20,
    name: str | None = None,
    save_epochs: Sequence[int] = (),
    groups: Sequence | None = None,
) -> dict:
    """Train the model `config` describes on `texts` into `out_dir`: `train_mlm` (arguments as
    there), with DP-SGD's step (`DpSgdStep`) when the config has a `dp` setting; `groups`: each
    text's patient (`group_id`), which DP-SGD needs for its patient-level guarantee or its patient
    units. Returns the run's summary (train_info.json)."""
    cfg = training_settings(config)
    return train_mlm(texts, tokenizer_dir, out_dir, config=cfg, init_dir=init_dir, threads=threads, device=device,
                     max_steps=max_steps, log_every=log_every, name=name, save_epochs=save_epochs, groups=groups,
                     step=None if cfg["dp"] is None else DpSgdStep())  # fmt: skip


def train_from_table(
    text_path: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: dict | None = None,
    init_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    device: str | None = None,
    name: str | None = None,
) -> dict:
    """Read a training-text table (column `text`, and `group_id` when it has one) and train a
    model on it (`train_model`; the training rule's entry point)."""
    df = read_table(text_path)
    require_columns(df, ["text"], str(text_path))
    return train_model(
        df["text"].astype(str).tolist(),
        tokenizer_dir,
        out_dir,
        config=config,
        init_dir=init_dir,
        threads=threads,
        device=device,
        name=name,
        groups=df["group_id"].astype(str).tolist() if "group_id" in df.columns else None,
    )
