"""Each study's plan: what runs, with which settings, writing which outputs, under which named
target (`snakemake <target>`), and which outputs the HTML report (`snakemake --report`) shows
with which caption. Plain Python, built from a `Study` (no Snakemake here): the rules only turn
a plan into paths and params (rules/*.smk), and each named target is declared here, once.

The studies: the tables spec's target groups (`all`, the paper's tables; `zoo`; `dp`, with the DP
audit's own outputs), the shadow protocol on the MLM (`shadow`) and on a translation target
(`shadow_mt`), canary exposure (`canaries`), d-exposure (`dexposure`) and PHI extraction
(`extraction`). `Study.plans()` holds those the config has.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mlmia.vocabulary.layout import ONE_RUN_CORPUS, SHADOW_MT_PREFIX, SHADOW_PREFIX, TOKENIZER
from mlmia.vocabulary.spec import DEFAULT_GROUP, DP_GROUP

#: the named target of the default group: what `snakemake` builds
ALL = "all"
#: what the shadow protocol writes (in shadow/, and for the translation target in shadow_mt/)
SHADOW_FILES = {"tables_md": "tables.md", "tables_csv": "tables.csv", "figure_png": "figure7.png",
                "figure_pdf": "figure7.pdf", "findings_md": "findings.md", "findings_csv": "findings.csv"}  # fmt: skip
#: what the DP audit writes beside its tables, figures and findings (mlmia.defences)
DP_FILES = {"bounds_csv": "bounds.csv", "bounds_md": "bounds.md", "by_attack": "bounds_by_attack.csv",
            "one_run_csv": "one_run.csv", "one_run_md": "one_run.md", "checks_csv": "checks.csv",
            "findings_csv": "findings.csv", "findings_md": "findings.md"}  # fmt: skip
#: the config keys of canaries that draw the secrets (mlmia.memorization.canaries.draw_canaries, draw_candidates)
CANARY_SECRET_KEYS = ("template", "digits", "repetitions", "per_repetition", "never_inserted", "population",
                      "candidates", "seed")  # fmt: skip
#: the config keys of dexposure that make the PHI-labelled notes (mlmia.world.phi)
DEXPOSURE_PHI_KEYS = ("seed", "patients", "sentences_per_patient", "i2b2_share", "phi_share", "hospitals",
                      "ambiguous", "occurrences", "valid_share", "phrase", "classes", "entities")  # fmt: skip


@dataclass(frozen=True)
class Shown:
    """How an output shows in the HTML report: its caption (report/<caption>.rst), category,
    subcategory and labels (`snakemake.io.report`)."""

    caption: str
    category: str
    subcategory: str | None = None
    labels: dict | None = None


@dataclass(frozen=True)
class Plan:
    """One study: `snakemake <target>` builds `targets`; `outputs` are its rules' named outputs by
    step ({step: {name: path}}); `files` the named files its rules pass between them;
    `settings` what its rules pass to their scripts; `report` the outputs the HTML report shows."""

    target: str
    targets: list[str]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    report: dict[str, Shown] = field(default_factory=dict)

    def paths(self) -> list[str]:
        """Every output of every step."""
        return [path for step in self.outputs.values() for path in step.values()]


def _shown(outputs: dict[str, str], items: dict[str, str], caption: str, category: str, subcategory=None) -> dict:
    """{path: Shown} of the outputs named in `items` ({name: its label in the report})."""
    return {
        outputs[name]: Shown(caption, category, subcategory, {"item": label}) for name, label in items.items()
    }  # fmt: skip


def group_plan(study, group: str) -> Plan:
    """A target group of the tables spec (`all`: the default group, what `snakemake` builds;
    `zoo`; `dp`): its tables, figures, the paper comparison (default group), its findings, and
    for `dp` the DP audit's outputs (`dp_plan`)."""
    targets = (
        [path for table in study.tables if study.group(table) == group for path in study.table_outputs(table)]
        + [p for figure in study.figures if study.group(figure, "figure") == group for p in study.figure_outputs(figure)]
        + ([study.path("paper_comparison.md")] if study.paper_values and group == DEFAULT_GROUP else [])
        + ([study.findings_outputs(group)["markdown"]] if study.finding_checks(group) else [])
    )  # fmt: skip
    if group == DP_GROUP:  # the audit's own outputs, which its rules write with or without the group's tables
        audit = dp_plan(study)
        return replace(audit, targets=targets + (audit.targets if study.config.get("dp_audit") else []))
    return Plan(target=ALL if group == DEFAULT_GROUP else group, targets=targets)


