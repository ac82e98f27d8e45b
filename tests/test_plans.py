"""Each study's plan (mlmia.study.plans), tested without Snakemake: what runs, which outputs,
under which named target; that the workflow flags every plan's report items for
`snakemake --report` with the plan's caption; that the Snakefile includes a study's rule file
exactly when the config runs the study; that no rule reads the config itself; and that no rule's
params hold a device or the scoring batch size (its resources do: changing them reruns nothing)."""

import json
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from workflow_helpers import REPO

from mlmia.study.plans import ALL, STUDIES, WORKFLOW_RULES, Caption, Plan
from mlmia.study.plans.base import RUN_ONLY_KEYS
from mlmia.study.plans.dp import dp_audit_outputs, dp_targets
from mlmia.study.plans.shadow import shadow_models
from mlmia.study.study import Study
from mlmia.terms.layout import TOKENIZER

REPORTED = ("shadow", "shadow_mt", "canaries", "dexposure", "extraction", "dp", "audit_cards")


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.fixture(params=["ci.yaml", "config.yaml"])
def study(request, monkeypatch):
    monkeypatch.chdir(REPO)
    return Study.from_config(load(request.param), REPO)


def test_every_study_of_the_embedded_world_has_its_plan_and_named_target(study):
    plans = study.plans()
    assert list(plans)[0] == ALL and {"zoo", "world", *REPORTED} <= set(plans)
    for name, plan in plans.items():
        assert isinstance(plan, Plan) and plan.target == name and plan.targets, name
        assert len(set(plan.targets)) == len(plan.targets), name
    # `snakemake` builds the default group's tables only: no study's outputs
    assert not set(plans[ALL].targets) & {p for name in REPORTED for p in plans[name].paths()}


def test_every_output_lies_under_the_run_and_no_two_plans_write_one_path(study):
    run = f"results/{study.run}/"
    written: dict[str, str] = {}
    for name, plan in study.plans().items():
        if name == "dp":  # the dp group's plan holds the audit's outputs and the group's tables
            assert set(plan.paths()) <= set(plan.targets)
        for path in [*plan.targets, *plan.paths()]:
            assert path.startswith(run), (name, path)
        for path in plan.paths():
            assert written.setdefault(path, name) == name, f"{path}: {written[path]} and {name}"
        # what the report shows is what the plan writes, under the plan's caption
        assert set(plan.report) <= set(plan.paths()), name
        assert not plan.report or isinstance(plan.caption, Caption) and plan.caption.text, name
        for path, shown in plan.report.items():
            assert shown.category, path


def test_the_shadow_plans_write_figure_7_and_both_findings_files(study):
    for name in ("shadow", "shadow_mt"):
        plan = study.plan(name)
        folder = f"results/{study.run}/{name}/"
        assert {f"{folder}figure7.png", f"{folder}figure7.pdf", f"{folder}findings.md", f"{folder}findings.csv",
                f"{folder}tables.md", f"{folder}tables.csv"} == set(plan.targets)  # fmt: skip
        models = shadow_models(study.config, name)
        names = plan.settings["names"]
        assert names[0] == "alice" and len(names) == len(models) == len(plan.files["features"])
        assert plan.settings["protocol"] == study.config[name]
        # one set of rules serves both: the plan names the protocol's own steps
        assert plan.rules == ("rules/shadow.smk",)
        # the translation models train through the shadow rules, the MLMs through train_model
        assert set(plan.settings["models"]) == (set(names) if name == "shadow_mt" else set())
        assert {plan.outputs["tables"][k] for k in ("figure_png", "tables_md", "findings_md")} == set(plan.report)
    assert study.plan("shadow").files["texts"][0].endswith("shadow/alice.text.parquet")
    assert study.plan("shadow_mt").files["texts"][0].endswith("shadow_mt/alice.pairs.parquet")


