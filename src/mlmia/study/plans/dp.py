"""The DP audit (`snakemake dp` with config `dp_audit`, rules/dp.smk; docs/dp.md): one audit and
one check per DP target, the bounds, the one-run audit, the findings and the privacy-utility figure
in results/<run>/dp/. A study like the others (`REGISTRATION`): its named target is the tables
spec's group `dp`, whose tables join the audit's outputs (`dp_study_plan`), and the models it
trains are the DP targets' audit replicas.

What each target's audit attacks (`audit_plan`): the targets are those of the metrics tables of the
tables spec's group ``dp`` (their columns' experiments), one experiment per target, at sample level;
each experiment's attacks are every attack its attack table holds (`Study.experiment_attacks`). The
utility reads the target's masked and normalized energies from the same attack table, so the
experiment's attacks must read both (the zoo's rows do: likelihood_ratio_normalized)."""

from __future__ import annotations

from dataclasses import replace

from mlmia.attacks.base import input_column
from mlmia.core.errors import UserError
from mlmia.study.plans.base import Caption, Plan, Registration, shown
from mlmia.study.plans.groups import group_plan
from mlmia.terms.layout import ONE_RUN_CANARIES, ONE_RUN_CORPUS, audit_run, samples
from mlmia.terms.spec import DP_GROUP

RULES = "rules/dp.smk"
#: what the DP audit writes beside its tables, figures and findings (mlmia.defences)
DP_FILES = {"bounds_csv": "bounds.csv", "bounds_md": "bounds.md", "by_attack": "bounds_by_attack.csv",
            "one_run_csv": "one_run.csv", "one_run_md": "one_run.md", "checks_csv": "checks.csv",
            "findings_csv": "findings.csv", "findings_md": "findings.md"}  # fmt: skip


def gradient_canaries(config: dict) -> dict | None:
    """The gradient canaries every DP model trains with (`dp_audit.gradient_canaries`, the
    training's part), None without the DP audit or with count 0."""
    settings = (config.get("dp_audit") or {}).get("gradient_canaries") or {}
    if not settings.get("count"):
        return None
    return {key: settings[key] for key in ("count", "sentinels", "norm", "seed")}


def audit_run_settings(settings: dict, run: int) -> dict:
    """The training settings of run `run` (1, 2, ...) of a DP target whose settings (with the
    gradient canaries, `dp.canaries`) are `settings`: the training's seed and the canaries' seed
    offset by run - 1, so that each run draws its own noise, batches and inclusion bits; run 1 is the
    target itself."""
    if run == 1:
        return settings
    canaries = settings["dp"]["canaries"]
    dp = {**settings["dp"], "canaries": {**canaries, "seed": canaries["seed"] + run - 1}}
    return {**settings, "seed": settings["seed"] + run - 1, "dp": dp}


def dp_targets(study) -> list[str]:
    """The models the DP audit audits: every configured model with a dp setting (with dp_audit)."""
    if not study.config.get("dp_audit"):
        return []
    return [name for name, spec in study.models.items() if spec.get("dp") is not None and "path" not in spec]


def dp_audit_outputs(study, target: str) -> dict[str, str]:
    """A DP target's audit record (its job never fails on a finding) and the mark its check job
    leaves when the target passes (the job that fails the run)."""
    return {"record": study.path("dp", "audit", f"{target}.json"),
            "passed": study.path("dp", "audit", f"{target}.passed")}  # fmt: skip


def one_run_targets(study) -> list[str]:
    """The DP targets trained on the one-run audit's canaries (corpus dp_private)."""
    return [name for name in dp_targets(study) if study.models[name].get("corpus") == ONE_RUN_CORPUS]


def audit_runs(config: dict) -> int:
    """How many training runs of each DP target the white-box audit pools
    (`dp_audit.gradient_canaries.runs`; 1 without the DP audit or without gradient canaries)."""
    settings = (config.get("dp_audit") or {}).get("gradient_canaries") or {}
    return int(settings["runs"]) if settings.get("count") else 1


def audit_replicas(study, target: str | None = None) -> dict[str, tuple[str, int]]:
    """The DP targets' audit replicas the workflow trains ({name: (target, run)}, runs 2 .. k of
    `audit_runs`; of one `target` only, or of every DP target): none with runs = 1."""
    runs = audit_runs(study.config)
    targets = dp_targets(study) if target is None else [target]
    return {audit_run(name, run): (name, run) for name in targets for run in range(2, runs + 1)}


