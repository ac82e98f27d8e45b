"""The white-box audit pooled over k training runs of each DP target (`dp_audit.gradient_canaries.runs`;
docs/dp.md item 4): the replicas the study plans, the audit's pooling of their
records, and two tiny trainings whose canaries differ. No Snakemake run: one dry run plans the jobs."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import yaml
from test_dp import GROUPS, TEXTS, TINY, tok_dir  # noqa: F401 (tok_dir: the tiny tokenizer fixture)
from test_mechanism_fit import SHIPPED, record_of, sigma_for
from training_helpers import model_entry, train_model
from workflow_helpers import REPO, copy_workflow, run_snakemake, write_config

from mlmia.core.errors import UserError
from mlmia.defences.audit import audit_target, pooled_record
from mlmia.defences.gradient_canaries import inclusion_bits, read_record
from mlmia.defences.report import (
    ONE_RUN_COLUMNS,
    bounds_markdown,
    bounds_table,
    checks_table,
    one_run_markdown,
    one_run_table,
)
from mlmia.metrics.privacy_bounds import fdp_one_run_epsilon
from mlmia.study.plans.dp import audit_replicas, audit_run_settings, audit_runs, dp_targets
from mlmia.study.study import Study

SETTINGS = {"confidence": 0.95, "check_level": 1e-6, "canaries": {"guess_share": 0.2, "count": 40},
            "gradient_canaries": {"count": 2000, "norm": 10.0, "guess_share": 0.03, "score": "likelihood_ratio",
                                  "runs": 2}}  # fmt: skip


def ci(runs: int | None = None) -> Study:
    config = yaml.safe_load((REPO / "config" / "ci.yaml").read_text())
    if runs is not None:
        config["dp_audit"]["gradient_canaries"]["runs"] = runs
    return Study.from_config(config, REPO)


# ------------------------------------------------------------------ the plan


def test_two_runs_plan_a_replica_of_each_dp_target_and_one_run_plans_what_it_did(monkeypatch):
    monkeypatch.chdir(REPO)
    shipped, one, two = ci(), ci(1), ci(2)
    targets = ["dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"]
    assert dp_targets(two) == targets and audit_runs(two.config) == 2
    replicas = {f"{t}~run2": (t, 2) for t in targets}
    assert audit_replicas(two) == replicas and audit_replicas(two, "dp_eps8") == {"dp_eps8~run2": ("dp_eps8", 2)}
    assert two.trained_models() == shipped.trained_models() + list(replicas)
    assert two.model_dir("dp_eps8~run2") == "results/ci/models/dp_eps8~run2"
    # a replica trains as its target, on its text, from its init, with its tokenizer; only its seeds differ
    target, replica = two.training_spec("dp_eps8"), two.training_spec("dp_eps8~run2")
    assert (replica["text"], replica["init"]) == (target["text"], target["init"])
    assert two.training_tokenizer("dp_eps8~run2") == two.training_tokenizer("dp_eps8")
    assert replica["settings"]["seed"] == target["settings"].get("seed", 0) + 1
    assert replica["settings"]["dp"]["canaries"] == {**target["settings"]["dp"]["canaries"], "seed": 1}
    drop = {"seed", "dp"}
    assert {k: v for k, v in replica["settings"].items() if k not in drop} == {
        k: v for k, v in target["settings"].items() if k not in drop
    }
    assert {k: v for k, v in replica["settings"]["dp"].items() if k != "canaries"} == {
        k: v for k, v in target["settings"]["dp"].items() if k != "canaries"
    }
    # a replica is no configured model: no experiment attacks it, no table lists it, the DP audit's targets stay
    assert not [name for name in two.models if "~" in name]
    assert not [name for name, experiment in two.experiments.items() if "~" in repr(experiment)]
    assert two.plan("dp").targets == shipped.plan("dp").targets
    # one run (the default) plans exactly what the config without the key plans
    assert audit_replicas(one) == {} == audit_replicas(shipped) and audit_runs(one.config) == 1
    assert one.trained_models() == shipped.trained_models()
    assert all(one.training_spec(m) == shipped.training_spec(m) for m in shipped.trained_models())
    assert {name: plan.targets for name, plan in one.plans().items()} == {
        name: plan.targets for name, plan in shipped.plans().items()
    }
    assert one.plan("dp").settings == shipped.plan("dp").settings


def test_run_settings_offset_the_training_and_the_canary_seeds():
    settings = {"seed": 3, "epochs": 2, "dp": {"epsilon": 8, "canaries": {"count": 500, "seed": 4}}}
    assert audit_run_settings(settings, 1) is settings
    assert audit_run_settings(settings, 3) == {"seed": 5, "epochs": 2,
                                               "dp": {"epsilon": 8, "canaries": {"count": 500, "seed": 6}}}  # fmt: skip
    # the model's and the canaries' seeds left to their defaults (0), written in by validation
    resolved = model_entry({"dp": {"canaries": {"count": 10}}})
    run2 = audit_run_settings(resolved, 2)
    assert (run2["seed"], run2["dp"]["canaries"]) == (1, {"count": 10, "sentinels": 64, "norm": 10.0, "seed": 1})
    with pytest.raises(KeyError):  # settings not resolved: a programming error
        audit_run_settings({"dp": {"canaries": {"count": 10}}}, 2)


def dry_run_inputs(stdout: str, rule: str) -> dict[str, str]:
    """{output: input line} of each job of `rule` in a dry run's listing."""
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule )", stdout):
        if block.startswith((f"rule {rule}:", f"localrule {rule}:")):
            found = dict(re.findall(r"^\s+(input|output): (.*)$", block, re.M))
            jobs[found.get("output", "")] = found.get("input", "")
    return jobs