def test_a_config_without_shadow_mt_or_dp_audit_has_neither_plan(monkeypatch):
    monkeypatch.chdir(REPO)
    config = load("ci.yaml")
    del config["shadow_mt"], config["dp_audit"]
    plans = Study.from_config(config, REPO).plans()
    assert "shadow_mt" not in plans and "dp" not in plans and "shadow" in plans
    # the dp rules' plan is still there (rules/dp.smk reads it), with nothing to audit
    dp = Study.from_config(config, REPO).plan("dp")
    assert dp.settings["targets"] == [] and dp.settings["audits"] == {} and dp.files["records"] == []


def test_the_canaries_plan_lists_what_snakemake_canaries_builds(study):
    plan = study.plan("canaries")
    config = study.config["canaries"]
    assert set(plan.outputs) == {"secrets", "exposure", "membership", "report"}
    assert set(plan.targets) == set(plan.paths()) and len(plan.targets) == 10
    assert plan.settings["epochs"] == sorted(set(config["epochs"]))
    assert plan.settings["secrets"]["template"] == config["template"] and "shape" not in plan.settings["secrets"]
    assert plan.files["target"] not in plan.targets  # the canary target is built on the way
    assert any(path.endswith("exposure.png") for path in plan.report)


def test_the_dexposure_plan_runs_every_tagger_and_reads_its_tokenizer(study):
    from mlmia.memorization.dexposure import main_runs
    from mlmia.memorization.overfitting import overfit_runs

    plan, config = study.plan("dexposure"), study.config["dexposure"]
    assert len(plan.files["runs"]) == len(main_runs(config)) + len(overfit_runs(config))
    assert len(set(plan.files["runs"])) == len(plan.files["runs"])
    world = config["tokenizer"] == "world"
    assert plan.files["tokenizer"] == (study.path(TOKENIZER) if world else plan.files["notes_tokenizer"])
    assert {f"figure{n}.png" for n in (1, 2)} | {f"table{n}.md" for n in (1, 2, 3)} <= {
        Path(p).name for p in plan.report
    }
    assert set(plan.settings["training"]) == {"main", "overfit"} and plan.settings["phi"]["phrase"] == config["phrase"]


def test_the_extraction_plan_reads_back_the_target_and_the_reference(study):
    plan, config = study.plan("extraction"), study.config["extraction"]
    assert plan.settings["models"] == [config["target"], config["reference"]]
    assert [Path(p).name for p in plan.files["infilled"]] == [f"{m}.parquet" for m in plan.settings["models"]]
    # the kinds beside their tokens' membership signal: both shipped configs name zoo_long_mimic
    assert config["token_kinds"] == ["zoo_long_mimic"]
    assert {Path(p).name for p in plan.report} == {"table_extraction.md", "fig_extraction.png", "findings.md",
                                                   "table_vocabulary.md", "table_extraction_kinds.md"}  # fmt: skip
    assert [Path(p).name for p in plan.files["kinds_inputs"]["token_kinds"]] == ["zoo_long_mimic.token_kinds.csv"]
    # the vocabulary check of the two models it reads back (the audit cards read every audited model's)
    assert [Path(p).name for p in plan.files["vocabularies"]] == [f"{m}.csv" for m in plan.settings["models"]]


def test_the_dp_plan_audits_every_dp_target_and_is_built_by_snakemake_dp(study):
    plan = study.plan("dp")
    assert plan.settings["targets"] == dp_targets(study) and list(plan.settings["audits"]) == dp_targets(study)
    passed = {dp_audit_outputs(study, t)["passed"] for t in dp_targets(study)}
    assert passed and passed <= set(plan.targets)
    assert study.path("dp", "bounds.md") in plan.report and study.path("dp", "privacy_utility.png") in plan.report
    # the dp group's tables too
    assert {p for t in study.tables if study.group(t) == "dp" for p in study.table_outputs(t)} <= set(plan.targets)


def test_the_targets_of_a_group_are_its_plans(study):
    for group in study.groups():
        assert study.targets(group) == study.plan(ALL if group == "default" else group).targets


