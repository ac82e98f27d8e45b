"""The `models:` entries: where each model comes from (a world corpus the workflow trains it on,
or a path), and no setting that cannot apply to it (training settings or `dp` on a model given by
path, a training text beside the corpus the workflow trains on, gradient canaries the DP audit
would replace). The trainer's own rules on each model's settings are `mlmia.study.checks.training`."""

from __future__ import annotations

from mlmia.study.checks.refusal import has_world, refused
from mlmia.vocabulary.schema import defaults

#: the keys of a models entry that say how the workflow trains it (the schema's, with their defaults)
TRAINING_KEYS = tuple(defaults("models", "*"))
#: the architecture of a model trained from scratch; a model that continues another (init) keeps its
#: init's (mlmia.models.training loads it whole)
ARCHITECTURE_KEYS = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "dropout")


def check_models(config: dict) -> None:
    """Each models entry continues another (`init`), gives a corpus or a path (not both), and only
    settings that apply to it."""
    models = config.get("models") or {}
    audit = config.get("dp_audit") or {}
    gradient = (audit.get("gradient_canaries") or {}).get("count", 0) if "dp_audit" in config else 0
    for name, spec in models.items():
        key = f"models.{name}"
        init = spec.get("init")
        if init is not None and (init not in models or init == name or "path" in spec):
            raise refused(
                f"{key}.init",
                f"{init!r} is not another configured model (models: {', '.join(models)}); init continues the "
                "training of one",
            )
        for setting in ARCHITECTURE_KEYS if init is not None else ():
            if setting in spec:
                raise refused(
                    f"{key}.{setting}",
                    f"{name!r} continues {init!r} and keeps its architecture (dropout included); {setting} applies "
                    "to a model trained from scratch",
                )
        if "path" in spec and "corpus" in spec:
            raise refused(key, "gives both corpus (a world corpus to train on) and path (a model of yours); give one")
        if "path" not in spec and "corpus" not in spec:
            raise refused(
                key, "gives neither corpus (a world corpus the workflow trains it on) nor path (a model of yours)"
            )
        if "corpus" in spec and not has_world(config):
            raise refused(
                f"{key}.corpus", f"{spec['corpus']!r} needs the embedded world (a corpus: section); or give a path"
            )
        if "path" in spec:
            if spec.get("dp") is not None:
                raise refused(
                    f"{key}.dp",
                    "a model given by path cannot be trained with DP (the workflow does not train it; the DP audit "
                    "audits the models it trains with dp)",
                )
            for setting in TRAINING_KEYS:
                if setting in spec and not (setting == "freeze" and spec[setting] == []):  # validation fills freeze
                    raise refused(
                        f"{key}.{setting}",
                        f"{name!r} is given by path: the workflow does not train it, so training settings do not apply",
                    )
        elif "training_text" in spec:
            raise refused(
                f"{key}.training_text",
                f"{name!r} is trained on corpus {spec['corpus']}, which is its training text; leave training_text out",
            )
        dp = spec.get("dp") or {}
        if dp.get("canaries") is not None and gradient:
            raise refused(
                f"{key}.dp.canaries",
                "set by the workflow from dp_audit.gradient_canaries for every DP model, which would replace these; "
                "leave it out",
            )
