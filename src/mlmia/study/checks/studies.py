"""The studies' own sections: the canaries' template, secrets and candidates; d-exposure's phrase,
notes, tagger and classes; the DP audit's canary counts; the imported score files' path pattern.
Each reuses the library's rule for the setting (the one its job applies) and refuses under the
config key the user wrote."""

from __future__ import annotations

import string
from pathlib import Path

from mlmia.core.errors import UserError
from mlmia.study.checks.refusal import has_world, refused, rekeyed
from mlmia.terms.layout import ONE_RUN_CORPUS

#: the slots of an imported dataset's `files` pattern (mlmia.data.importing.files_from_config)
FILE_SLOTS = ("root", "model", "set")


def check_canaries(config: dict) -> None:
    """The canary template holds {secret} once; the canaries, and the candidates beside them,
    fit in the 10^digits secrets (`mlmia.memorization.canaries`)."""
    if not has_world(config):
        return  # no canary study
    from mlmia.memorization.canaries import canary_plan, check_space, split_template

    canaries = config["canaries"]
    try:
        split_template(canaries["template"])
    except UserError as exc:
        raise rekeyed(exc, "canaries.template", "canaries: the template ") from None
    plan = canary_plan(canaries["repetitions"], canaries["per_repetition"], canaries["never_inserted"],
                       canaries["population"])  # fmt: skip
    for key, needed in (("digits", len(plan)), ("candidates", len(plan) + canaries["candidates"])):
        try:
            check_space(canaries["digits"], needed)
        except UserError as exc:
            raise rekeyed(exc, f"canaries.{key}", "canaries: ") from None


def check_dexposure(config: dict) -> None:
    """d-exposure's settings as its jobs read them (`mlmia.world.phi.phi_settings`: the phrase's
    one {slot}, the notes' counts; `mlmia.memorization.dexposure.tagger_settings`), its XML files
    there, and no inserted word given for a class it does not measure."""
    dexposure = config.get("dexposure") or {}
    if "corpus" not in config and dexposure.get("i2b2_xml") and dexposure.get("tokenizer") == "world":
        raise refused(
            "dexposure.tokenizer",
            "'world' needs the embedded world (a corpus: section); with dexposure.i2b2_xml alone, set it to 'notes'",
        )
    if not (has_world(config) or dexposure.get("i2b2_xml")):
        return  # no d-exposure study
    from mlmia.memorization.dexposure import tagger_settings
    from mlmia.world.phi import phi_settings

    for check in (phi_settings, lambda d: tagger_settings(d["model"])):
        try:
            check(dexposure)
        except UserError as exc:  # the library names the dexposure key: "dexposure.<key>: <what>"
            key, sep, rest = str(exc).partition(": ")
            raise (
                refused(key, rest) if sep and key.startswith("dexposure") else refused("dexposure", str(exc))
            ) from None
    for i, path in enumerate(dexposure["i2b2_xml"]):
        if not Path(path).exists():
            raise refused(f"dexposure.i2b2_xml[{i}]", f"file or directory not found: {path}")
    for cls in dexposure["entities"]:
        if cls not in dexposure["classes"]:
            raise refused(
                f"dexposure.entities.{cls}",
                f"{cls} is not one of dexposure.classes ({', '.join(dexposure['classes'])}); its word would go unused",
            )


def check_dp_audit(config: dict) -> None:
    """The DP audit's canary counts against their minimums, under the dp_audit keys: the gradient
    canaries every DP model trains with (`mlmia.defences.dp_settings.canary_settings`), the runs
    their audit pools (a whole number, at least 1; more than 1 only with canaries), and the
    one-run audit's canaries of the models trained on dp_private."""
    if "dp_audit" not in config:
        return
    audit = config["dp_audit"]
    models = config.get("models") or {}
    if not any(spec.get("dp") is not None and "path" not in spec for spec in models.values()):
        raise refused("dp_audit", "no model the workflow trains has a dp setting: the DP audit would audit nothing")
    gradient = audit["gradient_canaries"]
    runs = gradient["runs"]
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:  # the schema lets 2.0 and true through
        raise refused("dp_audit.gradient_canaries.runs", f"{runs!r} is not a whole number of runs, at least 1")
    if runs > 1 and not gradient["count"]:
        raise refused(
            "dp_audit.gradient_canaries.runs",
            f"{runs} runs pool the gradient canaries, but dp_audit.gradient_canaries.count is 0 (no white-box audit); "
            "set runs: 1 or give canaries",
        )
    if gradient["count"]:
        from mlmia.defences.dp_settings import canary_settings

        try:
            canary_settings({key: gradient[key] for key in ("count", "sentinels", "norm", "seed")})
        except UserError as exc:
            text = str(exc).removeprefix("model config: dp.canaries.")
            key, _, rest = text.partition(" ")
            raise refused(f"dp_audit.gradient_canaries.{key}", rest) from None
    one_run = [name for name, spec in (config.get("models") or {}).items() if spec.get("corpus") == ONE_RUN_CORPUS]
    count = audit["canaries"]["count"]
    if one_run and count < 2:
        raise refused(
            "dp_audit.canaries.count",
            f"{count}; models {', '.join(one_run)} train on corpus {ONE_RUN_CORPUS}, whose one-run audit needs at "
            "least 2 canaries",
        )


def check_imported(config: dict) -> None:
    """Each imported dataset's `files` pattern holds only the slots {root}, {model} and {set}, {set}
    (every set its own file) and, with several models, {model}."""
    for name, dataset in (config.get("imported") or {}).get("datasets", {}).items():
        key = f"imported.datasets.{name}.files"
        try:
            slots = [field for _, field, _, _ in string.Formatter().parse(dataset["files"]) if field is not None]
        except ValueError as exc:
            raise refused(key, f"not a path pattern ({exc})") from None
        unknown = [slot for slot in slots if slot not in FILE_SLOTS]
        if unknown:
            raise refused(key, f"unknown slot {{{unknown[0]}}} (use {', '.join(f'{{{s}}}' for s in FILE_SLOTS)})")
        if "set" not in slots:
            raise refused(key, "needs {set}: without it every set would read one file")
        if "model" not in slots and len(dataset["models"]) > 1:
            raise refused(key, "needs {model}: without it every model would read one file")


def check_audit_cards(config: dict) -> None:
    """The vocabulary check's kinds: on the embedded world's values (no extraction.phi), among the
    kinds it gives each patient (`mlmia.world.patient_phi.IDENTIFYING_KINDS`); a user's PHI table's
    kinds are checked by the job that reads it. (The cards' models and experiments need the tables
    spec: the cards' plan refuses them, `mlmia.study.plans.cards`.)"""
    kinds = config["audit_cards"]["vocabulary_kinds"]
    if kinds is None or not has_world(config) or config["extraction"].get("phi"):
        return
    from mlmia.world.patient_phi import IDENTIFYING_KINDS

    for i, kind in enumerate(kinds):
        if kind not in IDENTIFYING_KINDS:
            raise refused(
                f"audit_cards.vocabulary_kinds[{i}]",
                f"{kind!r} is not a kind the embedded world gives its patients ({', '.join(IDENTIFYING_KINDS)})",
            )
