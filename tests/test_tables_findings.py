"""The table renderer, findings with paired intervals, Table 7's features and split, shards, code digests."""

import numpy as np
import pandas as pd
import pytest

from mlmia.attacks.protocols import METRIC_COLUMNS
from mlmia.core.errors import UserError
from mlmia.core.provenance import module_digest
from mlmia.memorization.exposed_samples import exposed_labels, exposure_metrics, patient_split, simple_features
from mlmia.report.finding import findings_frame
from mlmia.report.findings import check_findings, render
from mlmia.report.tables import render_latex, render_markdown, render_table, tidy_table
from mlmia.scoring.shards import shard_count, shard_slice
from mlmia.terms.experiment import Experiment
from mlmia.terms.schema import defaults


def experiment(name, dataset, target, reference, nonmembers, population, **given):
    """An Experiment whose other fields are the tables schema's defaults, as validation writes them."""
    spec = {
        k: v for k, v in defaults("experiments", "*", schema="tables").items() if k not in ("reference", "optional")
    }
    return Experiment(name, dataset, target, reference, nonmembers, population, **{**spec, **given})


EXP = {"e1": experiment("e1", "d", "t", "r", "mimic", "i2b2", length="long")}


def metrics_frame(rows, replicates=()):
    """Estimate rows (metric, attack, threshold, alpha, fpr, value, low, high) and replicate
    rows (metric, attack, threshold, alpha, fpr, replicate, value)."""
    out = [(m, a, t, al, f, "corrected", "sample", v, lo, hi, not np.isnan(v) or m != "tpr_at_fpr", None, None, None)
           for m, a, t, al, f, v, lo, hi in rows]  # fmt: skip
    out += [
        (m, a, t, al, f, "corrected", "sample", v, np.nan, np.nan, True, r, None, None)
        for m, a, t, al, f, r, v in replicates
    ]
    frame = pd.DataFrame(out, columns=METRIC_COLUMNS)
    frame["replicate"] = frame["replicate"].astype("Int64")
    return frame