def dp_plan(study) -> Plan:
    """The DP audit's part of `snakemake dp` (with `dp_audit`): one audit and one check per DP target, the
    bounds, the one-run audit, the findings and the privacy-utility figure in results/<run>/dp/;
    `settings["audits"]` what each target's audit attacks (`audit_plan`)."""
    bounds = {key: study.path("dp", file) for key, file in DP_FILES.items()}
    figure = {"png": study.path("dp", "privacy_utility.png"), "pdf": study.path("dp", "privacy_utility.pdf")}
    targets = dp_targets(study)
    audits = {target: dp_audit_outputs(study, target) for target in targets}
    report = shown(bounds, {"bounds_md": "bounds", "one_run_md": "one-run audit", "findings_md": "findings"},
                   "DP audit")  # fmt: skip
    report |= shown(figure, {"png": "privacy-utility figure"}, "DP audit")
    # without dp_audit the dp group is left out and this plan has nothing to audit (no settings either)
    audit_settings = study.config.get("dp_audit") or {}
    metrics = study.config["metrics"]
    return Plan(
        target=DP_GROUP,
        targets=[*bounds.values(), *figure.values(), *(audit["passed"] for audit in audits.values())],
        outputs={"bounds": bounds, "figure": figure},
        files={
            "records": [audit["record"] for audit in audits.values()],
            "record": dp_audit_outputs(study, "{target}")["record"],
            "passed": dp_audit_outputs(study, "{target}")["passed"],
        },
        settings={
            "audit": audit_settings,
            "targets": targets,
            "audits": audit_plan(study) if audit_settings else {},
            "one_run_targets": one_run_targets(study),
            "bootstrap": {"bootstrap": metrics["bootstrap"], "seed": metrics["seed"]},
            "fpr": audit_settings.get("fpr"),
            "style": study.figure_style,
        },
        resources={"audit": study.resources("scoring")},
        rules=(RULES,),
        report=report,
        caption=Caption(
            f"The DP audit (docs/dp.md): per DP target, the empirical lower bounds on epsilon at FPR "
            f"{audit_settings.get('fpr')} with confidence {audit_settings.get('confidence')} beside the "
            "target's guarantee, the one-run audit and mechanism checks, the findings, and the privacy-utility figure "
            "over all targets."
        ),
    )


def audit_plan(study) -> dict[str, dict]:
    """{target: {"experiment", "dataset", "model_dir", "attacks": {name: parameters},
    "masked_column", "normalized_column", "reference_column"}} in the order of the dp group's table
    columns; reference_column: the reference's masked energy where an attack reads it (the utility's
    paired comparison with the public model), else None."""
    plan: dict[str, dict] = {}
    for table in study.tables:
        if study.group(table) != DP_GROUP or study.kind(table) != "metrics":
            continue
        for name in study.table_experiments(table):
            experiment = study.experiments[name]
            where = f"{study.spec_name}: table {table!r}: experiment {name!r}"
            if experiment.level != "sample":
                raise UserError(f"{where}: the DP audit bounds samples; level {experiment.level!r} is not offered")
            known = plan.get(experiment.target)
            if known is not None and known["experiment"] != name:
                raise UserError(
                    f"{where}: target {experiment.target!r} is already audited by experiment {known['experiment']!r}"
                )
            read = study.attack_columns(name).get("target", [])
            columns = {}
            for kind in ("masked", "normalized"):
                column = "energy" if experiment.energy == kind else f"energy@{kind}"
                if column not in read:
                    raise UserError(
                        f"{where}: its attacks read no {kind} energy of the target, which the utility needs "
                        f"(add a row of an attack that does, e.g. likelihood_ratio_normalized)"
                    )
                columns[f"{kind}_column"] = input_column("target", column)
                if kind == "masked":
                    reference = column in study.attack_columns(name).get("reference", [])
                    columns["reference_column"] = input_column("reference", column) if reference else None
            attacks = study.experiment_attacks(name)
            plan[experiment.target] = {
                "experiment": name,
                "dataset": experiment.dataset,
                "model_dir": study.model_dir(experiment.target),
                "attacks": {attack: study.attack_params(attack) for attack in attacks},
                **columns,
            }
    if not plan:
        raise UserError(
            f"config key dp_audit: {study.spec_name} has no metrics table of group {DP_GROUP!r} (its columns name "
            "the experiments that attack the DP targets)"
        )
    return plan


def dp_audit_inputs(study, plan: Plan, target: str) -> dict:
    """What a DP target's audit job reads (rules/dp.smk; `plan`: the DP study's): its model; its
    audit replicas, runs 2 .. k of dp_audit.gradient_canaries.runs (none with one run); its token
    canaries when it trained on them; its attack table, metrics and samples when the tables spec's
    group dp attacks it (the plan's audits)."""
    inputs = {"model": study.model_input(target)}
    replicas = audit_replicas(study, target)
    if replicas:
        inputs["replicas"] = [study.model_dir(name) for name in replicas]
    if target in plan.settings["one_run_targets"]:
        inputs["canaries"] = study.path(ONE_RUN_CANARIES)
    if target in plan.settings["audits"]:
        item = plan.settings["audits"][target]
        inputs |= {
            "attack": study.path("attack", f"{item['experiment']}.parquet"),
            "metrics": study.path("metrics", f"{item['experiment']}.parquet"),
            "samples": study.path(samples(item["dataset"])),
        }
    return inputs


def dp_study_plan(study) -> Plan:
    """`snakemake dp`: the tables spec's group `dp` (its tables, figures and findings) and the DP
    audit's own outputs (`dp_plan`), which its rules write with or without the group's tables."""
    tables, audit = group_plan(study, DP_GROUP), dp_plan(study)
    return replace(audit, targets=tables.targets + audit.targets, rules=(*tables.rules, *audit.rules))


def _replica_training(study, name: str) -> dict:
    """How audit replica `name` trains: its target's training (with the canaries) in its run's
    settings (`audit_run_settings`)."""
    target, run = audit_replicas(study)[name]
    spec = study.training_spec(target)
    return {**spec, "settings": audit_run_settings(spec["settings"], run)}


#: with `dp_audit` (without it the tables spec's group dp is left out, `Study`)
REGISTRATION = Registration(
    DP_GROUP,
    lambda study: DP_GROUP in study.groups(),
    dp_study_plan,
    models=lambda study: list(audit_replicas(study)),
    training=_replica_training,
)
