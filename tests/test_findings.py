"""The paper's qualitative findings on the embedded default world (the full default run).

The checks of attacks against the blind baseline (`kind: baseline`) are reported, not asserted.

It reads the whole default run (about as long as `make run`): marked `default_world`, run by
`make test-default`, not by `make test` (the CI run's findings table is checked there, in
tests/test_workflow_embedded.py). It checks the workflow's findings table and recomputes the headline comparisons
from the attack tables with scikit-learn, independently of the metrics code.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

pytestmark = pytest.mark.default_world


def lr_auc(workdir, experiment, column="stat"):
    """AUC of "member" over all members vs all non-members (matched pairs), by hand."""
    table = pd.read_parquet(workdir / f"results/default/attack/{experiment}.parquet")
    table = table.assign(target=table.target_energy, stat=table.target_energy - table.reference_energy)
    if experiment.endswith("_patient"):
        table = table.groupby(["role", "group_id"], as_index=False)[["target", "stat"]].mean()
    scored = table[table.role.isin(["member", "nonmember"])]
    return roc_auc_score(scored.role == "member", -scored[column])


HEADLINE = [  # (finding, experiment): each must separate (paired 95% interval above the margin)
    ("lr_beats_loss", "base_long_mimic"),
    ("lr_beats_loss", "base_long_i2b2"),
    ("long_beats_short", "base_long_mimic"),
    ("domain_beats_general", "base_long_mimic"),
    ("names_raise_lr", "base_b_long_mimic"),
    ("names_lower_loss", "base_long_mimic"),
]


def test_every_finding_holds_and_the_headline_ones_separate(default_run):
    checks = pd.read_csv(default_run / "results/default/findings.csv")
    # the attacks against blind are flags the report prints, not claims this world must reproduce
    assert set(checks.kind) == {"finding", "baseline"}
    checks = checks[checks.kind == "finding"]
    failed = checks[~checks.holds]
    assert failed.empty, (
        "findings that do not hold:\n" + failed[["claim", "first", "first_value", "second", "second_value"]].to_string()
    )
    text = (default_run / "results/default/findings.md").read_text()
    assert f"Findings: {len(checks)} of {len(checks)} hold" in text
    headline = checks.set_index(["finding", "scope"]).loc[HEADLINE]
    assert (headline.verdict == "separated").all(), headline[["difference", "difference_ci_low", "verdict"]].to_string()
    assert (headline.difference_ci_low > headline.margin).all()


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
