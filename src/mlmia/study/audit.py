"""Bring your own: the tables spec of an audit, generated from the `audit:` config section.

An audit crosses targets x references x non-member sources x length buckets x energy kinds x
levels; each combination is one experiment and one column of the table `audit`. The rows are
the paper's overview rows; the figures are ROC curves of every sample-level experiment (linear
and log FPR) and the likelihood-ratio histogram of the first one. The result has the shape of
config/tables.yaml, so the one renderer draws it.
"""

from __future__ import annotations

import itertools
import re

from mlmia.core.errors import UserError

OVERVIEW_ROWS = [
    {"metric": "auc", "attack": "loss", "label": "AUC (A)"},
    {"metric": "auc", "attack": "likelihood_ratio", "label": "AUC (B)"},
    {"metric": "precision", "attack": "loss", "threshold": "population", "label": "Prec. (A, pop.)"},
    {"metric": "recall", "attack": "loss", "threshold": "population", "label": "Rec. (A, pop.)"},
    {"metric": "precision", "attack": "likelihood_ratio", "threshold": "population", "label": "Prec. (B)"},
    {"metric": "recall", "attack": "likelihood_ratio", "threshold": "population", "label": "Rec. (B)"},
    {"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.01, "label": "TPR@1%FPR (B)"},
    {"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.1, "label": "TPR@10%FPR (B)"},
] + [
    {"metric": metric, "role": role, "label": f"{what} ({role.replace('nonmember', 'non-member')})"}
    for role in ("member", "nonmember", "population")
    for metric, what in (("n_samples", "samples"), ("n_patients", "patients"))
]
_NAME = re.compile(r"^[A-Za-z0-9_+-]+$")


def audit_spec(audit: dict, datasets: dict, models: dict) -> dict:
    """Experiments, one table (`audit`) and three figures for the audit described by `audit`."""
    dataset = audit["dataset"]
    if dataset not in datasets:
        raise UserError(
            f"config key audit.dataset: {dataset!r} is not a configured dataset "
            f"(datasets: {', '.join(datasets) or 'none'})"
        )
    for key in ("targets", "references"):
        for name in audit[key]:
            if name not in models:
                raise UserError(
                    f"config key audit.{key}: {name!r} is not a configured model "
                    f"(models: {', '.join(models) or 'none'})"
                )
            if not _NAME.match(name):
                raise UserError(f"config key audit.{key}: model name {name!r} may hold only letters, digits, _ + -")
    same = sorted(set(audit["targets"]) & set(audit["references"]))
    if same:
        raise UserError(
            f"config key audit.references: {same[0]!r} is also a target (a model against itself: every ratio 0)"
        )
    axes = {
        "target": list(audit["targets"]),
        "reference": list(audit["references"]),
        "nonmembers": list(audit["nonmembers"]),
        "length": list(audit["lengths"]),
        "energy": list(audit["energies"]),
        "level": list(audit["levels"]),
    }
    alpha = float(audit["alpha"])
    varying = [axis for axis, values in axes.items() if len(values) > 1]
    experiments, columns = {}, []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        name = "__".join(str(values[axis]) for axis in axes)
        experiments[name] = {
            "dataset": dataset,
            "target": values["target"],
            "reference": values["reference"],
            "nonmembers": values["nonmembers"],
            "population": audit["population"],
            "energy": values["energy"],
            "length": None if values["length"] == "all" else values["length"],
            "level": values["level"],
        }
        header = ", ".join(str(values[axis]) for axis in varying) or f"{values['target']} vs {values['reference']}"
        columns.append({"id": name, "header": header, "experiment": name, "alpha": alpha})
    samples = [name for name, e in experiments.items() if e["level"] == "sample"]
    title = f"Audit of {', '.join(axes['target'])} on dataset {dataset}"
    caption = (
        f"Reference(s): {', '.join(axes['reference'])}; non-members from source(s) "
        f"{', '.join(axes['nonmembers'])}; population (threshold) from {audit['population']}; "
        f"threshold at alpha = {alpha:g}. (A) the target's loss, (B) the likelihood ratio."
    )
    figures = {}
    if samples:
        labels = {name: next(c["header"] for c in columns if c["id"] == name) for name in samples}
        figures = {
            "audit_roc": {"kind": "roc", "title": f"ROC: {title}", "experiments": samples, "labels": labels},
            "audit_roc_log": {
                "kind": "roc",
                "title": f"ROC, log-scale FPR: {title}",
                "experiments": samples,
                "labels": labels,
                "log_x": True,
            },
            "audit_hist": {
                "kind": "histogram",
                "title": f"Likelihood ratio L, members vs non-members ({labels[samples[0]]})",
                "experiment": samples[0],
                "attack": "likelihood_ratio",
                "alpha": alpha,
                "protocol": "corrected",
            },
        }
    return {
        "experiments": experiments,
        "row_sets": {"overview": OVERVIEW_ROWS},
        "tables": {"audit": {"title": title, "caption": caption, "rows": "overview", "columns": columns}},
        "figures": figures,
    }