NAN = np.nan
METRICS = {
    "e1": metrics_frame(
        [
            ("auc", "likelihood_ratio", None, NAN, NAN, 0.91234, 0.9, 0.93),
            ("auc", "loss", None, NAN, NAN, 0.61, 0.58, 0.64),
            ("precision", "likelihood_ratio", "population", 0.1, NAN, 88.88, 85.0, 91.0),
            ("precision", "likelihood_ratio", "population", 0.01, NAN, 99.0, 97.0, 100.0),
            ("tpr_at_fpr", "likelihood_ratio", None, NAN, 0.01, 40.0, 30.0, 50.0),
            ("tpr_at_fpr", "likelihood_ratio", None, NAN, 0.001, NAN, NAN, NAN),
            ("tpr_at_fpr", "likelihood_ratio", None, NAN, 0.1, 70.0, 60.0, 80.0),
            ("tpr_at_fpr", "loss", None, NAN, 0.1, 20.0, 15.0, 25.0),
        ]
    )  # fmt: skip
}
ROWS = [
    {"metric": "auc", "attack": "likelihood_ratio", "label": "AUC (B)"},
    {"metric": "precision", "attack": "likelihood_ratio", "threshold": "population", "label": "Prec. (B)"},
    {"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.01, "label": "TPR@1%"},
]
SPEC = {
    "title": "T",
    "kind": "metrics",
    "columns": [{"id": "c10", "header": "ten", "experiment": "e1", "alpha": 0.1},
                {"id": "c1", "header": "one", "experiment": "e1", "alpha": 0.01}],
}  # fmt: skip
PAPER = {"c1": {"precision/likelihood_ratio/population": 98.5}}


def test_cells_pick_the_right_metric_and_paper_value():
    tidy = tidy_table("t9", SPEC, ROWS, EXP, METRICS, PAPER, ["corrected"])
    cell = tidy[(tidy.column == "c1") & (tidy.metric == "precision")].iloc[0]
    assert cell.value == 99.0 and cell.alpha == 0.01 and cell.paper_value == 98.5
    assert tidy[(tidy.column == "c10") & (tidy.metric == "precision")].value.iloc[0] == 88.88
    assert tidy[tidy.metric == "tpr_at_fpr"].value.tolist() == [40.0, 40.0]
    assert pd.isna(tidy[tidy.metric == "auc"].alpha).all()  # AUC has no threshold
    markdown = render_markdown(tidy, SPEC)
    assert "| Prec. (B) | 88.9 [85.0, 91.0] | 99.0 [97.0, 100.0] (98.5) |" in markdown
    assert "| AUC (B) | 0.912 [0.900, 0.930] | 0.912 [0.900, 0.930] |" in markdown
    assert "In parentheses: the number published in the paper" in markdown and "patient bootstrap" in markdown
    assert r"\%" in render_latex(tidy, SPEC)


def test_a_table_says_only_what_it_shows():
    # no paper value, no interval: no note promising them; an unresolvable cell: "n.r." and its footnote
    rows = [{"metric": "tpr_at_fpr", "attack": "likelihood_ratio", "fpr": 0.001, "label": "TPR@0.1%"}]
    tidy = tidy_table("t", SPEC, rows, EXP, METRICS, {}, ["corrected"])
    markdown = render_markdown(tidy, SPEC)
    assert "| TPR@0.1% | n.r. | n.r. |" in markdown
    assert "n.r.: not resolvable" in markdown
    assert "published in the paper" not in markdown and "In brackets" not in markdown


def test_under_the_table_the_parameters_an_attack_tuned_and_the_population_it_compared_with():
    experiments = {
        "e1": EXP["e1"],
        "e2": experiment("e2", "d", "t", "r", "i2b2", "i2b2", length="long"),
    }
    # the metrics of each column: RMIA's AUC and the a it tuned (a row of metric "parameter")
    parameter = ("parameter", "rmia", None, NAN, NAN, "corrected", "sample", 1.0, NAN, NAN, True, None, None, "a")
    rmia = metrics_frame([("auc", "rmia", None, NAN, NAN, 0.85, 0.8, 0.9)])
    tuned = pd.DataFrame([parameter], columns=METRIC_COLUMNS)
    metrics = {name: pd.concat([rmia, METRICS["e1"], tuned], ignore_index=True) for name in experiments}
    spec = {"title": "Z", "kind": "metrics", "columns": [{"id": "m", "header": "MIMIC", "experiment": "e1", "alpha": 0.1},
                                      {"id": "i", "header": "i2b2", "experiment": "e2", "alpha": 0.1}]}  # fmt: skip
    rows = [{"metric": "auc", "attack": "rmia", "label": "RMIA"}, *ROWS[:1]]
    _, markdown, latex = render_table("z", spec, rows, experiments, metrics, {}, ["corrected"])
    under = markdown.split("| RMIA |")[1]
    assert "RMIA (offline): a = 1.0 (tuned on the reference models)." in under
    assert "RMIA (offline): population samples from i2b2 in every column." in under
    assert "a = 1.0 (tuned on the reference models)" in latex
    # a value per column where they differ; a column that tuned nothing is left out
    metrics["e2"].loc[metrics["e2"]["metric"] == "parameter", "value"] = 0.9
    experiments["e1"] = experiment("e1", "d", "t", "r", "mimic", "mimic", length="long")
    _, markdown, _ = render_table("z", spec, rows, experiments, metrics, {}, ["corrected"])
    assert "RMIA (offline): a (tuned on the reference models): 1.0 (MIMIC), 0.9 (i2b2)." in markdown
    assert "RMIA (offline): population samples from mimic (MIMIC), i2b2 (i2b2)." in markdown
    # a table of attacks that tune nothing and compare with no population says nothing more
    _, plain, plain_latex = render_table("z", spec, ROWS, experiments, metrics, {}, ["corrected"])
    tidy = tidy_table("z", spec, ROWS, experiments, metrics, {}, ["corrected"])
    assert plain == render_markdown(tidy, spec) and plain_latex == render_latex(tidy, spec)
    assert "tuned" not in plain and "population samples from" not in plain


def test_missing_metric_names_table_column_and_row():
    rows = [{"metric": "recall", "attack": "likelihood_ratio", "threshold": "population", "label": "Rec. (B)"}]
    with pytest.raises(
        UserError,
        match="table 't9', column 'c10', row 'Rec. \\(B\\)': 0 metrics match recall/likelihood_ratio/population",
    ):
        tidy_table("t9", SPEC, rows, EXP, METRICS, {}, ["corrected"])


def check(compare, against, margin=0.0, allow_equal=False, scope="e1"):
    """A check as `Study.finding_checks` gives it (the tables spec's defaults filled in)."""
    return {"finding": "f", "claim": "c", "kind": "finding", "scope": scope, "margin": margin,
            "allow_equal": allow_equal, "compare": {"experiment": "e1", "alpha": 0.1, **compare},
            "against": {"experiment": "e1", "alpha": 0.1, **against}}  # fmt: skip


def test_findings_compare_on_the_same_replicates():
    # two attacks whose marginal intervals overlap, but whose paired difference is always
    # positive: separated; and a pair whose difference changes sign: not separated
    reps_a = [("auc", "a", None, NAN, NAN, r, 0.70 + 0.02 * np.sin(r)) for r in range(40)]
    reps_b = [("auc", "b", None, NAN, NAN, r, 0.68 + 0.02 * np.sin(r)) for r in range(40)]
    reps_c = [("auc", "c", None, NAN, NAN, r, 0.69 + 0.03 * np.cos(r)) for r in range(40)]
    metrics = {"e1": metrics_frame(
        [("auc", "a", None, NAN, NAN, 0.70, 0.68, 0.72), ("auc", "b", None, NAN, NAN, 0.68, 0.66, 0.70),
         ("auc", "c", None, NAN, NAN, 0.69, 0.66, 0.72)], reps_a + reps_b + reps_c)}  # fmt: skip
    found = check_findings(
        [check({"metric": "auc", "attack": "a"}, {"metric": "auc", "attack": "b"}),
         check({"metric": "auc", "attack": "a"}, {"metric": "auc", "attack": "c"}),
         check({"metric": "auc", "attack": "b"}, {"metric": "auc", "attack": "a"}),
         check({"metric": "auc", "attack": "a"}, {"metric": "auc", "attack": "b"}, margin=0.05)],
        metrics,
    )  # fmt: skip
    checks = findings_frame(found)
    assert checks.difference.tolist() == pytest.approx([0.02, 0.01, -0.02, 0.02])
    assert checks.difference_ci_low.iloc[0] == pytest.approx(0.02) == checks.difference_ci_high.iloc[0]
    assert checks.verdict.tolist() == ["separated", "not separated", "reversed", "reversed"]
    assert checks.holds.tolist() == [True, True, False, False]
    assert checks.n.tolist() == [40] * 4
    assert checks.first.tolist()[0] == "a auc [e1]" and checks.first_ci_low.iloc[0] == 0.68
    assert checks.second.tolist()[0] == "b auc [e1]" and checks.second_ci_high.iloc[0] == 0.70
    text = render(found, "w")
    assert "Findings: 2 of 4 hold; 1 separated, 1 not separated, 2 reversed." in text
    assert "| 0.020 [0.020, 0.020] | 40 | yes | separated |  |" in text


def test_an_attack_below_the_blind_baseline_is_flagged_not_failed():
    # a finding that holds, and two baseline checks: one attack above blind, one below it
    metrics = {"e1": metrics_frame(
        [("auc", "a", None, NAN, NAN, 0.70, 0.68, 0.72), ("auc", "b", None, NAN, NAN, 0.68, 0.66, 0.70),
         ("auc", "blind", None, NAN, NAN, 0.69, 0.66, 0.72)], [])}  # fmt: skip
    baseline = {"kind": "baseline", "claim": "above blind"}
    checks = check_findings(
        [check({"metric": "auc", "attack": "a"}, {"metric": "auc", "attack": "b"}),
         {**check({"metric": "auc", "attack": "a"}, {"metric": "auc", "attack": "blind"}), **baseline, "finding": "a_blind"},
         {**check({"metric": "auc", "attack": "b"}, {"metric": "auc", "attack": "blind"}), **baseline, "finding": "b_blind"}],
        metrics,
    )  # fmt: skip
    assert [f.kind for f in checks] == ["finding", "baseline", "baseline"]
    assert [f.holds for f in checks] == [True, True, False]
    # no replicates: no interval, so not resolvable, with the reason
    assert {f.verdict for f in checks} == {"not resolvable"} and all(f.note.startswith("no interval") for f in checks)
    text = render(checks, "w")
    # the summary counts the one finding apart; the attack below blind is flagged in its own section
    assert "Findings: 1 of 1 hold; 1 not resolvable." in text
    assert "Checks against a baseline: 1 of 2 hold, 1 flagged; 2 not resolvable." in text
    assert "### above blind: 0 of 1 hold, 1 flagged; 1 not resolvable" in text
    assert "| b auc [e1] | 0.680 [0.660, 0.700] | blind auc [e1] | 0.690 [0.660, 0.720] | -0.010 | 0 | NO |" in text
    assert text.index("## Findings") < text.index("## Checks against a baseline")
    assert "blind (a bag-of-words classifier" in text
    # a file of baseline checks alone (the zoo's) counts no claims
    only = render([f for f in checks if f.kind == "baseline"], "w")
    assert "Findings:" not in only and "## Findings" not in only and "1 flagged" in only


def test_findings_refuse_a_cell_without_metrics():
    with pytest.raises(UserError, match="0 metrics match recall/likelihood_ratio/population"):
        check_findings([check({"metric": "recall", "attack": "likelihood_ratio", "threshold": "population"},
                              {"metric": "auc", "attack": "loss"})], METRICS)  # fmt: skip


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
    attack = pd.DataFrame({
        "role": ["member"] * 4 + ["population"] * 10, "group_id": list("aabb") + list("pqrstuvwxy"),
        "target_energy": [-5.0, -4.0, -3.5, 2.0] + list(np.linspace(-3, 3, 10)), "reference_energy": 0.0,
        "sample_id": range(14),
    })  # fmt: skip
    members = exposed_labels(attack, 0.1, "likelihood_ratio")  # threshold: the lowest population statistic, -3
    assert members.exposed.tolist() == [True, True, True, False]
    # too few of one class: empty cells, not invented numbers
    exposure = defaults("exposure")  # the test split's share and seed: the config's (the schema's)
    metrics = exposure_metrics(
        members, pd.DataFrame({"digits": [1, 2, 3, 4]}), np.zeros((4, 2)), 0.1,
        test_size=exposure["test_size"], seed=exposure["seed"],
    )  # fmt: skip
    assert metrics.value.isna().all() and set(metrics.split) == {"train", "test"}


def test_table7_split_keeps_each_patient_on_one_side():
    rng = np.random.default_rng(0)
    groups = np.repeat([f"p{i}" for i in range(40)], 5)
    y = rng.random(200) < 0.3
    train, test = patient_split(y, groups, 0.3, seed=0)
    assert not set(groups[train]) & set(groups[test])
    assert sorted(np.r_[train, test].tolist()) == list(range(200))
    assert 0.2 < len(test) / 200 < 0.45


def test_shards_cover_every_sample_once_in_order():
    frame = pd.DataFrame({"sample_id": [f"s{i}" for i in range(10)]})
    assert shard_count(10, 4) == 3 and shard_count(0, 4) == 1
    parts = [shard_slice(frame, i, 3) for i in range(3)]
    assert pd.concat(parts).sample_id.tolist() == frame.sample_id.tolist()
    assert sorted(len(p) for p in parts) == [3, 3, 4]


def test_module_digest_tracks_source():
    assert module_digest("mlmia.report.tables") != module_digest("mlmia.attacks.protocols")
    assert module_digest("mlmia.report.tables", "mlmia.metrics") == module_digest(
        "mlmia.metrics", "mlmia.report.tables"
    )
    assert len(module_digest("mlmia.report.tables")) == 16
    # a package's digest covers its modules
    assert module_digest("mlmia.metrics") != module_digest("mlmia.attacks.protocols")