def test_every_caption_is_a_template_jinja_reads():
    env = jinja2.Environment()
    for caption in (REPO / "report").glob("*.rst"):
        env.parse(caption.read_text())


# What the workflow flags for the report: the DAG of every named target on the CI config, without
# running a job (Snakemake's API, in a child process: ~10 s); each caption rendered as the report
# renders it (snakemake.report: the job's params, wildcards, config and rule), but refusing a
# name the job does not have (Jinja's default renders it empty), and read as reStructuredText.
FLAGGED = """
import json, sys, tempfile
from pathlib import Path
from docutils.core import publish_parts
from jinja2 import Environment, StrictUndefined
from snakemake.api import SnakemakeApi
from snakemake.iocontainers import Snakemake
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

repo, targets = Path(sys.argv[1]), sys.argv[2:]
env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=repo / "Snakefile",
                            config_settings=ConfigSettings(configfiles=[repo / "config" / "ci.yaml"]),
                            workdir=Path(tempfile.mkdtemp()))
    workflow.dag(dag_settings=DAGSettings(targets=set(targets), forceall=True))
    inner = workflow._workflow
    inner._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
    inner._build_dag()
    flagged = {}
    for job in inner.dag.jobs:
        for f in job.output:
            if not f.flags.get("report"):
                continue
            caption = Path(str(f.flags["report"].caption)).resolve()
            context = Snakemake(job.input, job.output, job.params, job.wildcards, job.threads, job.resources,
                                job.log, job.rule.module_globals["config"], job.rule.name, None)
            text = env.from_string(caption.read_text()).render(snakemake=context, categories={}, files={})
            publish_parts(text, writer_name="html", settings_overrides={"halt_level": 2})
            flagged[str(f)] = [str(caption), f.flags["report"].category, text]
print(json.dumps(flagged))
"""


def test_the_report_holds_every_studys_tables_figures_and_findings(monkeypatch):
    monkeypatch.chdir(REPO)
    study = Study.from_config(load("ci.yaml"), REPO)
    plans = study.plans()
    result = subprocess.run([sys.executable, "-c", FLAGGED, str(REPO), *plans], capture_output=True, text=True,
                            cwd=REPO)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    flagged = json.loads(result.stdout.strip().splitlines()[-1])
    study_caption = str((REPO / "report" / "study.rst").resolve())
    for name, plan in plans.items():
        if name in REPORTED:
            assert plan.report, name
        for path, shown in plan.report.items():
            # the one caption file of every study, rendering the plan's caption
            assert flagged.get(path) == [study_caption, shown.category, plan.caption.text], path
    # every group's findings, every table's CSV and every figure's PNG
    for group in study.groups():
        if study.finding_checks(group):
            assert study.findings_outputs(group)["markdown"] in flagged, group
    assert {study.table_outputs(t)[0] for t in study.tables} <= set(flagged)
    assert {study.figure_outputs(f)[0] for f in study.figures} <= set(flagged)


