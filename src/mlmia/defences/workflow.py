"""What `snakemake dp` audits: each DP target with the experiment that attacks it (no Snakemake here).

The targets are those of the metrics tables of the tables spec's group ``dp`` (their columns'
experiments), one experiment per target, at sample level; each experiment's attacks are every
attack its attack table holds (`mlmia.study.study.Study.experiment_attacks`). The utility
reads the target's masked and normalized energies from the same attack table, so the
experiment's attacks must read both (the zoo's rows do: likelihood_ratio_normalized).
"""

from __future__ import annotations

from mlmia.attacks.base import input_column
from mlmia.core.errors import UserError
from mlmia.terms.spec import DP_GROUP


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
