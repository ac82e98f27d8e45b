"""What a study's plan is made of: `Plan` (what runs, with which settings and resources, writing
which outputs, under which named target, from which rule file), how an output shows in the HTML
report (`Shown`, `Caption`) and what a step's jobs ask for (`Resources`). Plain Python: no
Snakemake here, no study's meaning either (each study's module in `mlmia.study.plans` has its own)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mlmia.scoring.settings import AUTOMATIC_BATCH, RUN_FIELDS, batch_size_resource

#: the named target of the default group: what `snakemake` builds
ALL = "all"
#: the rule files of the tables spec's groups (the paper's workflow: sample tables in, scores,
#: attacks, metrics, tables, figures, findings), relative to the workflow's folder
WORKFLOW_RULES = ("rules/import.smk", "rules/datasets.smk", "rules/train.smk", "rules/score.smk", "rules/zoo.smk",
                  "rules/attack.smk", "rules/exposure.smk", "rules/tables.smk", "rules/figures.smk",
                  "rules/report.smk")  # fmt: skip

#: the config's keys that choose how a job runs, not what it computes: the torch devices and the
#: scoring batch size (their results agree but for the device's arithmetic and, in a training, its
#: random draws). Rules pass them as resources (`Resources`), never as params, so that changing one
#: reruns no job (tests/test_plans.py checks every rule of the CI config's DAG); no audit card's
#: config digest holds them either.
RUN_ONLY_KEYS = {"training": ("device",), "scoring": RUN_FIELDS, "exposure": ("device",), "dexposure": ("device",)}


@dataclass(frozen=True)
class Caption:
    """A study's caption in the HTML report (reStructuredText), built from its settings by its plan.
    The workflow passes it to the jobs whose outputs the report shows as the param `caption`, which
    the one caption file of every study renders (report/study.rst). Snakemake checks a param for
    changes only when it is a plain value (a str, a number, a dict ...): an object like this one is
    left out, so a caption's edit reruns no job, as an edited caption file never did."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Shown:
    """How an output shows in the HTML report: its category, subcategory and labels
    (`snakemake.io.report`); its caption is its plan's."""

    category: str
    subcategory: str | None = None
    labels: dict | None = None


@dataclass(frozen=True)
class Resources:
    """What a step's jobs ask for: threads, memory (MB), the torch device and GPUs per job (the
    config's `training` or `scoring` settings, or a study's own), and a scoring job's batch size
    (`scoring.batch_size` as `mlmia.scoring.settings.batch_size_resource` writes it: "auto" for
    null). A rule passes all of them as its `resources:`, the device and the batch size included
    (`RUN_ONLY_KEYS`): Snakemake reruns no job when a resource changes, so a run moved from the CPU
    to a GPU keeps its models and scores."""

    threads: int
    mem_mb: int
    device: str
    gpus: int = 0
    batch_size: int | str = AUTOMATIC_BATCH


@dataclass(frozen=True)
class Plan:
    """One study: `snakemake <target>` builds `targets`; `outputs` are its rules' named outputs by
    step ({step: {name: path}}); `files` the named files its rules pass between them; `settings`
    what its rules pass to their scripts; `resources` what each step's jobs ask for; `rules` the rule files its rules live in (relative to the workflow's folder), which the
    Snakefile includes when the config runs the study; `report` the outputs the HTML report shows,
    `caption` their caption."""

    target: str
    targets: list[str]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    resources: dict[str, Resources] = field(default_factory=dict)
    rules: tuple[str, ...] = ()
    report: dict[str, Shown] = field(default_factory=dict)
    caption: Caption | None = None

    def paths(self) -> list[str]:
        """Every output of every step."""
        return [path for step in self.outputs.values() for path in step.values()]


def shown(outputs: dict[str, str], items: dict[str, str], category: str, subcategory=None) -> dict[str, Shown]:
    """{path: Shown} of the outputs named in `items` ({name: its label in the report})."""
    return {outputs[name]: Shown(category, subcategory, {"item": label}) for name, label in items.items()}


def resources(config: dict, kind: str) -> Resources:
    """The resources of the config's `training` or `scoring` jobs (GPUs per job and the batch size:
    scoring's)."""
    section = config[kind]
    if kind != "scoring":
        return Resources(section["threads"], section["mem_mb"], section["device"])
    batch_size = batch_size_resource(section["batch_size"])
    return Resources(section["threads"], section["mem_mb"], section["device"], section["gpus_per_job"], batch_size)


@dataclass(frozen=True)
class Registration:
    """A study the workflow can run beside the tables spec's groups: its named target, whether a
    config runs it (`runs`, of a `Study`), its plan (`plan`, of a `Study`), and the masked language
    models it trains through the workflow's one training rule (rules/train.smk): their names
    (`models`, of a `Study`) and how each trains (`training`, of a `Study` and a name: what
    `Study.training_spec` gives, its "text", "settings" and "init"). `mlmia.study.plans` lists
    every one (`STUDIES`)."""

    name: str
    runs: Callable[..., bool]
    plan: Callable[..., Plan]
    models: Callable[..., list[str]] | None = None
    training: Callable[..., dict] | None = None
