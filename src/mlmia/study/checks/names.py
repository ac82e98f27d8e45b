"""Names in the config: the run's folder, the names the studies reserve for their own models and
tables, and every key that names a model or a sample table (it exists, is of the right kind, and a
reference is not its own target)."""

from __future__ import annotations

import posixpath

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.study.checks.refusal import has_world, refused, rekeyed
from mlmia.study.pools import REFERENCE_PREFIX
from mlmia.terms.layout import (
    CANARY_TOKENIZER,
    ONE_RUN_CORPUS,
    RESULTS,
    SHADOW_MT_PREFIX,
    SHADOW_PREFIX,
    TOKENIZER,
    WORLD_SETS,
    model_dir,
)

#: the prefixes of the models the studies train (reference pools, the shadow protocols' models)
RESERVED_PREFIXES = (REFERENCE_PREFIX, SHADOW_PREFIX, SHADOW_MT_PREFIX)
#: the world corpora whose text is the audited patients' (members and held-in members)
PATIENT_CORPORA = ("target", "target_named", ONE_RUN_CORPUS)


def check_run(config: dict) -> None:
    """The run writes into a folder of its own directly inside results/ (`.` and `..` do not)."""
    run = config["run"]
    folder = posixpath.normpath(posixpath.join(RESULTS, run))
    if posixpath.dirname(folder) != RESULTS or posixpath.basename(folder) != run:
        raise refused(
            "run", f"{run!r} is not a folder of its own inside {RESULTS}/ (results/{run} is {folder}/); name the run"
        )


def check_reserved(config: dict) -> None:
    """No model of the config takes a name the workflow gives its own models (their folders would
    be shared and one replaced by the other), and no dataset takes the world's sample tables' names."""
    own = (TOKENIZER, CANARY_TOKENIZER)  # the world's tokenizers lie among the models
    shown = ", ".join([f"{prefix}*" for prefix in RESERVED_PREFIXES[:2]] + [posixpath.basename(p) for p in own])
    for name in config.get("models") or {}:
        if name.startswith(RESERVED_PREFIXES) or model_dir(name) in own:
            raise refused(f"models.{name}", f"a name the workflow gives its own models ({shown}); rename it")
    for name in config.get("datasets") or {}:
        if has_world(config) and name in WORLD_SETS:
            raise refused(
                f"datasets.{name}",
                f"a name the embedded world gives its own sample table ({', '.join(WORLD_SETS)}); rename it",
            )


def model_kind(config: dict, key: str, name: str, trained: bool = False, also: tuple = ()) -> dict | None:
    """The models entry `name` that config key `key` names: refused unless it is a configured
    model (or one of `also`), and, with `trained`, one the workflow trains (its settings are read)."""
    models = config.get("models") or {}
    if name in also:
        return None
    if name not in models:
        raise refused(key, f"{name!r} is not a configured model (models: {', '.join(models) or 'none'})")
    if trained and "path" in models[name]:
        raise refused(key, f"{name!r} is given by a path; name a model the workflow trains (its settings are read)")
    return models[name]


def scored_tables(config: dict) -> list[str]:
    """The sample tables the workflow makes: the embedded world's and the user's datasets."""
    return list(WORLD_SETS if has_world(config) else ()) + list(config.get("datasets") or {})


def check_scored_table(config: dict, key: str, name: str) -> None:
    tables = scored_tables(config)
    if name not in tables:
        raise refused(key, f"{name!r} is not a scored sample table (tables: {', '.join(tables) or 'none'})")


def saw_the_patients(models: dict, name: str) -> str | None:
    """The world corpus of the audited patients that model `name` trained on, itself or through
    the model it continues (`init`); None where it did not (or is given by a path)."""
    seen = set()
    while name in models and name not in seen:
        seen.add(name)
        spec = models[name]
        if spec.get("corpus") in PATIENT_CORPORA:
            return spec["corpus"]
        name = spec.get("init")
    return None


def check_named_models(config: dict) -> None:
    """Every key that names a model names a configured one of the right kind (a models entry's
    `init`: `mlmia.study.checks.models`)."""
    references = config.get("references")
    if references:
        if "shape" in references:
            model_kind(config, "references.shape", references["shape"], trained=True)
        if "init" in references:
            model_kind(config, "references.init", references["init"])
        check_scored_table(config, "references.dataset", references["dataset"])
    pool = [f"{REFERENCE_PREFIX}{i}" for i in range(references["count"])] if references else []
    if has_world(config):
        canaries = config["canaries"]
        model_kind(config, "canaries.shape", canaries["shape"], trained=True)
        model_kind(config, "canaries.reference", canaries["reference"], also=tuple(pool))
    if config.get("shadow"):
        for who in ("alice", "bob"):
            model_kind(config, f"shadow.{who}", config["shadow"][who], trained=True)


def check_extraction(config: dict) -> None:
    """The extraction study's target and reference (never the target itself, nor a model that
    trained on the audited patients), and its sample table."""
    extraction = config["extraction"]
    if not (has_world(config) or extraction.get("phi")):
        return  # no extraction study
    for key in ("target", "reference"):
        model_kind(config, f"extraction.{key}", extraction[key])
    target, reference = extraction["target"], extraction["reference"]
    if reference == target:
        raise refused(
            "extraction.reference", f"{reference!r} is also extraction.target; name a model that never saw the patients"
        )
    check_scored_table(config, "extraction.dataset", extraction["dataset"])
    corpus = saw_the_patients(config["models"], reference)
    if extraction["dataset"] in WORLD_SETS and has_world(config) and corpus:
        raise refused(
            "extraction.reference",
            f"{reference!r} trained on the audited patients (corpus {corpus}); name a model that never saw them "
            "(e.g. one trained on corpus domain or general)",
        )


def check_attacks(config: dict) -> None:
    """Each `attacks:` entry names a registered attack (a user's own included) and parameters it
    takes (`mlmia.attacks.base.get_attack`), used by a table or not."""
    for name, params in (config.get("attacks") or {}).items():
        try:
            get_attack(name, params)
        except UserError as exc:
            raise (exc if str(exc).startswith("config key ") else rekeyed(exc, f"attacks.{name}")) from None
