"""The embedded world end to end on the CI config, what a config or code change reruns, and
runs that never overwrite each other."""

import hashlib
import json
import shutil

import matplotlib.image
import pandas as pd
import yaml
from workflow_helpers import REPO, edit_yaml, paper_scores_root, planned_jobs, run_snakemake

TABLES = [f"table{n}" for n in range(2, 12)] + ["table_zoo"]
FIGURES = ["fig3a", "fig3b", "fig4", "fig5", "fig_zoo"]
# the paper's two attacks, the normalized-energy (B) and every attack of the zoo
ZOO_ATTACKS = {
    "likelihood_ratio", "loss", "likelihood_ratio_normalized", "pll_word_l2r", "zlib", "min_k", "min_k_plus_plus",
    "neighbourhood", "lira_offline", "lira_online", "rmia", "blind", "lira_multivariate_offline",
    "lira_multivariate_online", "informia",
}  # fmt: skip
#: the zoo table's rows: every attack above, and those made for masked diffusion targets
ZOO_FULL = ZOO_ATTACKS | {"sama", "likelihood_ratio_elbo"}
ZOO_COLUMNS = {"long_mimic", "long_i2b2", "short_mimic", "short_i2b2"}
SHADOW_CLASSIFIERS = {"Perceptron", "Decision Tree", "Naive Bayes", "k-NN", "MLP"}
RUN = "results/ci"


def rules_of(jobs):
    return {rule for rule, _ in jobs}


def test_every_table_and_figure(ci_run):
    for table in TABLES:
        for ext in ("csv", "md", "tex"):
            assert (ci_run / f"{RUN}/tables/{table}.{ext}").stat().st_size > 0
    table9 = pd.read_csv(ci_run / f"{RUN}/tables/table9.csv")
    assert table9.column.nunique() == 10
    assert set(table9.target) == {"base", "base_pp", "large", "large_pp", "base_b"}
    assert set(table9.length) == {"short", "long"}
    assert set(table9.attack) == {"loss", "likelihood_ratio"}
    aucs = table9[table9.metric == "auc"].value
    assert aucs.between(0, 1).all()
    assert set(pd.read_csv(ci_run / f"{RUN}/tables/table11.csv").energy) == {"normalized"}
    assert set(pd.read_csv(ci_run / f"{RUN}/tables/table10.csv").alpha.dropna()) == {0.01}
    table2 = pd.read_csv(ci_run / f"{RUN}/tables/table2.csv")
    assert set(table2.level) == {"sample", "patient"}
    # 16 MIMIC non-members cannot resolve a TPR at 1% FPR: printed as such, not as a number
    tpr = table2[table2.metric == "tpr_at_fpr"]
    assert not tpr.resolvable.any() and tpr.value.isna().all()
    assert "| TPR@1%FPR (B) | n.r. |" in (ci_run / f"{RUN}/tables/table2.md").read_text()
    assert "| L(s) |" in (ci_run / f"{RUN}/tables/table8.md").read_text()
    # Tables 9-11 say which samples each column holds (the paper's headers are swapped)
    assert "Base (long)" in (ci_run / f"{RUN}/tables/table9.md").read_text()
    table7 = (ci_run / f"{RUN}/tables/table7.md").read_text()
    assert "split by patient" in table7 and "published in the paper" not in table7 and "In brackets" not in table7
    for figure in FIGURES:
        image = matplotlib.image.imread(ci_run / f"{RUN}/figures/{figure}.png")
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0.01
        assert (ci_run / f"{RUN}/figures/{figure}.pdf").read_bytes().startswith(b"%PDF")
    comparison = (ci_run / f"{RUN}/paper_comparison.md").read_text()
    assert "| Sample MIMIC | AUC (B) | published |" in comparison
    # the default table of the zoo: the attacks that need no extra model, B the comparison
    zoo = pd.read_csv(ci_run / f"{RUN}/tables/table_zoo.csv")
    assert set(zoo.attack) == ZOO_ATTACKS - {"pll_word_l2r", "neighbourhood", "lira_offline", "lira_online", "rmia",
                                             "lira_multivariate_offline", "lira_multivariate_online", "informia"}  # fmt: skip
    compared = zoo[zoo.attack != "likelihood_ratio"]
    assert (
        compared[compared.resolvable].difference.notna().all() and compared[compared.metric == "auc"].resolvable.all()
    )
    assert compared[~compared.resolvable].difference.isna().all()  # no difference of what cannot be estimated
    # 43 checks: (B) above (A) in the 23 sample-level columns of Tables 2-6 and 9-11 and the
    # zoo table's Base/short/i2b2, 5 single-pair claims, normalized vs masked, recall in
    # Table 2's 2 sample-level columns, and 6 attacks against blind on 2 experiments
    findings = pd.read_csv(ci_run / f"{RUN}/findings.csv")
    assert len(findings) == 23 + 5 + 1 + 2 + 6 * 2 and findings.n.min() > 0
    assert (findings.kind == "baseline").sum() == 12  # the blind checks are flags, not claims
    text = (ci_run / f"{RUN}/findings.md").read_text()
    assert "Findings: " in text and "of 31 hold" in text
    assert "Checks against a baseline: " in text and "of 12 hold" in text
    # logs and benchmarks are the run's too
    assert (ci_run / f"{RUN}/logs/attack_metrics/base_long_mimic.log").exists()
    assert not (ci_run / "logs").exists() and not (ci_run / "benchmarks").exists()


