"""The trainer's own rules on the settings of every model the workflow trains, applied when the
config is read, not when the model's job starts: the settings exactly as the training rule passes
them (`Study.training_spec`), checked as the training job checks them (`mlmia.training_job`:
`mlmia.models.settings.TrainingSettings`, `mlmia.models.objectives.check_dp_objective`,
`mlmia.defences.dp_settings`), each refusal under the config key the settings came from."""

from __future__ import annotations

import re

from mlmia.core.errors import UserError
from mlmia.study.checks.refusal import refused

#: how the trainer names a setting in its refusals: "model config: <key> <what>" (dp.<key> for dp's)
TRAINER_PREFIX = "model config: "
_SETTING = re.compile(r"^(\w+(?:\.\w+)*):? (.*)$")


def under_key(exc: UserError, key: str) -> UserError:
    """The trainer's refusal `exc` under config key `key` (a models entry, or the references'
    settings), the setting it names appended: "model config: dp.clipping ghost needs ..." ->
    "config key <key>.dp.clipping: ghost needs ..."."""
    text = str(exc).removeprefix(TRAINER_PREFIX)
    found = _SETTING.match(text)
    from mlmia.models.settings import TrainingSettings

    if found and found.group(1).split(".")[0] in TrainingSettings.keys():
        return refused(f"{key}.{found.group(1)}", found.group(2))
    return refused(key, text)


def check_settings(settings: dict, key: str) -> None:
    """A trained model's settings as the training job checks them (`mlmia.training_job.training_settings`),
    with the rules DP-SGD's step applies to the model's other settings (`check_dp_model`: packing,
    ghost clipping)."""
    from mlmia.defences.dp_settings import check_dp_model, dp_settings
    from mlmia.models.objectives import check_dp_objective
    from mlmia.models.settings import TrainingSettings

    try:
        cfg = TrainingSettings.from_entry(settings).as_dict()
    except UserError as exc:
        raise under_key(exc, key) from None
    if cfg["dp"] is None:
        return
    try:
        check_dp_objective(cfg["objective"])
    except UserError as exc:
        raise refused(f"{key}.dp", str(exc).removeprefix(TRAINER_PREFIX)) from None
    try:
        check_dp_model({**cfg, "dp": dp_settings(cfg["dp"])})
    except UserError as exc:
        raise under_key(exc, key) from None


def check_training(study) -> None:
    """Every model the workflow trains from a models entry, and the reference pool, has settings its
    trainer takes (the shadow protocol's and the canary target's are their shape's, checked so)."""
    trained = [name for name, spec in study.models.items() if "path" not in spec]
    for name in trained:
        check_settings(study.training_spec(name)["settings"], f"models.{name}")
    references = study.config.get("references")
    for name in study.reference_models():
        check_settings(
            study.training_spec(name)["settings"], f"references.{'shape' if 'shape' in references else 'settings'}"
        )