def shadow_plan(study, translation: bool = False) -> Plan:
    """The shadow protocol of Hisamoto et al. (`snakemake shadow`): Alice's and Bob's models, the
    paper's Tables 2-6, Figure 7 and the findings in results/<run>/shadow/; on the translation
    target (`snakemake shadow_mt`) the same files in shadow_mt/."""
    name = "shadow_mt" if translation else "shadow"
    prefix = SHADOW_MT_PREFIX if translation else SHADOW_PREFIX
    models = study.shadow_mt_models() if translation else study.shadow_models()
    names = [model.removeprefix(prefix) for model in models]
    tables = {key: study.path(name, file) for key, file in SHADOW_FILES.items()}
    texts = "pairs" if translation else "text"
    subcategory = "translation target" if translation else "masked language model"
    shown = {"tables_md": "Tables 2-6", "figure_png": "Figure 7", "findings_md": "findings"}
    return Plan(
        target=name,
        targets=list(tables.values()),
        outputs={"tables": tables},
        files={
            "corpus": study.path(name, "corpus.parquet"),
            "split": study.path(name, "split.parquet"),
            "pairs": study.path(name, "pairs.parquet"),
            "texts": [study.path(name, f"{who}.{texts}.parquet") for who in names],
            "features": [study.path(name, f"features_{who}.parquet") for who in names],
        },
        settings={"protocol": study.config.get(name, {}), "names": names},
        report=_shown(tables, shown, "shadow", "Shadow models", subcategory),
    )


def canaries_plan(study) -> Plan:
    """Canary exposure (`snakemake canaries`): the secrets, the canary target's exposure per
    checkpoint, the canaries' membership test and the exposure table and figure."""
    config = study.config["canaries"]
    path = lambda file: study.path("canaries", file)  # noqa: E731
    outputs = {
        "secrets": {"canaries": path("canaries.parquet"), "candidates": path("candidates.parquet")},
        "exposure": {"exposure": path("exposure.parquet")},
        "membership": {"attack": path("membership_attack.parquet"), "csv": path("membership.csv"),
                       "markdown": path("membership.md")},
        "report": {"csv": path("exposure_table.csv"), "markdown": path("exposure_table.md"),
                   "png": path("exposure.png"), "pdf": path("exposure.pdf")},
    }  # fmt: skip
    report = _shown(outputs["report"], {"markdown": "exposure table", "png": "exposure figure"}, "canaries",
                    "Canary exposure")  # fmt: skip
    report |= _shown(outputs["membership"], {"markdown": "membership test"}, "canaries", "Canary exposure")
    return Plan(
        target="canaries",
        targets=[p for step in outputs.values() for p in step.values()],
        outputs=outputs,
        files={"target": path("target"), "membership_scores": path("membership_scores.parquet")},
        settings={
            "secrets": {key: config[key] for key in CANARY_SECRET_KEYS},
            "epochs": sorted(set(config["epochs"])),
        },
        report=report,
    )


def dexposure_plan(study) -> Plan:
    """d-exposure of a de-identification tagger (`snakemake dexposure`): one tagger per (seed,
    repetitions) of each experiment, Tables 1-3, Figures 1-2, the overfitting experiment and the
    findings in results/<run>/dexposure/."""
    from mlmia.memorization.dexposure import main_design, main_runs
    from mlmia.memorization.overfitting import overfit_design, overfit_runs

    config = study.config["dexposure"]
    path = lambda file: study.path("dexposure", file)  # noqa: E731
    report = {f"{name}_{kind}": path(f"{name}.{kind}")
              for name in ("table1", "table2", "table3", "overfit", "findings") for kind in ("md", "csv")}  # fmt: skip
    report |= {f"figure{n}_{kind}": path(f"figure{n}.{kind}") for n in (1, 2) for kind in ("png", "pdf")}
    report |= {
        "figure2_csv": path("figure2.csv"),
        "overfit_seeds_csv": path("overfit_seeds.csv"),
        "report": path("report.md"),
    }
    runs = [path(f"runs/main/seed{seed}_rep{reps}.parquet") for seed, reps in main_runs(config)]
    runs += [path(f"runs/overfit/seed{seed}_rep{reps}.parquet") for seed, reps in overfit_runs(config)]
    shown = {"table1_md": "Table 1", "table2_md": "Table 2", "table3_md": "Table 3", "overfit_md": "overfitting",
             "figure1_png": "Figure 1", "figure2_png": "Figure 2", "findings_md": "findings"}  # fmt: skip
    return Plan(
        target="dexposure",
        targets=list(report.values()),
        outputs={"notes": {"notes": path("notes.parquet"), "chosen": path("chosen.parquet")}, "report": report},
        files={
            "runs": runs,
            "notes_tokenizer": path("tokenizer"),
            # the world's tokenizer, or one trained on the tagger's notes (`tokenizer: notes`)
            "tokenizer": study.path(TOKENIZER) if config["tokenizer"] == "world" else path("tokenizer"),
        },
        settings={
            "phi": {key: config[key] for key in DEXPOSURE_PHI_KEYS},
            # how each tagger is trained (mlmia.memorization.dexposure, .overfitting)
            "training": {"main": main_design(config), "overfit": overfit_design(config)},
        },
        report=_shown(report, shown, "dexposure", "d-exposure"),
    )