def test_zoo_and_shadow_targets(ci_run):
    run_snakemake(ci_run, "zoo", "shadow", "--configfile", "test_config.yaml")
    zoo = pd.read_csv(ci_run / f"{RUN}/tables/table_zoo_full.csv")
    assert set(zoo.attack) == ZOO_FULL
    # Base's four columns and base_mdlm's (the masked-diffusion target, its references trained so)
    assert set(zoo.column) == ZOO_COLUMNS | {f"mdlm_{c}" for c in ZOO_COLUMNS}
    assert set(zoo[zoo.column.str.startswith("mdlm_")].target) == {"base_mdlm"}
    auc = zoo[(zoo.metric == "auc") & (zoo.versus != "rmia")]  # the rows against RMIA repeat three attacks' AUC
    assert len(auc) == len(ZOO_FULL) * 8 and auc.value.between(0, 1).all()
    assert set(zoo[zoo.versus == "rmia"].attack) == {
        "lira_multivariate_offline",
        "lira_multivariate_online",
        "informia",
    }
    assert (auc.ci_low <= auc.value).all() and (auc.value <= auc.ci_high).all()
    compared = auc[auc.attack != "likelihood_ratio"]  # every other row with its paired difference to (B)
    assert compared.difference.notna().all() and (compared.difference_ci_low <= compared.difference_ci_high).all()
    # 16 non-members per column: a TPR at 0.1% FPR is below 1/16, so never a number
    assert zoo[(zoo.metric == "tpr_at_fpr") & (zoo.fpr == 0.001)].value.isna().all()
    # RMIA's a, tuned on the reference models per column, and each column's population, under the table
    markdown = (ci_run / f"{RUN}/tables/table_zoo_full.md").read_text()
    assert "(tuned on the reference models)" in markdown.split("| RMIA: AUC |")[1]
    assert (
        "RMIA (offline): population samples from mimic (Base: long MIMIC, Base: short MIMIC, base_mdlm: long MIMIC, "
        "base_mdlm: short MIMIC), i2b2 (Base: long i2b2, Base: short i2b2, base_mdlm: long i2b2, base_mdlm: short i2b2)."
    ) in markdown
    metrics = pd.read_parquet(ci_run / f"{RUN}/metrics/zoo_long_mimic.parquet")
    tuned = metrics[metrics.metric == "parameter"]
    assert (
        set(tuned.attack) == {"rmia", "informia"} and set(tuned.parameter) == {"a"} and tuned.value.between(0, 1).all()
    )
    findings = pd.read_csv(ci_run / f"{RUN}/findings_zoo.csv")
    baseline, comparison = findings[findings.kind == "baseline"], findings[findings.kind == "comparison"]
    # every attack but blind against blind on Base's 2 long columns; SAMA and (B)-ELBO on base_mdlm's too
    assert len(baseline) == (len(ZOO_ATTACKS) - 1) * 2 + 2 * 2 * 2
    assert baseline["second"].str.startswith("blind auc [zoo_").all()
    # every attack but blind, Base against base_mdlm on the same samples; SAMA against (B) on both targets
    assert len(comparison) == (len(ZOO_FULL) - 1) * 2 and set(comparison.scope) == {
        "zoo_long_mimic vs zoo_mdlm_long_mimic", "zoo_long_i2b2 vs zoo_mdlm_long_i2b2"
    }  # fmt: skip
    assert comparison.difference_ci_low.notna().all() and (findings.kind == "finding").sum() == 4
    assert "## Comparisons between settings" in (ci_run / f"{RUN}/findings_zoo.md").read_text()
    for figure in ("fig_zoo_full", "fig_zoo_mdlm"):
        image = matplotlib.image.imread(ci_run / f"{RUN}/figures/{figure}.png")
        assert image.shape[0] > 100 and image.std() > 0.01
    # base_mdlm, its domain reference and its pool are trained with the masked-diffusion objective, the
    # pool on the same splits as Base's; SAMA's masks are the same for target and reference
    for model in ("base_mdlm", "ref_domain_mdlm", "pool_ref_mdlm_0"):
        assert (
            json.loads((ci_run / f"{RUN}/models/{model}/train_info.json").read_text())["config"]["objective"] == "mdlm"
        )
    # both pools fine-tuned from the general reference (references.init), as the default's
    for model in ("pool_ref_0", "pool_ref_mdlm_0"):
        info = json.loads((ci_run / f"{RUN}/models/{model}/train_info.json").read_text())
        assert info["init_from"] == f"{RUN}/models/ref_general" and info["config"]["epochs"] == 1
    splits = pd.read_parquet(ci_run / f"{RUN}/references/splits.parquet").set_index(["reference", "sample_id"])["in"]
    assert splits.loc["pool_ref_mdlm_1"].equals(splits.loc["pool_ref_1"])
    steps = {
        m: pd.read_parquet(ci_run / f"{RUN}/scores/clinical/{m}.progressive.parquet") for m in ("base", "ref_domain")
    }
    assert steps["base"].pattern_sizes.map(list).equals(steps["ref_domain"].pattern_sizes.map(list))
    # Hisamoto et al.'s tables: accuracies of the five classifiers, bounded, with intervals
    shadow = pd.read_csv(ci_run / f"{RUN}/shadow/tables.csv")
    assert set(shadow.table.dropna()) == {"table1", "table2", "table3", "table4", "table5", "table6"}
    assert set(shadow.classifier.dropna()) == SHADOW_CLASSIFIERS
    fit = shadow[shadow.table == "table1"]  # each model's BLEU in and out
    assert set(zip(fit.model, fit.set)) == {(m, s) for m in ("alice", "bob_0", "bob_1") for s in ("in", "out")}
    assert shadow[shadow.result != "table1"].accuracy.between(0, 1).all()  # Table 1 holds BLEU, no accuracy
    sentences = shadow[shadow.table.isin(["table2", "table3"])]
    assert ((sentences.ci_low <= sentences.accuracy) & (sentences.accuracy <= sentences.ci_high)).all()
    assert sentences[sentences.evaluation == "Alice"].auc.between(0, 1).all()  # a threshold-free AUC beside each
    assert set(shadow[shadow.table == "table4"].evaluation) == {"news", "wikipedia"}
    assert set(shadow[shadow.result == "figure7"].top_percentage) == {10.0 * i for i in range(1, 11)}
    assert "near 50%" in (ci_run / f"{RUN}/shadow/findings.md").read_text()
    assert (ci_run / f"{RUN}/shadow/figure7.pdf").read_bytes().startswith(b"%PDF")
    # the zoo and the shadow study add to the run; the default targets stay up to date
    assert rules_of(planned_jobs(ci_run, "--configfile", "test_config.yaml")) == set()
    assert rules_of(planned_jobs(ci_run, "zoo", "shadow", "--configfile", "test_config.yaml")) == set()


