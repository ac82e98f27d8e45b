"""Complete training settings for the tests that train: a model entry as validation and the study
resolve it (the schema's defaults, `mlmia.study.resolve`), so a test gives only what it varies.
The library's trainers take complete settings and fill nothing in."""

from __future__ import annotations

from mlmia.study.resolve import resolved_settings
from mlmia.terms.schema import defaults

#: the training jobs' settings of a config that leaves `training` out
TRAINING = defaults("training")
#: the DP audit's settings of a config that gives `dp_audit: {}`
DP_AUDIT = defaults("dp_audit")


def model_entry(given: dict | None = None) -> dict:
    """A resolved model entry: the schema's defaults with `given` over them (a `dp` setting and its
    canaries completed too), precision `training.precision`'s default (a DP model's fp32)."""
    return resolved_settings(dict(given or {}), TRAINING["precision"])


def dp_entry(given: dict) -> dict:
    """A resolved `dp:` setting: the schema's defaults with `given` over them."""
    return model_entry({"dp": given})["dp"]


def seq2seq_entry(given: dict | None = None) -> dict:
    """A translation model's resolved settings (`shadow_mt.model`): the schema's defaults, `given` over them."""
    return {**defaults("shadow_mt", "model"), **(given or {})}


def train_mlm(texts, tokenizer_dir, out_dir, config, **kwargs) -> dict:
    """`mlmia.models.training.train_mlm` on a model entry given in part (`model_entry`; settings
    already built pass as they are), on one CPU thread unless told otherwise."""
    from mlmia.models.settings import TrainingSettings
    from mlmia.models.training import train_mlm as train

    settings = config if isinstance(config, TrainingSettings) else model_entry(config)
    return train(texts, tokenizer_dir, out_dir, settings, **{"threads": 1, "device": "cpu", **kwargs})


def train_model(texts, tokenizer_dir, out_dir, config, **kwargs) -> dict:
    """`mlmia.training_job.train_model` on a model entry given in part (`model_entry`), on one CPU
    thread unless told otherwise."""
    from mlmia.training_job import train_model as train

    return train(texts, tokenizer_dir, out_dir, model_entry(config), **{"threads": 1, "device": "cpu", **kwargs})


def training_settings(given: dict):
    """`mlmia.training_job.training_settings` of a model entry given in part (`model_entry`)."""
    from mlmia.training_job import training_settings as settings

    return settings(model_entry(given))