def test_snakemake_plans_the_replicas_and_the_audit_reads_both_runs(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "ci.yaml", dp_audit__gradient_canaries__runs=2)
    result = run_snakemake(workdir, "-n", "dp", "--configfile", str(config))
    trained = dry_run_inputs(result.stdout, "train_model")
    for target in ("dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"):
        assert f"results/ci/models/{target}~run2" in trained, target
        audit = dry_run_inputs(result.stdout, "dp_audit")[f"results/ci/dp/audit/{target}.json"]
        assert f"results/ci/models/{target}," in audit + "," and f"results/ci/models/{target}~run2" in audit
    assert "results/ci/models/dp_eps8~run3" not in trained
    # no replica is scored or attacked
    assert "~run2" not in "".join(out for rule in ("score_shard", "attack_table") for out in
                                  dry_run_inputs(result.stdout, rule))  # fmt: skip


# ------------------------------------------------------------------ the pooling


def test_two_runs_pool_into_one_audit_of_twice_the_canaries_with_one_runs_guesses():
    sigma = sigma_for(8.0, SHIPPED)
    first, second = (record_of(sigma, SHIPPED, 2000, seed=seed) for seed in (1, 2))
    info = {"dp": {"epsilon": 8.0, "delta": SHIPPED["delta"], "noise_multiplier": sigma}}
    one = audit_target("t", info, SETTINGS, whitebox=first)
    two = audit_target("t", info, SETTINGS, whitebox=[first, second])
    (single,), (pooled,) = one["canary_audits"], two["canary_audits"]
    assert "runs" not in single and pooled["runs"] == 2
    assert (single["canaries"], pooled["canaries"]) == (2000, 4000)
    assert pooled["guesses"] == single["guesses"] == 60  # ceil(0.03 x 2000 / 2) on each side
    assert pooled["inserted"] == int(first["included"].sum() + second["included"].sum())
    # the f-DP bound of 2 m canaries with one run's guesses, at the family's beta
    assert pooled["fdp_lb"] == pytest.approx(
        fdp_one_run_epsilon(4000, 60, pooled["correct"], SHIPPED["delta"], 1 - SETTINGS["confidence"])
    )
    # the fit's intervals narrow by about 1 / sqrt(2) with twice the observations, and hold the claim
    for key in ("mech_noise_multiplier", "mech_rate", "mech_amplitude"):
        width = {name: row[f"{key}_high"] - row[f"{key}_low"] for name, row in (("one", single), ("two", pooled))}
        assert width["two"] / width["one"] == pytest.approx(2**-0.5, rel=0.15), key
    assert pooled["mech_noise_multiplier_low"] < sigma < pooled["mech_noise_multiplier_high"] and pooled["mech_passed"]
    assert pooled["mech_epsilon_lcl"] < 8.0
    # each run's mechanism checks, named by run; the Gaussian analysis reads all scores
    assert [c["check"] for c in two["checks"]] == [f"{name} (run {run})" for run in (1, 2)
                                                   for name in ("Poisson batch", "noise", "noise by batch")]  # fmt: skip
    assert not two["failures"] and np.isfinite(pooled["gauss_estimate"])
    # a fault in one run fails its own check, named by run
    broken = record_of(sigma, SHIPPED, 2000, seed=3, noise_scale=0.1)
    failed = audit_target("t", info, SETTINGS, whitebox=[first, broken])
    assert any(f.startswith("the noise (run 2) check") for f in failed["failures"])
    assert not any("(run 1)" in f for f in failed["failures"])


