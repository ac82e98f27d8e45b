"""Per-slot scores beside the attack table (`mlmia.memorization.token_kinds`; rule token_kinds in
rules/zoo.smk): for every experiment whose attacks include one with per-slot evidence
(`Attack.token_statistics`, e.g. InfoRMIA), each slot's score with its position and the kind of
PHI its token belongs to, and the summary by kind; the zoo's experiments' files are built by
`snakemake zoo` (`TOKEN_GROUPS`). Only the masked energy's slots are placed (`SLOT_ENERGIES`): an
experiment of another energy kind gets no such file. The PHI spans are located once per sample
table (rule phi_spans, `span_file`: offsets and kinds, no value) from the extraction study's PHI
(the embedded world's values, built again in that job, or the user's `extraction.phi`); a config
without them gets every slot as "other", and the summary says so."""

from __future__ import annotations

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.memorization.token_kinds import SLOT_ENERGIES, has_token_statistics
from mlmia.study.plans.extraction import REGISTRATION, tokenizer_source
from mlmia.terms.layout import samples, span_file, token_files
from mlmia.terms.spec import figure_experiments

#: the target groups whose named target builds their experiments' per-slot files
TOKEN_GROUPS = ("zoo",)


def token_attacks(study, experiment: str) -> list[str]:
    """The attacks of `experiment` that give per-slot scores (none for an energy kind whose slots
    are not placed: `SLOT_ENERGIES`)."""
    if study.experiments[experiment].energy not in SLOT_ENERGIES:
        return []
    attacks = study.experiment_attacks(experiment)
    return [name for name in attacks if has_token_statistics(get_attack(name, study.config["attacks"].get(name)))]


def token_experiments(study, group: str | None = None) -> list[str]:
    """The experiments with per-slot files: of every group, or of those `group`'s tables, figures and findings read."""
    if group is None:
        names = list(study.experiments)
    else:
        names = [e for t in study.tables if study.group(t) == group for e in study.table_experiments(t)]
        names += [
            e for f in study.figures if study.group(f, "figure") == group for e in figure_experiments(study.figures[f])
        ]
        names += study.findings_experiments(group)
    return [name for name in dict.fromkeys(names) if name in study.experiments and token_attacks(study, name)]


def token_outputs(study, experiment: str) -> dict[str, str]:
    return {key: study.path(path) for key, path in token_files(experiment).items()}


def token_targets(study, group: str) -> list[str]:
    """What a group's named target adds: its experiments' per-slot files (`TOKEN_GROUPS` only)."""
    if group not in TOKEN_GROUPS:
        return []
    return [path for name in token_experiments(study, group) for path in token_outputs(study, name).values()]


def token_inputs(study, experiment: str) -> dict:
    """The attack table, its sample table, the target's tokenizer (unless a hub id) and, where the
    extraction study runs, the PHI spans of the sample table (`span_inputs`' job)."""
    spec = study.experiments[experiment]
    tokenizer = study.local_input(tokenizer_source(study, spec.target))
    return (
        {"attack": study.path("attack", f"{experiment}.parquet"), "samples": study.path(samples(spec.dataset))}
        | ({"tokenizer": tokenizer} if tokenizer else {})
        | ({"spans": study.path(span_file(spec.dataset))} if REGISTRATION.runs(study) else {})
    )


def token_settings(study, experiment: str) -> dict:
    """What the job computes with (its params): the attacks with their parameters, the energy kind, the
    masked energy's layout (seed, K, mask count), the bootstrap (the metrics'), the tokenizer and where
    the PHI comes from."""
    spec, scoring, metrics = study.experiments[experiment], study.config["scoring"], study.metrics
    return {
        "attacks": {name: study.attack_params(name) for name in token_attacks(study, experiment)},
        "energy": spec.energy,
        "scoring": {key: scoring[key] for key in ("seed", "patterns", "mask_count")},
        "bootstrap": {"seed": metrics["seed"], "replicates": metrics["bootstrap"]},
        "tokenizer": tokenizer_source(study, spec.target),
        "where": span_settings(study)["where"],
    }


def span_datasets(study) -> list[str]:
    """The sample tables whose PHI spans a per-slot file reads (none where the extraction does not run)."""
    if not REGISTRATION.runs(study):
        return []
    return list(dict.fromkeys(study.experiments[name].dataset for name in token_experiments(study)))


def span_inputs(study, dataset: str) -> dict:
    """The sample table and the user's PHI table (`extraction.phi`; the embedded world's PHI is built
    again in the job, as the extraction study's values job builds it: that job's temporary file is
    not read, so that this job needs none of the extraction study's and reruns none of them)."""
    phi = study.config["extraction"].get("phi")
    return {"samples": study.path(samples(dataset))} | ({"phi": phi} if phi else {})


def span_settings(study) -> dict:
    """The user's PHI table, else the world's corpus section to build the PHI again; where it comes from."""
    phi, runs = study.config["extraction"].get("phi"), REGISTRATION.runs(study)
    return {
        "phi": phi,
        "corpus": study.config.get("corpus") if runs and not phi else None,
        "where": (phi or "the world's PHI") if runs else None,
    }


def check_extraction_token_kinds(study) -> None:
    """Each experiment `extraction.token_kinds` names can be set beside the extraction's rates: the
    extraction study runs; the experiment is configured, audits `extraction.target` on
    `extraction.dataset` against non-members of `extraction.sources` (another register's notes
    differ by more than memorisation: the extraction's own reason), and has a per-slot attack."""
    config = study.config["extraction"]
    for i, name in enumerate(config["token_kinds"]):
        key = f"config key extraction.token_kinds[{i}]"
        if not REGISTRATION.runs(study):
            raise UserError(f"{key}: the extraction study does not run (no embedded world, no extraction.phi)")
        if name not in study.experiments:
            raise UserError(f"{key}: {name!r} is not an experiment of the tables spec (tables_spec)")
        spec = study.experiments[name]
        for field, wanted in (("target", config["target"]), ("dataset", config["dataset"])):
            if getattr(spec, field) != wanted:
                raise UserError(
                    f"{key}: experiment {name!r} has {field} {getattr(spec, field)!r}, not extraction.{field} {wanted!r}"
                )
        if spec.nonmembers not in config["sources"]:
            raise UserError(
                f"{key}: experiment {name!r} compares non-members of {spec.nonmembers!r}, not of extraction.sources "
                f"({', '.join(config['sources'])})"
            )
        if not token_attacks(study, name):
            raise UserError(
                f"{key}: experiment {name!r} has no attack with per-slot scores (e.g. informia) on the masked energy"
            )