def extraction_plan(study) -> Plan:
    """PHI extraction by infilling (`snakemake extraction`): the target's and a reference's
    infills, rates, differences, the table, figure and findings."""
    config = study.config["extraction"]
    path = lambda file: study.path("extraction", file)  # noqa: E731
    models = [config["target"], config["reference"]]
    report = {
        "rates": path("rates.csv"),
        "differences": path("differences.csv"),
        "by_count": path("by_count.csv"),
        "findings_csv": path("findings.csv"),
        "findings": path("findings.md"),
        "table": study.path("tables", "table_extraction.md"),
        "figure": study.path("figures", "fig_extraction.png"),
    }
    shown = {"table": "rates table", "figure": "rates figure", "findings": "findings"}
    return Plan(
        target="extraction",
        targets=list(report.values()),
        outputs={"report": report},
        # the values themselves: temporary, so that no file the study leaves holds one
        files={"values": path("phi.parquet"), "infilled": [path(f"infill/{model}.parquet") for model in models]},
        settings={"models": models},
        report=_shown(report, shown, "extraction", "PHI extraction"),
    )


def dp_plan(study) -> Plan:
    """The DP audit's part of `snakemake dp` (with `dp_audit`): one audit and one check per DP target, the
    bounds, the one-run audit, the findings and the privacy-utility figure in results/<run>/dp/;
    `settings["audits"]` what each target's audit attacks (`mlmia.defences.workflow.audit_plan`)."""
    from mlmia.defences.workflow import audit_plan

    bounds = {key: study.path("dp", file) for key, file in DP_FILES.items()}
    figure = {"png": study.path("dp", "privacy_utility.png"), "pdf": study.path("dp", "privacy_utility.pdf")}
    targets = study.dp_targets()
    audits = {target: study.dp_audit_outputs(target) for target in targets}
    report = _shown(bounds, {"bounds_md": "bounds", "one_run_md": "one-run audit", "findings_md": "findings"}, "dp",
                    "DP audit")  # fmt: skip
    report |= _shown(figure, {"png": "privacy-utility figure"}, "dp", "DP audit")
    return Plan(
        target=DP_GROUP,
        targets=[*bounds.values(), *figure.values(), *(audit["passed"] for audit in audits.values())],
        outputs={"bounds": bounds, "figure": figure},
        files={"records": [audit["record"] for audit in audits.values()]},
        settings={
            "audit": study.config.get("dp_audit", {}),
            "targets": targets,
            "audits": audit_plan(study) if study.config.get("dp_audit") else {},
            "one_run_targets": study.one_run_targets(),
        },
        report=report,
    )


class Plans:
    """The plans of a study's configured studies, by named target (a part of `Study`)."""

    def groups(self) -> list[str]:
        """Every target group: `default` (what `snakemake` builds) and the named ones
        (`snakemake zoo`, `snakemake shadow`)."""
        named = [self.group(t) for t in self.tables] + [self.group(f, "figure") for f in self.figures]
        named += [f.get("group", DEFAULT_GROUP) for f in self.findings]
        named += ["shadow"] if self.config.get("shadow") else []
        named += ["shadow_mt"] if self.config.get("shadow_mt") else []
        return list(dict.fromkeys([DEFAULT_GROUP, *named]))

    def plans(self) -> dict[str, Plan]:
        """Every study this config runs, by its named target: `all` first."""
        config, world = self.config, "corpus" in self.config
        studies = {
            "canaries": world,
            "dexposure": world or bool(config["dexposure"]["i2b2_xml"]),
            "extraction": world or bool(config["extraction"].get("phi")),
        }
        plans = {}
        for group in self.groups():
            plan = self.plan(ALL if group == DEFAULT_GROUP else group)
            plans[plan.target] = plan
        return plans | {name: self.plan(name) for name, present in studies.items() if present}

    def plan(self, name: str) -> Plan:
        """The plan of one study, by its named target (`all`, `zoo`, `shadow`, ...)."""
        if name == "shadow":
            return shadow_plan(self)
        if name == "shadow_mt":
            return shadow_plan(self, translation=True)
        if name == "canaries":
            return canaries_plan(self)
        if name == "dexposure":
            return dexposure_plan(self)
        if name == "extraction":
            return extraction_plan(self)
        return group_plan(self, DEFAULT_GROUP if name == ALL else name)

    def targets(self, group: str = DEFAULT_GROUP) -> list[str]:
        """Everything a target group builds (`default`: what `snakemake` builds)."""
        return self.plan(ALL if group == DEFAULT_GROUP else group).targets

    def dp_targets(self) -> list[str]:
        """The models the DP audit audits: every configured model with a dp setting (with dp_audit)."""
        if not self.config.get("dp_audit"):
            return []
        return [name for name, spec in self.models.items() if spec.get("dp") is not None and "path" not in spec]

    def dp_audit_outputs(self, target: str) -> dict[str, str]:
        """A DP target's audit record (its job never fails on a finding) and the mark its check job
        leaves when the target passes (the job that fails the run)."""
        return {"record": self.path("dp", "audit", f"{target}.json"),
                "passed": self.path("dp", "audit", f"{target}.passed")}  # fmt: skip

    def one_run_targets(self) -> list[str]:
        """The DP targets trained on the one-run audit's canaries (corpus dp_private)."""
        return [name for name in self.dp_targets() if self.models[name].get("corpus") == ONE_RUN_CORPUS]