def test_one_run_in_a_list_is_the_one_run_audit_and_its_tables_are_unchanged():
    record = record_of(sigma_for(8.0, SHIPPED), SHIPPED, 500, seed=4)
    info = {"dp": {"epsilon": 8.0, "delta": SHIPPED["delta"]}}
    settings = copy.deepcopy(SETTINGS) | {"gradient_canaries": {**SETTINGS["gradient_canaries"], "runs": 1}}
    alone, listed = (audit_target("t", info, settings, whitebox=w) for w in (record, [record]))
    assert alone["canary_audits"][0].keys() == listed["canary_audits"][0].keys()
    assert alone["checks"] == listed["checks"] and alone["failures"] == listed["failures"]
    assert list(one_run_table([alone]).columns) == ONE_RUN_COLUMNS
    assert "whitebox_runs" not in bounds_table([alone]).columns
    assert "| runs |" not in one_run_markdown(one_run_table([alone]), checks_table([alone]), settings)
    assert "One training run per target" in one_run_markdown(one_run_table([alone]), checks_table([alone]), settings)


def test_the_tables_show_the_runs_pooled():
    sigma = sigma_for(8.0, SHIPPED)
    info = {"dp": {"epsilon": 8.0, "delta": SHIPPED["delta"]}}
    audit = audit_target("t", info, SETTINGS, whitebox=[record_of(sigma, SHIPPED, 500, seed=s) for s in (5, 6)])
    one_run = one_run_table([audit])
    assert list(one_run["runs"]) == [2] and list(one_run["canaries"]) == [1000]
    text = one_run_markdown(one_run, checks_table([audit]), SETTINGS)
    header = text.splitlines()[0].split(" | ")
    assert header[header.index("canaries (inserted)") + 1] == "runs" and "2 training runs per target" in text
    assert "noise (run 2)" in text
    table = bounds_table([audit])
    assert list(table["whitebox_runs"]) == [2]
    header = bounds_markdown(table, 0.01, 0.95).splitlines()[0].split(" | ")
    assert header[header.index("white-box bound (/ε)") - 1] == "runs"


def test_pooling_refuses_runs_of_other_settings():
    sigma = sigma_for(8.0, SHIPPED)
    first, second = (record_of(sigma, SHIPPED, 500, seed=seed) for seed in (1, 2))
    with pytest.raises(UserError, match="run 2 has sigma"):
        pooled_record([first, second | {"sigma": sigma * 2}], "t")
    with pytest.raises(UserError, match="run 2 has count"):
        pooled_record([first, record_of(sigma, SHIPPED, 400, seed=2)], "t")
    pooled = pooled_record([first, second], "t")
    # canaries of both runs first, then both runs' sentinels
    assert pooled["observed"].shape == (SHIPPED["steps"], 1000 + 128) and pooled["count"] == 1000
    assert np.array_equal(pooled["observed"][:, 500:1000], second["observed"][:, :500])
    assert np.array_equal(pooled["observed"][:, 1064:], second["observed"][:, 500:])


# ------------------------------------------------------------------ two tiny trainings


def test_two_tiny_runs_of_one_target_draw_their_own_canaries_and_pool(tok_dir, tmp_path):  # noqa: F811
    config = {**TINY, "dp": {"epsilon": 8.0, "delta": 1e-3, "canaries": {"count": 100}, "clipping": "per_sample"}}
    infos = {}
    for run in (1, 2):
        infos[run] = train_model(TEXTS, tok_dir, tmp_path / f"run{run}", config=audit_run_settings(model_entry(config), run),
                                 device="cpu", groups=GROUPS)  # fmt: skip
    records = [read_record(tmp_path / f"run{run}", infos[run]["dp"], f"run {run}") for run in (1, 2)]
    assert not np.array_equal(records[0]["included"], records[1]["included"])
    assert np.array_equal(records[1]["included"], inclusion_bits(100, 1))
    assert not np.allclose(records[0]["observed"], records[1]["observed"])
    audit = audit_target("tiny", infos[1], SETTINGS | {"gradient_canaries": {**SETTINGS["gradient_canaries"],
                                                                             "guess_share": 0.2}}, whitebox=records)  # fmt: skip
    (white,) = audit["canary_audits"]
    assert white["runs"] == 2 and white["canaries"] == 200 and white["guesses"] == 20
    assert len(audit["checks"]) == 6 and not audit["failures"]
