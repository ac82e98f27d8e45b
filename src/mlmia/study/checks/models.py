"""The `models:` entries: where each model comes from (a world corpus the workflow trains it on,
or a path), and no setting that cannot apply to it (training settings or `dp` on a model given by
path, a training text beside the corpus the workflow trains on, gradient canaries the DP audit
would replace, a `public_tokenizer` that contradicts the tokenizer a trained model inherits). The
trainer's own rules on each model's settings are `mlmia.study.checks.training`."""

from __future__ import annotations

from mlmia.study.checks.refusal import has_world, refused
from mlmia.study.plans.dp import gradient_canaries
from mlmia.terms.layout import ONE_RUN_CORPUS
from mlmia.terms.schema import defaults

#: the defaults validation writes into every models entry (the training settings); precision has
#: none (left out, it is resolved after these checks: mlmia.study.resolve)
TRAINING_DEFAULTS = defaults("models", "*")
#: the keys of a models entry that say how the workflow trains it
TRAINING_KEYS = (*TRAINING_DEFAULTS, "precision")
#: the architecture of a model trained from scratch; a model that continues another (init) keeps its
#: init's (mlmia.models.training loads it whole)
ARCHITECTURE_KEYS = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "dropout")


def inherited_tokenizer(models: dict, name: str) -> tuple[bool, str]:
    """Whether the tokenizer a model the workflow trains inherits is public, and why in words: the
    world's (learnt on the world's corpora, members' notes among them: private) for a model trained
    from scratch or on the DP targets' corpus (the world's with the canaries' tokens); its `init`'s
    for a model that continues one."""
    spec = models[name]
    init = spec.get("init")
    if spec.get("corpus") == ONE_RUN_CORPUS or init is None:
        return False, "the world's tokenizer, learnt on the world's corpora (private)"
    public = tokenizer_is_public(models, init)
    return public, f"the tokenizer of {init!r}, which it continues ({'public' if public else 'private'})"


def tokenizer_is_public(models: dict, name: str) -> bool:
    """Whether model `name`'s tokenizer (the one its vocabulary check reads: `models.<name>.tokenizer`,
    else its own) holds nothing learnt from the owner's notes. The user's tokenizer (an entry with
    `path` or `tokenizer`): `public_tokenizer` as given, left out private (the check counts); a model
    the workflow trains: what it inherits (`inherited_tokenizer`). Unknown models (the workflow's
    reference pool and study models): private."""
    spec = models.get(name)
    if spec is None:
        return False
    if "path" in spec or spec.get("tokenizer") is not None:
        return bool(spec.get("public_tokenizer", False))
    return inherited_tokenizer(models, name)[0]


def _given(spec: dict, setting: str, config: dict) -> bool:
    """Whether a models entry sets `setting` to other than the default validation wrote, or for
    `precision` the one resolved (`training.precision`): one set to that value cannot be told from
    it, and changes nothing (a config read twice is checked as it was the first time)."""
    default = config["training"]["precision"] if setting == "precision" else TRAINING_DEFAULTS[setting]
    return setting in spec and spec[setting] != default


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
            if _given(spec, setting, config):
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
                if _given(spec, setting, config):
                    raise refused(
                        f"{key}.{setting}",
                        f"{name!r} is given by path: the workflow does not train it, so training settings do not apply",
                    )
        elif "training_text" in spec:
            raise refused(
                f"{key}.training_text",
                f"{name!r} is trained on corpus {spec['corpus']}, which is its training text; leave training_text out",
            )
        if "path" not in spec and spec.get("tokenizer") is None and "public_tokenizer" in spec:
            public, why = inherited_tokenizer(models, name)
            if bool(spec["public_tokenizer"]) != public:
                raise refused(
                    f"{key}.public_tokenizer",
                    f"{name!r} is trained by the workflow with {why}; leave public_tokenizer out",
                )
        dp = spec.get("dp") or {}
        # the audit's own canaries (resolved into a config read before) change nothing
        if dp.get("canaries") not in (None, gradient_canaries(config)) and gradient:
            raise refused(
                f"{key}.dp.canaries",
                "set by the workflow from dp_audit.gradient_canaries for every DP model, which would replace these; "
                "leave it out",
            )