def test_shadow_mt_target(ci_run):
    """Hisamoto et al.'s protocol on the translation target: encoder-decoders on the parallel corpus."""
    run_snakemake(ci_run, "shadow_mt", "--configfile", "test_config.yaml")
    shadow = pd.read_csv(ci_run / f"{RUN}/shadow_mt/tables.csv")
    assert set(shadow.table.dropna()) == {"table1", "table2", "table3", "table4", "table5", "table6"}
    assert set(shadow.classifier.dropna()) == SHADOW_CLASSIFIERS
    fit = shadow[shadow.table == "table1"]  # each model's BLEU in and out
    assert set(zip(fit.model, fit.set)) == {(m, s) for m in ("alice", "bob_0", "bob_1") for s in ("in", "out")}
    assert shadow[shadow.result != "table1"].accuracy.between(0, 1).all()  # Table 1 holds BLEU, no accuracy
    assert set(shadow[shadow.table == "table4"].evaluation) == {"case_reports", "news"}
    assert set(shadow[shadow.table == "table3"].features) == {
        "bleu + precision_1 + precision_2 + precision_3 + precision_4 + model_score"
    }
    assert "Table 3: sample-level attack with the model score" in (ci_run / f"{RUN}/shadow_mt/tables.md").read_text()
    assert (ci_run / f"{RUN}/shadow_mt/figure7.pdf").read_bytes().startswith(b"%PDF")
    alice = pd.read_parquet(ci_run / f"{RUN}/shadow_mt/features_alice.parquet")
    assert {"bleu", "precision_1", "precision_4", "model_score", "hyp_len", "match_4"} <= set(alice.columns)
    info = json.loads((ci_run / f"{RUN}/models/shadow_mt_alice/train_info.json").read_text())
    assert info["config"]["d_model"] == 32 and info["n_parameters"] > 0
    # the translation target adds to the run; the default targets stay up to date
    assert rules_of(planned_jobs(ci_run, "--configfile", "test_config.yaml")) == set()
    assert rules_of(planned_jobs(ci_run, "shadow_mt", "--configfile", "test_config.yaml")) == set()


