"""The tables spec's target groups: `all` (the default group, what `snakemake` builds: the paper's
tables, figures, the paper comparison and the findings), `zoo`, and `dp` (whose tables the DP
audit's plan joins, `mlmia.study.plans.dp`). Their rules are the workflow's own (`WORKFLOW_RULES`)."""

from __future__ import annotations

from mlmia.study.plans.base import ALL, WORKFLOW_RULES, Plan
from mlmia.study.plans.tokens import token_targets
from mlmia.terms.spec import DEFAULT_GROUP


def group_plan(study, group: str) -> Plan:
    """A target group of the tables spec (`all`: the default group, what `snakemake` builds;
    `zoo`; `dp`): its tables, figures, the paper comparison (default group) and its findings; the
    zoo's, its experiments' per-slot scores by token kind too (`mlmia.study.plans.tokens`)."""
    targets = (
        [path for table in study.tables if study.group(table) == group for path in study.table_outputs(table)]
        + [p for figure in study.figures if study.group(figure, "figure") == group for p in study.figure_outputs(figure)]
        + ([study.path("paper_comparison.md")] if study.paper_values and group == DEFAULT_GROUP else [])
        + ([study.findings_outputs(group)["markdown"]] if study.finding_checks(group) else [])
        + token_targets(study, group)
    )  # fmt: skip
    return Plan(target=ALL if group == DEFAULT_GROUP else group, targets=targets, rules=WORKFLOW_RULES)
