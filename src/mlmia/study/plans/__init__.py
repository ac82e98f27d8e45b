"""Each study's plan: what runs, with which settings and resources, writing which outputs, under
which named target (`snakemake <target>`), from which rule file, and which outputs the HTML report
(`snakemake --report`) shows with which caption. Plain Python, built from a `Study` (no Snakemake
here): the rules only turn a plan into paths and params (rules/*.smk), and each named target is
declared here, once.

The plans are the registry of studies (docs/adding_a_study.md): the tables spec's target groups
(`all`, the paper's tables; `zoo`: `groups`), and each study in `STUDIES`: the embedded world
(`world`), the shadow protocol on the MLM (`shadow`) and on a translation target (`shadow_mt`),
canary exposure (`canaries`), d-exposure (`dexposure`), PHI extraction (`extraction`), the DP audit
(`dp`, whose plan joins the tables spec's group `dp`) and the audit cards over them all
(`audit_cards`), one module each. `Study.plans()` holds those the config runs, and the
Snakefile includes the rule files they name (`Study.rule_files()`).
"""

from __future__ import annotations

from functools import cached_property

from mlmia.study.plans import canaries, cards, dexposure, dp, extraction, shadow, world
from mlmia.study.plans.base import ALL, WORKFLOW_RULES, Caption, Plan, Registration, Resources, Shown
from mlmia.study.plans.groups import group_plan
from mlmia.terms.spec import DEFAULT_GROUP

__all__ = ["ALL", "STUDIES", "WORKFLOW_RULES", "Caption", "Plan", "Plans", "Registration", "Resources", "Shown"]

#: every study beside the tables spec's groups, by its named target, in the order `Study.plans()` lists them
STUDIES: dict[str, Registration] = {
    registration.name: registration
    for registration in (
        *shadow.REGISTRATIONS,
        world.REGISTRATION,
        canaries.REGISTRATION,
        dexposure.REGISTRATION,
        extraction.REGISTRATION,
        dp.REGISTRATION,
        cards.REGISTRATION,
    )
}


class Plans:
    """The plans of a study's configured studies, by named target (a part of `Study`); what only
    one study computes stays in its plan module."""

    def groups(self) -> list[str]:
        """Every target group of the tables spec: `default` (what `snakemake` builds) and the named
        ones (`snakemake zoo`, `snakemake dp`)."""
        named = [self.group(t) for t in self.tables] + [self.group(f, "figure") for f in self.figures]
        named += [f.get("group", DEFAULT_GROUP) for f in self.findings]
        return list(dict.fromkeys([DEFAULT_GROUP, *named]))

    def plans(self) -> dict[str, Plan]:
        """Every study this config runs, by its named target: the groups' (`all` first), then each
        registered study's (`STUDIES`) that the config runs."""
        plans = {}
        for group in self.groups():
            plan = self.plan(ALL if group == DEFAULT_GROUP else group)
            plans[plan.target] = plan
        return plans | {name: study.plan(self) for name, study in STUDIES.items() if study.runs(self)}

    def plan(self, name: str) -> Plan:
        """The plan of one study, by its named target (`all`, `zoo`, `shadow`, ...)."""
        if name in STUDIES:
            return STUDIES[name].plan(self)
        return group_plan(self, DEFAULT_GROUP if name == ALL else name)

    @cached_property
    def study_models(self) -> dict[str, Registration]:
        """The masked language models the configured studies train through the workflow's one
        training rule (rules/train.smk), by name: the study that trains each (`Registration.models`,
        `.training`)."""
        return {
            name: study
            for study in STUDIES.values()
            if study.models and study.runs(self)
            for name in study.models(self)
        }

    def rule_files(self, plans: dict[str, Plan] | None = None) -> list[str]:
        """The rule files of the studies this config runs (`plans`, by default `plans()`), each once
        (relative to the workflow's folder): what the Snakefile includes."""
        plans = self.plans() if plans is None else plans
        return list(dict.fromkeys(path for plan in plans.values() for path in plan.rules))

    def targets(self, group: str = DEFAULT_GROUP) -> list[str]:
        """Everything a target group builds (`default`: what `snakemake` builds)."""
        return self.plan(ALL if group == DEFAULT_GROUP else group).targets
