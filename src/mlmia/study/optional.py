"""Optional experiments: a tables spec may mark an experiment `optional: true`; where the config has
not its models (the paper's setup has no masked-diffusion target), the experiment is left out, with
the table columns, figure panels and finding checks that read it. An experiment not marked so
that names a model the config lacks is refused as before (`mlmia.study.study.Study`)."""

from __future__ import annotations

OPTIONAL = "optional"


def _kept(entry, gone: set) -> bool:
    """Whether a finding's scope entry (an experiment, or a pair of them) reads none of `gone`."""
    return not ({entry} if isinstance(entry, str) else set(entry)) & gone


def without_optional(spec: dict, models: set) -> dict:
    """`spec` without its optional experiments that name a model not in `models`, and without what
    reads them; the `optional` key itself is dropped from every experiment."""
    experiments = spec.get("experiments", {})
    gone = {
        name
        for name, entry in experiments.items()
        if entry.get(OPTIONAL)
        and any(entry.get(role) not in models for role in ("target", "reference") if entry.get(role))
    }
    tables = {}
    for name, table in spec.get("tables", {}).items():
        columns = [c for c in table.get("columns", []) if c["experiment"] not in gone]
        if columns or not table.get("columns"):
            tables[name] = {**table, "columns": columns} if "columns" in table else table
    figures = {}
    for name, figure in spec.get("figures", {}).items():
        if figure.get("experiment") in gone:
            continue
        if "experiments" in figure:
            kept = [e for e in figure["experiments"] if e not in gone]
            if not kept:
                continue
            figure = {**figure, "experiments": kept}
        figures[name] = figure
    findings = []
    for finding in spec.get("findings", []):
        if any(finding[side].get("experiment") in gone for side in ("compare", "against")):
            continue
        scope = finding.get("experiments")
        if isinstance(scope, list):
            scope = [entry for entry in scope if _kept(entry, gone)]
            if not scope:
                continue
            finding = {**finding, "experiments": scope}
        findings.append(finding)
    return {
        **spec,
        "experiments": {
            name: {k: v for k, v in entry.items() if k != OPTIONAL}
            for name, entry in experiments.items()
            if name not in gone
        },
        "tables": tables,
        "figures": figures,
        "findings": findings,
    }
