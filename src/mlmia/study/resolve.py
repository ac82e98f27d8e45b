"""The defaults that come from other sections, written into the validated config once, when it is
read (`Study.from_config`, after the schema's defaults and the config checks; before anything
reads it): so the validated config is the resolved one, and every job gets complete settings
through its rule's params.

- a model entry's `precision` the user left out: `training.precision`, a DP model's fp32 (Opacus'
  per-sample gradients run in fp32);
- a DP model's `dp.canaries`: the DP audit's gradient canaries (`dp_audit.gradient_canaries`,
  the training's part) when the audit has some;
- `references.settings` (a model entry's training settings, free in the schema) completed as a
  model entry is;
- `dp_corpus` with its defaults where the embedded world is configured (the schema cannot give
  it a default: without a world the section is refused).
"""

from __future__ import annotations

from mlmia.study.plans.dp import gradient_canaries
from mlmia.terms.schema import defaults

#: a DP model's compute dtype when its entry names none (Opacus' per-sample gradients run in fp32)
DP_PRECISION = "fp32"


def resolve_config(config: dict) -> dict:
    """Write the defaults that come from other sections into a validated, checked `config` (in
    place; the module docstring says which) and return it."""
    precision = config["training"]["precision"]
    canaries = gradient_canaries(config)
    for entry in (config.get("models") or {}).values():
        resolve_entry(entry, precision)
        if entry["dp"] is not None and canaries is not None:  # the white-box audit's canaries join the training
            entry["dp"]["canaries"] = dict(canaries)
    references = config.get("references")
    if references and "settings" in references:
        references["settings"] = resolve_entry(completed(references["settings"]), precision)
    if "corpus" in config and "dp_corpus" not in config:
        config["dp_corpus"] = defaults("dp_corpus")
    return config


def resolve_entry(entry: dict, training_precision: str) -> dict:
    """A model entry's `precision` (in place) when it names none: `training_precision`, a DP model's
    fp32."""
    if "precision" not in entry:
        entry["precision"] = DP_PRECISION if entry.get("dp") is not None else training_precision
    return entry


def resolved_settings(given: dict, training_precision: str) -> dict:
    """Training settings given in part, resolved as a model entry is (`completed`, then
    `resolve_entry`): for the callers that are no job (tests, benchmarks)."""
    return resolve_entry(completed(given), training_precision)


def completed(settings: dict) -> dict:
    """Training settings given in part (`references.settings`) with a model entry's schema defaults,
    those of `dp` and its `canaries` too when given."""
    out = {**defaults("models", "*"), **settings}
    if isinstance(out["dp"], dict):
        out["dp"] = {**defaults("models", "*", "dp"), **out["dp"]}
        if isinstance(out["dp"]["canaries"], dict):
            out["dp"]["canaries"] = {**defaults("models", "*", "dp", "canaries"), **out["dp"]["canaries"]}
    return out
