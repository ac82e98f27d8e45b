"""The table renderer, findings, exposure features, shards and code digests on small inputs."""

import numpy as np
import pandas as pd
import pytest

from mlmia.attack import Experiment
from mlmia.errors import UserError
from mlmia.exposure import exposed_labels, exposure_metrics, simple_features
from mlmia.findings import check_findings
from mlmia.provenance import module_digest
from mlmia.shards import shard_count, shard_slice
from mlmia.tables import render_latex, render_markdown, tidy_table

EXP = {"e1": Experiment("e1", "d", "t", "r", "mimic", "i2b2", length="long")}


def metrics_frame(rows):
    return pd.DataFrame(rows, columns=["metric", "method", "alpha", "fpr", "protocol", "level", "value", "ci_low", "ci_high"])


METRICS = {
    "e1": metrics_frame(
        [
            ("auc", "lr", np.nan, np.nan, "corrected", "sample", 0.91234, 0.9, 0.93),
            ("auc", "loss", np.nan, np.nan, "corrected", "sample", 0.61, 0.58, 0.64),
            ("precision", "lr_pop", 0.1, np.nan, "corrected", "sample", 88.88, 85.0, 91.0),
            ("precision", "lr_pop", 0.01, np.nan, "corrected", "sample", 99.0, 97.0, 100.0),
            ("tpr_at_fpr", "lr", np.nan, 0.01, "corrected", "sample", 40.0, 30.0, 50.0),
            ("tpr_at_fpr", "lr", np.nan, 0.1, "corrected", "sample", 70.0, 60.0, 80.0),
            ("tpr_at_fpr", "loss", np.nan, 0.1, "corrected", "sample", 20.0, 15.0, 25.0),
        ]
    )
}
SPEC = {
    "title": "T",
    "rows": [
        {"metric": "auc", "method": "lr", "label": "AUC (B)"},
        {"metric": "precision", "method": "lr_pop", "label": "Prec. (B)"},
        {"metric": "tpr_at_fpr", "method": "lr", "fpr": 0.01, "label": "TPR@1%"},
    ],
    "columns": [{"id": "c10", "header": "ten", "experiment": "e1", "alpha": 0.1}, {"id": "c1", "header": "one", "experiment": "e1", "alpha": 0.01}],
}


def test_cells_pick_the_right_metric_and_paper_value():
    tidy = tidy_table("t9", SPEC, {}, EXP, METRICS, {"t9": {"c1": {"precision/lr_pop": 98.5}}}, ["corrected"])
    cell = tidy[(tidy.column == "c1") & (tidy.metric == "precision")].iloc[0]
    assert cell.value == 99.0 and cell.alpha == 0.01 and cell.paper_value == 98.5
    assert tidy[(tidy.column == "c10") & (tidy.metric == "precision")].value.iloc[0] == 88.88
    assert tidy[tidy.metric == "tpr_at_fpr"].value.tolist() == [40.0, 40.0]
    assert pd.isna(tidy[tidy.metric == "auc"].alpha).all()  # AUC has no threshold
    markdown = render_markdown(tidy, SPEC)
    assert "| Prec. (B) | 88.9 [85.0, 91.0] | 99.0 [97.0, 100.0] (98.5) |" in markdown
    assert "| AUC (B) | 0.912 [0.900, 0.930] | 0.912 [0.900, 0.930] |" in markdown
    assert r"\%" in render_latex(tidy, SPEC)


def test_missing_metric_names_table_column_and_row():
    spec = dict(SPEC, rows=[{"metric": "recall", "method": "lr_pop", "label": "Rec. (B)"}])
    with pytest.raises(UserError, match="table 't9', column 'c10', row 'Rec. \\(B\\)': 0 metrics match recall/lr_pop"):
        tidy_table("t9", spec, {}, EXP, METRICS, {}, ["corrected"])


def test_findings_hold_or_not_from_the_numbers():
    findings = [
        {"id": "a", "claim": "lr over loss", "experiments": "sample", "compare": {"metric": "auc", "method": "lr"}, "against": {"metric": "auc", "method": "loss"}},
        {"id": "b", "claim": "recall far above", "experiments": "sample", "margin": 60,
         "compare": {"metric": "tpr_at_fpr", "method": "lr", "fpr": 0.1}, "against": {"metric": "tpr_at_fpr", "method": "loss", "fpr": 0.1}},
    ]  # fmt: skip
    checks = check_findings(findings, METRICS, {"e1": "sample"})
    assert checks.holds.tolist() == [True, False]  # 0.912 > 0.61; 70 - 20 = 50 is not above 60
    assert checks.separated.tolist() == [True, True]
    # a finding scoped to named experiments is checked on those only, whatever their level
    named = [dict(findings[1], experiments=["e1"], margin=40)]
    checks = check_findings(named, METRICS, {"e1": "sample", "e2": "sample"})
    assert checks.experiment.tolist() == ["e1"] and checks.holds.tolist() == [True]  # 50 > 40


def test_exposure_features_by_hand():
    class Tokenizer:
        def __call__(self, texts, add_special_tokens=False):
            return {"input_ids": [[hash(w) % 97 for w in t.split()] for t in texts]}

    texts = pd.Series(["bp 120/80 on 2 meds", "no acute distress"])
    features = simple_features(texts, Tokenizer(), frequencies={})
    assert features.digits.tolist() == [6, 0]
    assert features.length.tolist() == [5, 3]
    assert features.non_alnum.tolist() == [1, 0]


def test_exposure_labels_and_degenerate_case():
    attack = pd.DataFrame(
        {"role": ["member"] * 4 + ["population"] * 10, "stat": [-5.0, -4.0, -3.5, 2.0] + list(np.linspace(-3, 3, 10)), "sample_id": range(14)}
    )
    members = exposed_labels(attack, 0.1)  # threshold: the lowest population value, -3
    assert members.exposed.tolist() == [True, True, True, False]
    # too few of one class: empty cells, not invented numbers
    metrics = exposure_metrics(members, pd.DataFrame({"digits": [1, 2, 3, 4]}), np.zeros((4, 2)), 0.1)
    assert metrics.value.isna().all() and set(metrics.split) == {"train", "test"}


def test_shards_cover_every_sample_once_in_order():
    frame = pd.DataFrame({"sample_id": [f"s{i}" for i in range(10)]})
    assert shard_count(10, 4) == 3 and shard_count(0, 4) == 1
    parts = [shard_slice(frame, i, 3) for i in range(3)]
    assert pd.concat(parts).sample_id.tolist() == frame.sample_id.tolist()
    assert sorted(len(p) for p in parts) == [3, 3, 4]


def test_module_digest_tracks_source():
    assert module_digest("mlmia.tables") != module_digest("mlmia.metrics")
    assert module_digest("mlmia.tables", "mlmia.metrics") == module_digest("mlmia.metrics", "mlmia.tables")
    assert len(module_digest("mlmia.tables")) == 16