def test_every_named_target_resolves_to_one_rule_without_a_failed_guess(tmp_path):
    # a path two rules' patterns match makes Snakemake try both: an input function that fails on
    # the other study's name is printed as an InputFunctionException (extraction's
    # tables/table_extraction.md matched render_table's tables/{table}.md)
    snakemake = str(Path(sys.executable).parent / "snakemake")
    targets = list(Study.from_config(load("ci.yaml"), REPO).plans())
    result = subprocess.run(
        [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", *targets,
         "--configfile", str(REPO / "config" / "ci.yaml")],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Exception" not in result.stdout + result.stderr, (result.stdout + result.stderr)[-3000:]


# The settings that choose how a job runs, not what it computes (the devices and the scoring batch
# size: RUN_ONLY_KEYS) are the rules' resources, never their params: Snakemake reruns a job when its
# params change, not when its resources do. The DAG of every named target on the CI config, built
# twice with Snakemake's API in a child process (~15 s): on the CI config, and with each of those
# keys changed in an overlay; each job's params as Snakemake compares them (its persistence's
# `_params`) and its resources `device` and `batch_size`.
RUN_ONLY = """
import json, sys, tempfile
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

repo, overlay, targets = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]


def jobs(configfiles):
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=repo / "Snakefile",
                                config_settings=ConfigSettings(configfiles=configfiles),
                                workdir=Path(tempfile.mkdtemp()))
        workflow.dag(dag_settings=DAGSettings(targets=set(targets), forceall=True))
        inner = workflow._workflow
        inner._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        inner._build_dag()
        return {f"{job.rule.name} {sorted(job.wildcards_dict.items())}":
                {"rule": job.rule.name, "params": inner.persistence._params(job),
                 "resources": {key: job.resources.get(key) for key in ("device", "batch_size")}}
                for job in inner.dag.jobs}


ci = repo / "config" / "ci.yaml"
print(json.dumps({"ci": jobs([ci]), "changed": jobs([ci, overlay])}))
"""

#: the rules whose jobs run a torch model, each on the device of its resources
DEVICE_RULES = {"train_model", "score_shard", "canary_target", "canary_exposure", "canary_membership_scores",
                "dexposure_train", "dp_audit", "exposure", "extraction_infill", "shadow_features",
                "shadow_mt_features", "shadow_mt_train"}  # fmt: skip
#: the rules that score with `mlmia.scoring.settings.ScoringSettings` (its batch size a resource)
SCORING_RULES = {"score_shard", "canary_membership_scores"}


def test_changing_a_device_or_the_scoring_batch_size_reruns_no_job(tmp_path):
    study = Study.from_config(load("ci.yaml"), REPO)
    # every run-only key set to a value other than the CI config's (a device: cuda or cpu)
    other = lambda key, value: 7 if key == "batch_size" else "cpu" if value == "cuda" else "cuda"  # noqa: E731
    overlay = {section: {key: other(key, study.config[section][key]) for key in keys}
               for section, keys in RUN_ONLY_KEYS.items()}  # fmt: skip
    assert overlay["scoring"] == {"device": "cuda", "batch_size": 7} and overlay["training"] == {"device": "cuda"}
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    result = subprocess.run([sys.executable, "-c", RUN_ONLY, str(REPO.resolve()), str(tmp_path / "overlay.yaml"),
                             *study.plans()], capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    ci, changed = found["ci"], found["changed"]
    assert set(ci) == set(changed) and len(ci) > 300
    # the same params for every job: nothing reruns
    rerun = sorted({ci[job]["rule"] for job in ci if ci[job]["params"] != changed[job]["params"]})
    assert not rerun, f"rules whose params hold a device or the scoring batch size: {rerun}"
    # and the changed values reach the jobs that run a model, as their resources
    moved = {}
    for job in ci:
        for key in ("device", "batch_size"):
            if ci[job]["resources"][key] != changed[job]["resources"][key]:
                moved.setdefault(key, set()).add(ci[job]["rule"])
    assert moved == {"device": DEVICE_RULES, "batch_size": SCORING_RULES}
    for job in ci:
        if ci[job]["rule"] in SCORING_RULES:
            assert (ci[job]["resources"]["batch_size"], changed[job]["resources"]["batch_size"]) == ("auto", 7)


def test_no_rule_reads_the_config_itself():
    # settings, threads and resources reach the rules from their study's plan or from `Study`
    files = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    reads = {path.name: path.read_text().count("config[") + path.read_text().count("config.get(") for path in files}
    assert not any(reads.values()), reads


def test_the_plans_are_the_registry_of_rule_files(study):
    plans = study.plans()
    files = study.rule_files(plans)
    assert files == list(dict.fromkeys(path for plan in plans.values() for path in plan.rules))
    assert files[: len(WORKFLOW_RULES)] == list(WORKFLOW_RULES) and len(set(files)) == len(files)
    # each registered study names its rule files (rules/common.smk is the workflow's helpers)
    named = set(WORKFLOW_RULES) | {path for name in (*STUDIES, "dp") for path in study.plan(name).rules}
    assert named == {f"rules/{path.name}" for path in (REPO / "rules").glob("*.smk")} - {"rules/common.smk"}
    for name, registration in STUDIES.items():
        assert registration.plan(study).target == name and (name in plans) == registration.runs(study)


# Which rule files the Snakefile includes for a config, and the rule files its study's plans name
# (Snakemake's API in a child process: the workflow parsed, no DAG built).
INCLUDED = """
import json, sys, tempfile
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, Quietness, ResourceSettings

repo, out = Path(sys.argv[1]), {}
for configfile in sys.argv[2:]:
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=repo / "Snakefile",
                                config_settings=ConfigSettings(configfiles=[Path(configfile)]),
                                workdir=Path(tempfile.mkdtemp()))._workflow
        study = workflow.globals["STUDY"]
        included = [Path(f.get_path_or_uri(secret_free=True)).resolve().relative_to(repo) for f in workflow.included]
        out[configfile] = {"included": [str(p) for p in included if p.parent.name == "rules"],
                           "rule_files": study.rule_files(), "plans": list(study.plans()),
                           "rules": sorted(rule.name for rule in workflow.rules)}
print(json.dumps(out))
"""


#: each study's own rule file
OWN_RULES = {"shadow": "rules/shadow.smk", "shadow_mt": "rules/shadow.smk", "world": "rules/corpus.smk",
             "canaries": "rules/canaries.smk", "dexposure": "rules/dexposure.smk", "extraction": "rules/extraction.smk",
             "dp": "rules/dp.smk", "audit_cards": "rules/cards.smk"}  # fmt: skip


def test_a_studys_rule_file_is_included_exactly_when_its_plan_is(tmp_path):
    from workflow_helpers import paper_scores_root

    ci = load("ci.yaml")
    variants = {
        "ci": ci,
        "no_translation_target_no_dp": {k: v for k, v in ci.items() if k not in ("shadow_mt", "dp_audit")},
        "no_shadow": {k: v for k, v in ci.items() if k not in ("shadow", "shadow_mt")},
        "no_world": {**load("paper_scores.yaml"), "imported": {**load("paper_scores.yaml")["imported"],
                                                               "root": str(paper_scores_root())}},
    }  # fmt: skip
    for name, config in variants.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
    configs = [str(tmp_path / f"{name}.yaml") for name in variants]
    result = subprocess.run([sys.executable, "-c", INCLUDED, str(REPO.resolve()), *configs], capture_output=True,
                            text=True, cwd=REPO)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    expected_plans = {
        "ci": {"shadow", "shadow_mt", "world", "canaries", "dexposure", "extraction", "dp", "audit_cards"},
        "no_translation_target_no_dp": {"shadow", "world", "canaries", "dexposure", "extraction", "audit_cards"},
        "no_shadow": {"world", "canaries", "dexposure", "extraction", "dp", "audit_cards"},
        "no_world": set(),  # imported scores: no configured model to audit
    }
    for name, path in zip(variants, configs):
        included, plans = found[path]["included"], set(found[path]["plans"])
        assert included[0] == "rules/common.smk" and included[1:] == found[path]["rule_files"], name
        assert plans - {ALL, "zoo", "headline"} == expected_plans[name], name
        assert set(OWN_RULES) | set(STUDIES) == set(OWN_RULES), name
        # a study's rule file is there when a study it serves runs (the shadow protocols share theirs)
        for rule_file in set(OWN_RULES.values()):
            assert (rule_file in included) == any(OWN_RULES.get(s) == rule_file for s in plans), (name, rule_file)
        for protocol in ("shadow", "shadow_mt"):  # each protocol's rules, generated from its plan
            assert (f"{protocol}_split" in found[path]["rules"]) == (protocol in plans), (name, protocol)
        assert ("shadow_mt_train" in found[path]["rules"]) == ("shadow_mt" in plans), name
