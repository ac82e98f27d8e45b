"""The paper's qualitative findings on the embedded default world (the full default run).

Slow (the whole default run, about as long as `make run`): marked `slow`; `make test`
runs it. It checks the workflow's findings table and recomputes the headline comparisons
from the attack tables with scikit-learn, independently of the metrics code.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from workflow_helpers import run_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return run_config(tmp_path_factory.mktemp("default"), "config.yaml")


def lr_auc(workdir, experiment, column="stat"):
    """AUC of "member" over all members vs all non-members (matched pairs), by hand."""
    table = pd.read_parquet(workdir / f"results/attack/{experiment}.parquet")
    if experiment.endswith("_patient"):
        table = table.groupby(["role", "group_id"], as_index=False)[["target", "stat"]].mean()
    scored = table[table.role.isin(["member", "nonmember"])]
    return roc_auc_score(scored.role == "member", -scored[column])


def test_every_finding_holds(default_run):
    checks = pd.read_csv(default_run / "results/findings.csv")
    failed = checks[~checks.holds]
    assert failed.empty, "findings that do not hold:\n" + failed[["claim", "compare", "value", "against", "against_value"]].to_string()
    assert "does NOT hold" not in (default_run / "results/findings.md").read_text()


def test_headline_comparisons_by_hand(default_run):
    # (B) beats (A)
    for experiment in ("base_long_mimic", "base_long_i2b2", "base_short_mimic"):
        assert lr_auc(default_run, experiment) > lr_auc(default_run, experiment, "target")
    # long > short, domain > general reference, Base-b raises (B) and lowers (A)
    assert lr_auc(default_run, "base_long_mimic") > lr_auc(default_run, "base_short_mimic")
    assert lr_auc(default_run, "base_long_mimic") > lr_auc(default_run, "base_long_mimic_general")
    assert lr_auc(default_run, "base_b_long_mimic") > lr_auc(default_run, "base_long_mimic")
    assert lr_auc(default_run, "base_b_long_mimic", "target") < lr_auc(default_run, "base_long_mimic", "target")
    assert lr_auc(default_run, "base_long_mimic_patient") >= lr_auc(default_run, "base_long_mimic")
    assert lr_auc(default_run, "base_long_mimic_enorm") >= lr_auc(default_run, "base_long_mimic") - 1e-9
    assert np.isfinite(lr_auc(default_run, "large_long_mimic"))