def test_everything_up_to_date(ci_run):
    assert rules_of(planned_jobs(ci_run, "--configfile", "test_config.yaml")) == set()


def test_alpha_change_reruns_only_threshold_metrics_and_tables(ci_run):
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


def test_patterns_change_rescores_masked_energy_only(ci_run):
    config = ci_run / "patterns_config.yaml"
    config.write_text((ci_run / "test_config.yaml").read_text())
    edit_yaml(config, scoring__patterns=3)
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
    assert trained == {f"{RUN}/models/large", f"{RUN}/models/large_pp"}
    scored = {out.split("/")[-1].split(".")[0] for rule, out in jobs if rule == "score_shard"}
    assert scored == {"large", "large_pp"}
    assert not rules_of(jobs) & {"train_tokenizer", "build_corpora", "select_samples"}


def test_a_change_to_the_scorer_rescores_and_a_change_to_the_renderer_does_not(ci_run, tmp_path):
    # The library as the workflow would import it after an edit: a copy first on PYTHONPATH.
    shutil.copytree(REPO / "src" / "mlmia", tmp_path / "mlmia", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(tmp_path)}
    assert rules_of(planned_jobs(ci_run, "--configfile", "test_config.yaml", env=env)) == set()
    energy = tmp_path / "mlmia" / "scoring" / "energy.py"
    energy.write_text(energy.read_text() + "\n# an edit to the scorer\n")
    jobs = planned_jobs(ci_run, "--configfile", "test_config.yaml", env=env)
    scored = [out for rule, out in jobs if rule == "score_shard"]
    assert len(scored) == 15  # every model, energy kind and shard
    assert {"join_scores", "attack_table", "attack_metrics"} <= rules_of(jobs)
    assert not rules_of(jobs) & {"train_model", "build_corpora"}
    energy.write_text(energy.read_text().replace("\n# an edit to the scorer\n", ""))
    # the findings script imports mlmia.report.findings, which imports the table renderer: the
    # digests follow imports, so an edit there replans the findings too, and no scoring
    tables = tmp_path / "mlmia" / "report" / "tables.py"
    tables.write_text(tables.read_text() + "\n# an edit to the renderer\n")
    jobs = planned_jobs(ci_run, "--configfile", "test_config.yaml", env=env)
    assert rules_of(jobs) == {"render_table", "paper_comparison", "findings", "all"}


