"""Per-slot scores beside the attack table (`mlmia.memorization.token_kinds`; rule token_kinds in
rules/zoo.smk): for every experiment whose attacks include one with per-slot evidence
(`Attack.token_statistics`, e.g. InfoRMIA), each slot's score with its position and the kind of
PHI its token belongs to, and the summary by kind; the zoo's experiments' files are built by
`snakemake zoo` (`TOKEN_GROUPS`). Only the masked energy's slots are placed (`SLOT_ENERGIES`): an
experiment of another energy kind gets no such file. The PHI spans are the extraction study's
(the embedded world's values, or the user's `extraction.phi`), read from the file its values job
writes; a config without them gets every slot as "other", and the summary says so."""

from __future__ import annotations

from mlmia.attacks.base import get_attack
from mlmia.memorization.token_kinds import SLOT_ENERGIES, has_token_statistics
from mlmia.study.plans.extraction import REGISTRATION, extraction_plan, tokenizer_source
from mlmia.terms.layout import samples, token_files
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


def _phi_values(study) -> str | None:
    """The extraction study's PHI values file (the world's or the user's), None when it does not run."""
    return extraction_plan(study).files["values"] if REGISTRATION.runs(study) else None


def token_inputs(study, experiment: str) -> dict:
    """The attack table, its sample table, the target's tokenizer (unless a hub id) and the PHI values."""
    spec = study.experiments[experiment]
    tokenizer = study.local_input(tokenizer_source(study, spec.target))
    values = _phi_values(study)
    return (
        {"attack": study.path("attack", f"{experiment}.parquet"), "samples": study.path(samples(spec.dataset))}
        | ({"tokenizer": tokenizer} if tokenizer else {})
        | ({"values": values} if values else {})
    )


def token_settings(study, experiment: str) -> dict:
    """What the job computes with (its params): the attacks with their parameters, the energy kind, the
    masked energy's layout (seed, K, mask count), the bootstrap (the metrics'), the tokenizer and where
    the PHI comes from."""
    spec, scoring, metrics = study.experiments[experiment], study.config["scoring"], study.metrics
    phi = study.config["extraction"].get("phi")
    return {
        "attacks": {name: study.attack_params(name) for name in token_attacks(study, experiment)},
        "energy": spec.energy,
        "scoring": {key: scoring[key] for key in ("seed", "patterns", "mask_count")},
        "bootstrap": {"seed": metrics["seed"], "replicates": metrics["bootstrap"]},
        "tokenizer": tokenizer_source(study, spec.target),
        "phi": phi,
        "where": (phi or "the world's PHI") if _phi_values(study) else None,
    }
