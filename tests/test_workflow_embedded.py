"""The embedded world end to end on the CI config, and what a config change reruns."""

import matplotlib.image
import pandas as pd
from workflow_helpers import edit_yaml, planned_jobs

TABLES = [f"table{n}" for n in range(2, 12)]
FIGURES = ["fig3a", "fig3b", "fig4", "fig5"]


def rules_of(jobs):
    return {rule for rule, _ in jobs}


def test_every_table_and_figure(ci_run):
    for table in TABLES:
        for ext in ("csv", "md", "tex"):
            assert (ci_run / f"results/tables/{table}.{ext}").stat().st_size > 0
    table9 = pd.read_csv(ci_run / "results/tables/table9.csv")
    assert table9.column.nunique() == 10
    assert set(table9.target) == {"base", "base_pp", "large", "large_pp", "base_b"}
    assert set(table9.length) == {"short", "long"}
    aucs = table9[table9.metric == "auc"].value
    assert aucs.between(0, 1).all()
    assert set(pd.read_csv(ci_run / "results/tables/table11.csv").energy) == {"normalized"}
    assert set(pd.read_csv(ci_run / "results/tables/table10.csv").alpha.dropna()) == {0.01}
    table2 = pd.read_csv(ci_run / "results/tables/table2.csv")
    assert set(table2.level) == {"sample", "patient"}
    assert "| L(s) |" in (ci_run / "results/tables/table8.md").read_text()
    # Tables 9-11 say which samples each column holds (the paper's headers are swapped)
    assert "Base (long)" in (ci_run / "results/tables/table9.md").read_text()
    for figure in FIGURES:
        image = matplotlib.image.imread(ci_run / f"results/figures/{figure}.png")
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0.01
        assert (ci_run / f"results/figures/{figure}.pdf").read_bytes().startswith(b"%PDF")
    comparison = (ci_run / "results/paper_comparison.md").read_text()
    assert "| Sample MIMIC | AUC (B) | published |" in comparison


def test_everything_up_to_date(ci_run):
    assert rules_of(planned_jobs(ci_run, "--configfile", "test_config.yaml")) == set()


def test_alpha_change_reruns_only_threshold_metrics_and_tables(ci_run, tmp_path):
    spec = ci_run / "config/tables.yaml"
    original = spec.read_text()
    try:
        data = __import__("yaml").safe_load(original)
        for column in data["tables"]["table2"]["columns"]:
            column["alpha"] = 0.05
        spec.write_text(__import__("yaml").safe_dump(data, sort_keys=False))
        jobs = planned_jobs(ci_run, "--configfile", "test_config.yaml")
    finally:
        spec.write_text(original)
    allowed = {"attack_metrics", "render_table", "paper_comparison", "findings", "all"}
    assert {"attack_metrics", "render_table"} <= rules_of(jobs) <= allowed
    rerun_tables = {out for rule, out in jobs if rule == "render_table"}
    assert any("table2." in out for out in rerun_tables)
    assert not any("table11." in out for out in rerun_tables)  # its experiments keep their alphas


def test_k_change_rescores_masked_energy_only(ci_run):
    config = ci_run / "k_config.yaml"
    config.write_text((ci_run / "test_config.yaml").read_text())
    edit_yaml(config, scoring__k=3)
    jobs = planned_jobs(ci_run, "--configfile", str(config))
    scored = [out for rule, out in jobs if rule == "score_shard"]
    assert scored and all(".masked." in out for out in scored)
    assert not rules_of(jobs) & {"train_model", "train_tokenizer", "build_corpora", "select_samples"}
    assert {"join_scores", "attack_table", "attack_metrics", "render_table"} <= rules_of(jobs)
    metrics = [out for rule, out in jobs if rule == "attack_metrics"]
    assert not any("enorm" in out for out in metrics)


def test_figure_setting_reruns_only_figures(ci_run):
    config = ci_run / "fig_config.yaml"
    config.write_text((ci_run / "test_config.yaml").read_text())
    edit_yaml(config, figure_style__dpi=70)
    assert rules_of(planned_jobs(ci_run, "--configfile", str(config))) == {"render_figure", "all"}


def test_epochs_change_retrains_that_model_and_rescoring_follows(ci_run):
    config = ci_run / "epochs_config.yaml"
    config.write_text((ci_run / "test_config.yaml").read_text())
    edit_yaml(config, models__large__epochs=3)
    jobs = planned_jobs(ci_run, "--configfile", str(config))
    trained = {out for rule, out in jobs if rule == "train_model"}
    # Large++ continues Large's training, so it follows; no other model is touched
    assert trained == {"results/models/large", "results/models/large_pp"}
    scored = {out.split("/")[-1].split(".")[0] for rule, out in jobs if rule == "score_shard"}
    assert scored == {"large", "large_pp"}
    assert not rules_of(jobs) & {"train_tokenizer", "build_corpora", "select_samples"}