def _edited_schema_plans(ci_run, tmp_path, edit):
    """The jobs a dry run plans on the finished CI run after `edit`(schema) of the config schema
    of a copy of the library first on PYTHONPATH (an upgrade of mlmia that touches only the schema)."""
    shutil.copytree(REPO / "src" / "mlmia", tmp_path / "mlmia", ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "mlmia" / "terms" / "schemas" / "config.schema.yaml"
    schema = yaml.safe_load(path.read_text())
    edit(schema["properties"])
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return planned_jobs(ci_run, "--configfile", "test_config.yaml", env={"PYTHONPATH": str(tmp_path)})


def test_a_schema_edit_reruns_only_what_its_values_reach(ci_run, tmp_path_factory):
    # resolve once: every job gets its settings from the validated config, none reads the schema,
    # so the schema's bytes are no job's code and only a changed value reruns what it reaches
    def reword(properties):
        properties["scoring"]["properties"]["patterns"]["description"] += " (reworded)"

    def new_section(properties):
        properties["a_new_study"] = {"type": "object", "default": {},
                                     "properties": {"size": {"type": "integer", "default": 3}}}  # fmt: skip

    def layers(properties):
        properties["models"]["additionalProperties"]["properties"]["num_layers"]["default"] += 1

    def exposure(properties):
        properties["exposure"]["properties"]["test_size"]["default"] = 0.4

    def font(properties):
        properties["figure_style"]["properties"]["font_scale"]["default"] += 0.1

    plans = {edit.__name__: _edited_schema_plans(ci_run, tmp_path_factory.mktemp(edit.__name__), edit)
             for edit in (reword, new_section, layers, exposure, font)}  # fmt: skip
    assert plans["reword"] == [] and plans["new_section"] == []
    # the models of config/ci.yaml that leave num_layers to the schema, and those that continue them
    config = yaml.safe_load((REPO / "config" / "ci.yaml").read_text())
    defaulted = {name for name, entry in config["models"].items() if "num_layers" not in entry}
    trained = {out.rsplit("/", 1)[-1] for rule, out in plans["layers"] if rule == "train_model"}
    assert "large" in trained and "base" not in trained and trained <= defaulted
    scored = {out.split("/")[-1].split(".")[0] for rule, out in plans["layers"] if rule == "score_shard"}
    assert scored and scored <= trained
    assert rules_of(plans["exposure"]) - {"render_table", "paper_comparison", "findings", "all"} == {"exposure"}
    assert rules_of(plans["font"]) == {"render_figure", "all"}


def digests(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_another_config_leaves_this_run_untouched(ci_run):
    before = digests(ci_run / RUN)
    config = ci_run / "scores_config.yaml"
    shutil.copy2(REPO / "config" / "paper_scores.yaml", config)
    edit_yaml(config, imported__root=str(paper_scores_root()), metrics__bootstrap=0)
    run_snakemake(ci_run, "table2", "--configfile", str(config))
    assert (ci_run / "results/paper_scores/tables/table2.md").exists()
    assert digests(ci_run / RUN) == before
    assert sorted(p.name for p in (ci_run / "results").iterdir()) == ["ci", "paper_scores"]
