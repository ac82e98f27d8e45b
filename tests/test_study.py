"""The study's semantics, straight from the library: which experiments each table, figure and
finding needs, what each experiment's metrics hold, what a config change touches, and the
schemas' defaults and one-line errors."""

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO

from mlmia.attacks import Attack, register
from mlmia.attacks.protocols import MetricSettings, attack_metrics
from mlmia.core.errors import UserError
from mlmia.report.tables import render_table
from mlmia.study.plans.dp import dp_targets
from mlmia.study.study import Study

SCHEMAS = REPO / "config" / "schema"  # the schemas' own defaults are read from here


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.fixture
def in_repo(monkeypatch):
    """Configs name their tables spec relative to the repository root."""
    monkeypatch.chdir(REPO)


def with_fake_files(root, config):
    """Empty stand-ins for the credentialed files config/paper.yaml names, under `root`, and
    the config pointed at them (the study checks that the files it is given exist)."""
    for name, dataset in config.get("datasets", {}).items():
        if dataset["root"].startswith("results/"):  # the raw importer writes them later
            continue
        folder = root / name
        folder.mkdir(exist_ok=True)
        for entry in dataset["files"]:
            (folder / entry["path"]).touch()
        dataset["root"] = str(folder)
    for source in config.get("raw", {}).values():
        for key in ("noteevents", "member_lists", "names", "xml") if isinstance(source, dict) else ():
            if key in source:
                paths = [root / Path(p).name for p in ([source[key]] if isinstance(source[key], str) else source[key])]
                for path in paths:
                    path.touch()
                source[key] = str(paths[0]) if isinstance(source[key], str) else [str(p) for p in paths]
    xml = (config.get("dexposure") or {}).get("i2b2_xml") or []
    for i, path in enumerate(xml):
        xml[i] = str(root / "dexposure_xml" / Path(path).name)
        Path(xml[i]).mkdir(parents=True, exist_ok=True)
    if "references" in config:
        pool = root / "reference_pool.csv"
        pool.write_text("sample_id,group_id,text\n")
        config["references"]["pool"] = str(pool)
    for spec in config["models"].values():
        if spec["path"].startswith("data/"):
            spec["path"] = str(root / spec["path"])
            Path(spec["path"]).mkdir(parents=True, exist_ok=True)
    return config


def study(config=None, spec=None, tmp_path=None, fake_paper_files=None):
    config = copy.deepcopy(config or load("config.yaml"))
    if fake_paper_files is not None:
        config = with_fake_files(fake_paper_files, config)
    if spec is not None:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        config["tables_spec"] = str(path)
    return Study.from_config(config, REPO)


def test_tables_name_their_experiments(in_repo):
    s = study()
    assert s.run == "default" and s.results == "results/default"
    assert s.table_experiments("table2") == [
        "base_long_mimic", "base_long_i2b2", "base_long_mimic_patient", "base_long_i2b2_patient",
    ]  # fmt: skip
    assert s.table_experiments("table8") == []  # static
    assert s.table_inputs("table7") == {"base_long_mimic": "results/default/exposure/base_long_mimic.parquet"}
    assert s.figure_inputs("fig3a") == {"base_long_mimic": "results/default/attack/base_long_mimic.parquet"}
    assert s.figure_inputs("fig4")["base_long_i2b2"] == "results/default/metrics/base_long_i2b2.roc.parquet"
    assert "results/default/tables/table11.tex" in s.targets() and "results/default/findings.md" in s.targets()


def test_each_experiment_computes_what_its_cells_ask(in_repo):
    s = study()
    base = s.metric_settings("base_long_mimic")
    # Table 10 asks alpha 1% of Base/long; the overview rows ask both thresholds
    assert base["alphas"] == [0.01, 0.1] and base["thresholds"] == ["heldin_mean", "population"]
    # the paper's two attacks, and the zoo's that need no extra model (table_zoo reads Base/long)
    assert base["attacks"] == sorted(["likelihood_ratio", "loss", "likelihood_ratio_normalized", "zlib", "min_k",
                                      "min_k_plus_plus", "blind"]) and base["level"] == "sample"  # fmt: skip
    assert s.metric_settings("base_pp_long_mimic")["attacks"] == ["likelihood_ratio", "loss"]
    assert base["fprs"] == [0.001, 0.01, 0.1]
    enorm = s.metric_settings("base_short_mimic_enorm")  # Table 11 only: the per-target rows
    assert enorm["alphas"] == [0.1] and enorm["thresholds"] == ["population"]
    assert s.metric_settings("base_long_mimic_patient")["level"] == "patient"
    assert s.attack_columns("base_pp_long_mimic") == {"reference": ["energy"], "target": ["energy"]}
    # the zoo's cheap attacks on Base/long: both energies, the per-token evidence, the text's features
    assert s.attack_columns("base_long_mimic") == {
        "reference": ["energy", "energy@normalized"],
        "sample": ["blind_member_probability", "zlib_bytes"],
        "target": ["energy", "energy@normalized", "token_logp", "token_mean", "token_var"],
    }
    assert s.roc_experiments() == [
        "base_long_mimic", "base_long_i2b2", "zoo_long_mimic", "zoo_long_i2b2", "zoo_mdlm_long_mimic", "zoo_mdlm_long_i2b2"
    ]  # fmt: skip
    assert s.roc_attacks("base_long_i2b2") == sorted(
        ["likelihood_ratio", "loss", "likelihood_ratio_normalized", "zlib", "min_k", "min_k_plus_plus", "blind"]
    )  # Figures 4-5, and the zoo's figure
    assert s.exposure_settings("base_long_mimic")["attack"] == "likelihood_ratio"
    assert s.exposure_settings("base_long_mimic")["alpha"] == 0.1
    # the device is the exposure rule's resource, not a setting of its params
    assert "device" not in s.exposure_settings("base_long_mimic") and s.exposure_device() == "auto"


def test_findings_scopes(in_repo):
    s = study()
    checks = s.finding_checks()
    by_finding = pd.Series([c["finding"] for c in checks if c["group"] == "default"]).value_counts()
    # every sample-level experiment of the default target's tables (not the zoo's own)
    in_tables = {n for t in s.tables if s.group(t) == "default" for n in s.table_experiments(t)}
    sample_level = [n for n in in_tables if s.experiments[n].level == "sample"]
    assert by_finding["lr_beats_loss"] == len(sample_level) == 23
    assert not any(c["scope"] and c["scope"].startswith("zoo_") for c in checks if c["group"] == "default")
    assert by_finding["lr_recall_far_above_loss"] == 2 and by_finding["long_beats_short"] == 1
    recall = next(c for c in checks if c["finding"] == "lr_recall_far_above_loss")
    assert recall["margin"] == 10 and recall["compare"]["experiment"] == "base_long_mimic"
    assert set(s.findings_experiments()) >= {"base_short_mimic", "base_long_mimic_general", "base_b_long_mimic"}
    # the headline group (snakemake headline): its own copies of six findings, (B) over (A) on both sources
    headline = pd.Series([c["finding"] for c in checks if c["group"] == "headline"]).value_counts()
    assert headline["lr_beats_loss"] == 2 and headline.sum() == 7


def test_what_a_config_change_touches(in_repo, tmp_path):
    before = study()
    # a table's alpha: the metrics of that table's experiments, no other
    spec = load("tables.yaml")
    for column in spec["tables"]["table2"]["columns"]:
        column["alpha"] = 0.05
    after = study(spec=spec, tmp_path=tmp_path)
    changed = {n for n in before.metric_experiments() if before.metric_settings(n) != after.metric_settings(n)}
    assert changed == {"base_long_mimic", "base_long_i2b2", "base_long_mimic_patient", "base_long_i2b2_patient"}
    assert after.metric_settings("base_long_i2b2")["alphas"] == [0.05]
    assert after.attack_columns("base_long_i2b2") == before.attack_columns("base_long_i2b2")
    # the bootstrap: every experiment's metrics; figure style: none
    config = load("config.yaml")
    config.setdefault("metrics", {})["bootstrap"] = 50
    more = study(config)
    assert all(more.metric_settings(n) != before.metric_settings(n) for n in before.metric_experiments())
    config = load("config.yaml")
    config.setdefault("figure_style", {})["dpi"] = 70
    styled = study(config)
    assert all(styled.metric_settings(n) == before.metric_settings(n) for n in before.metric_experiments())


def test_schema_defaults_fill_what_a_config_leaves_out(in_repo):
    config = load("config.yaml")
    for key in ("scoring", "metrics", "figure_style", "training", "exposure", "tokenizer"):
        config.pop(key, None)
    s = study(config)
    assert s.config["scoring"]["patterns"] == 10 and s.config["scoring"]["mask_count"] == "ceil"
    assert s.config["metrics"]["bootstrap"] == 200 and s.config["metrics"]["protocols"] == ["published", "corrected"]
    assert s.config["figure_style"]["dpi"] == 150 and s.config["training"]["threads"] == 1
    spec_defaults = yaml.safe_load((SCHEMAS / "tables.schema.yaml").read_text())
    assert (
        spec_defaults["properties"]["experiments"]["additionalProperties"]["properties"]["energy"]["default"]
        == "masked"
    )


def test_the_library_reads_the_defaults_validation_fills():
    # schema.defaults (what the library fills into settings given in part) and validation (what
    # the workflow's config gets) read one schema: the same values, in the same order
    from mlmia.terms.schema import defaults, schema_path, validate

    sections = ("metrics", "scoring", "exposure", "canaries", "dexposure", "figure_style")
    config = {"run": "x", "tables_spec": "unused.yaml", "models": {"m": {"dp": {}}}, **{k: {} for k in sections}}
    validate(config, schema_path("config"))
    for section in sections:
        assert list(config[section].items()) == list(defaults(section).items()), section
    # a model entry and its dp setting get every default (precision none: it follows training.precision,
    # resolved by mlmia.study.resolve)
    entry = config["models"]["m"]
    assert entry == defaults("models", "*") | {"dp": defaults("models", "*", "dp")} and "precision" not in entry
    assert entry["dp"]["canaries"] is None
    # a DP model's gradient canaries default to the audit's (the workflow passes those)
    canaries = defaults("models", "*", "dp", "canaries")
    assert canaries == {
        key: defaults("dp_audit", "gradient_canaries")[key] for key in ("count", "sentinels", "norm", "seed")
    }
    with pytest.raises(KeyError, match="no section models.x"):
        defaults("models", "x")


def test_a_functions_defaults_are_what_a_config_that_leaves_the_keys_out_gets():
    # defaults once: a function a user calls directly takes, for what it is not given, what
    # validation writes into a config that leaves those keys out (the schema's), nothing of its own
    import inspect

    from mlmia.attacks.protocols import roc_points
    from mlmia.attacks.table import build_attack_table
    from mlmia.models.tokenizer import train_tokenizer
    from mlmia.scoring.energy import ENERGY, SCORING, score_file, score_samples, score_samples_oracle
    from mlmia.scoring.neighbours import neighbour_samples
    from mlmia.scoring.settings import ScoringSettings
    from mlmia.terms.schema import schema_path, validate

    sections = ("scoring", "extraction", "neighbours", "tokenizer", "exposure")
    config = validate({"run": "x", "tables_spec": "unused.yaml", **{k: {} for k in sections}}, schema_path("config"))
    spec = validate({"experiments": {"e": {"dataset": "d", "target": "t", "nonmembers": "n", "population": "p"}}},
                    schema_path("tables"))  # fmt: skip

    def given(function, **names):
        parameters = inspect.signature(function).parameters
        return {key: parameters[name].default for key, name in names.items()}

    scoring = config["scoring"]
    keys = ("patterns", "seed", "reduction", "mask_count", "truncate")
    for function in (score_samples, score_samples_oracle, score_file):
        assert given(function, **{k: k for k in keys}) == {k: scoring[k] for k in keys}, function.__name__
        assert given(function, energy="energy") == {"energy": spec["experiments"]["e"]["energy"]}
    assert given(score_file, device="device", precision="precision") == {
        "device": scoring["device"], "precision": scoring["precision"]
    }  # fmt: skip
    # a job's settings are all given (ScoringSettings has no default); the convenience layer's
    # default schedules are the config's, and so are the attack table's and ROC's experiment defaults
    assert SCORING == {k: scoring[k] for k in SCORING} and ENERGY == spec["experiments"]["e"]["energy"]
    assert ScoringSettings.from_config(scoring).score_arguments() == {
        **{k: scoring[k] for k in keys}, "precision": scoring["precision"], "batch_size": scoring["batch_size"],
        "schedule": None,
    }  # fmt: skip
    experiment = spec["experiments"]["e"]
    assert given(build_attack_table, length="length", energy="energy") == {
        k: experiment[k] for k in ("length", "energy")
    }
    assert given(roc_points, level="level") == {"level": experiment["level"]}
    # the neighbour texts' settings have no keyword default: the job passes the resolved section
    empty = inspect.Parameter.empty
    assert set(given(neighbour_samples, n="n", seed="seed", candidates="candidates", dropout="dropout").values()) == {
        empty
    }
    # the tokenizer's settings have no defaults of their own: the rule passes the resolved section
    assert set(given(train_tokenizer, vocab_size="vocab_size", min_frequency="min_frequency",
                     min_patients="min_patients").values()) == {inspect.Parameter.empty}  # fmt: skip
    assert set(config["tokenizer"]) == {"vocab_size", "min_frequency", "min_patients"}


def test_validation_resolves_the_corpus_section():
    # the world's rules pass `corpus` as their params, resolved: every default written in, so the
    # jobs read no schema (mlmia.world.corpus.corpus_settings checks what it is handed)
    from mlmia.terms.schema import defaults, schema_path, validate

    corpus = {"seed": 1, "i2b2": {"nonmember_patients": 3}, "general": {}}
    config = validate(
        {"run": "x", "tables_spec": "unused.yaml", "corpus": copy.deepcopy(corpus)}, schema_path("config")
    )
    expected = defaults("corpus")
    expected["seed"], expected["i2b2"]["nonmember_patients"] = 1, 3
    assert config["corpus"] == expected
    with pytest.raises(UserError, match=r"^config key corpus\.mimic\.member_patients: 0 is less than the minimum of 1"):
        validate(
            {"run": "x", "tables_spec": "t.yaml", "corpus": {"mimic": {"member_patients": 0}}}, schema_path("config")
        )


IMPORTED = {"energy": "masked", "files": "{root}/{model}__{set}.txt", "models": ["m"],
            "sets": {"members": {"role": "member", "source": "mimic"}}}  # fmt: skip


@pytest.mark.parametrize(
    "old, message",
    [
        ({"scoring": {"k": 4}}, "config key scoring.k: renamed to scoring.patterns"),
        (
            {"imported": {"root": "r", "datasets": {"long": {**IMPORTED, "k": 20}}}},
            "config key imported.datasets.long.k: renamed to imported.datasets.long.patterns",
        ),
        ({"extraction": {"k": 5}}, "config key extraction.k: renamed to extraction.top_k"),
        ({"attacks": {"min_k": {"k": 0.3}}}, "config key attacks.min_k.k: renamed to attacks.min_k.fraction"),
        (
            {"attacks": {"rmia": {"gamma": 2.0}, "min_k_plus_plus": {"k": 0.3}}},
            "config key attacks.min_k_plus_plus.k: renamed to attacks.min_k_plus_plus.fraction",
        ),
    ],
)
def test_a_renamed_key_is_refused_naming_the_new_one(old, message):
    from mlmia.terms.schema import schema_path, validate

    # refused before validation: before the other mistakes of the same config, and in one line
    config = {"run": "x", "tables_spec": "unused.yaml", "training": {"thread": 2}, **copy.deepcopy(old)}
    with pytest.raises(UserError) as caught:
        validate(config, schema_path("config"))
    assert str(caught.value) == message


def test_the_renamed_keys_validate_under_their_new_names():
    from mlmia.terms.schema import schema_path, validate

    config = validate(
        {"run": "x", "tables_spec": "unused.yaml", "scoring": {"patterns": 4}, "extraction": {"top_k": 5},
         "imported": {"root": "r", "datasets": {"long": {**IMPORTED, "patterns": 20}}}},
        schema_path("config"),
    )  # fmt: skip
    assert config["scoring"]["patterns"] == 4 and "k" not in config["scoring"]
    assert config["imported"]["datasets"]["long"]["patterns"] == 20
    assert config["extraction"]["top_k"] == 5 and "k" not in config["extraction"]


def test_an_attack_takes_its_renamed_parameter_from_the_config(in_repo):
    # Min-K%'s fraction reaches the metrics job's params under its new name; a parameter of
    # another attack that is also called k is not Min-K%'s (only attacks.min_k*.k were renamed)
    from mlmia.terms.schema import check_renamed

    config = load("config.yaml")
    config["attacks"] = {"min_k": {"fraction": 0.3}}
    s = study(config)
    params = [s.metric_settings(n)["attack_params"] for n in s.metric_experiments()]
    assert {"min_k": {"fraction": 0.3}}.items() <= next(p for p in params if "min_k" in p).items()
    check_renamed({"attacks": {"my_attack": {"k": 3}}})  # a user's attack may have its own k


def test_the_command_line_refuses_a_renamed_option(capsys):
    from mlmia.cli import main

    with pytest.raises(SystemExit) as caught:
        main(["score", "--masks", "4", "--model", "m", "--samples", "s.csv", "--out", "o.parquet"])
    assert caught.value.code == 2
    assert capsys.readouterr().err == "mlmia: error: mlmia score: argument --masks: renamed to --patterns\n"


def test_the_command_line_defaults_are_the_schemas():
    # `mlmia score` with no option given scores as a config that leaves `scoring:` out
    from mlmia.cli import build_parser

    args = build_parser().parse_args(["score", "--model", "m", "--samples", "s.csv", "--out", "o.parquet"])
    chosen = (args.patterns, args.seed, args.reduction, args.mask_count, args.precision, args.device)
    assert chosen == (10, 0, "mean", "ceil", "auto", "auto")
    assert args.energy == "masked" and args.batch_size is None and args.truncate is False


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c, s: c.pop("run"), "config key (top level): 'run' is a required property"),
        (
            lambda c, s: c.setdefault("metrics", {}).update(draws=0),
            "config key metrics.draws: 0 is less than the minimum of 1",
        ),
        (
            lambda c, s: s["tables"]["table2"]["columns"][0].update(alhpa=0.1),
            "key tables.table2.columns.0: Additional properties are not allowed ('alhpa' was unexpected)",
        ),
        (
            lambda c, s: s["row_sets"]["overview"][0].update(attack="no_such_attack"),
            "table 'table2' row 'AUC (A)': unknown attack 'no_such_attack'",
        ),
        (
            lambda c, s: s["tables"]["table3"]["columns"][0].update(experiment="nope"),
            "table 'table3' column 'short': unknown experiment 'nope'",
        ),
        (
            lambda c, s: s["findings"][1]["compare"].update(experiment="nope"),
            "finding 'long_beats_short': unknown experiment 'nope'",
        ),
        (lambda c, s: s["row_sets"]["overview"][2].pop("threshold"), "precision and recall need a threshold"),
        (
            lambda c, s: c["models"]["base"].update(epoch=3),
            "config key models.base: Additional properties are not allowed ('epoch' was unexpected)",
        ),
        (
            lambda c, s: c.setdefault("training", {}).update(thread=2),
            "config key training: Additional properties are not allowed",
        ),
        (
            lambda c, s: c["corpus"].setdefault("mimic", {}).update(members=3),
            "config key corpus.mimic: Additional properties",
        ),
        (
            lambda c, s: c["models"]["base_pp"].update(init="bsae"),
            "config key models.base_pp.init: 'bsae' is not another",
        ),
        (
            lambda c, s: s["experiments"]["base_long_mimic"].update(reference="base"),
            "experiment 'base_long_mimic': target and reference are the same model 'base'",
        ),
    ],
)
def test_bad_configs_and_specs_are_one_line(in_repo, tmp_path, edit, message):
    config, spec = load("config.yaml"), load("tables.yaml")
    edit(config, spec)
    with pytest.raises(UserError) as info:
        study(config, spec, tmp_path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_attack_registered_at_run_time_gets_its_row(in_repo, tmp_path):
    class TargetOverReference(Attack):
        """The target's energy divided by the reference's (a made-up attack for this test)."""

        name = "energy_quotient_for_test"
        label = "(Q) energy quotient"
        inputs = {"target": ("energy",), "reference": ("energy",)}

        def statistic(self, table):
            return table["target_energy"].to_numpy() / table["reference_energy"].to_numpy()

    register(TargetOverReference)
    spec = {
        "experiments": {"e": {"dataset": "d", "target": "t", "reference": "r", "nonmembers": "x", "population": "y"}},
        "tables": {"t": {"columns": [{"id": "c", "experiment": "e"}],
                         "rows": [{"metric": "auc", "attack": "energy_quotient_for_test", "label": "AUC (Q)"},
                                  {"metric": "auc", "attack": "loss", "label": "AUC (A)"}]}},
    }  # fmt: skip
    (tmp_path / "d.csv").write_text("g,t,r\np,some words,member\n")
    config = {
        "run": "tiny", "tables_spec": str(tmp_path / "spec.yaml"), "metrics": {"protocols": ["corrected"], "bootstrap": 0},
        "datasets": {"d": {"columns": {"text": "t", "group": "g", "role": "r"},
                           "files": [{"path": str(tmp_path / "d.csv"), "source": "x"}]}},
        "models": {"t": {"path": "t"}, "r": {"path": "r"}},  # hub ids: not looked up here
    }  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    s = Study.from_config(config, REPO)
    settings = s.metric_settings("e")
    assert settings["attacks"] == ["energy_quotient_for_test", "loss"]
    rng = np.random.default_rng(0)
    n = 60
    role = np.repeat(["member", "nonmember", "population"], n)
    reference = rng.uniform(2, 4, 3 * n)
    target = reference * np.where(role == "member", 0.8, 1.0)  # members: a lower quotient
    table = pd.DataFrame({"sample_id": np.arange(3 * n).astype(str), "group_id": np.arange(3 * n).astype(str), "role": role,
                          "source": np.where(role == "population", "y", "x"), "target_energy": target,
                          "reference_energy": reference})  # fmt: skip
    metrics = attack_metrics(table, MetricSettings.from_params(settings))
    tidy, markdown, _ = render_table("t", s.tables["t"], s.rows("t"), s.experiments, {"e": metrics}, {}, ["corrected"])
    # the quotient separates members perfectly by construction; the loss does not
    assert tidy.set_index("row").loc["AUC (Q)", "value"] == 1.0
    assert tidy.set_index("row").loc["AUC (A)", "value"] < 0.9
    assert "| AUC (Q) | 1.000 |" in markdown


def test_a_population_list_takes_the_first_source_the_sample_table_has(in_repo, tmp_path):
    # the embedded world draws a MIMIC population: the zoo's MIMIC columns take it, the
    # paper's experiments keep i2b2; the paper's files have an i2b2 population only
    s = study()
    assert s.experiments["zoo_long_mimic"].population == "mimic" == s.experiments["zoo_short_mimic"].population
    assert s.experiments["zoo_long_i2b2"].population == "i2b2" == s.experiments["base_long_mimic"].population
    assert {"experiment": "zoo_short_mimic", "role": "population", "source": "mimic", "length": "short"} in (
        s.dataset_requirements("clinical")
    )
    paper = study(load("paper.yaml"), fake_paper_files=tmp_path)
    assert paper.experiments["zoo_long_mimic"].population == "i2b2"
    # the world without a MIMIC population in a bucket: that column falls back to i2b2
    config = load("config.yaml")
    config["samples"]["counts"]["population"]["mimic"] = {"long": 200}
    s = study(config)
    assert (
        s.experiments["zoo_long_mimic"].population == "mimic" and s.experiments["zoo_short_mimic"].population == "i2b2"
    )
    # a dataset whose files take the role from a column: the config cannot tell, the first is taken
    from mlmia.data.datasets import declared_sources

    assert declared_sources({"files": [{"path": "a.csv"}]}, "population", "long") is None
    files = [
        {"path": "p.csv", "role": "pop", "source": "x", "length": "long"},
        {"path": "q.csv", "role": "member", "source": "y"},
    ]
    assert declared_sources({"files": files, "role_names": {"pop": "population"}}, "population", "long") == {"x"}
    assert declared_sources({"files": files, "role_names": {"pop": "population"}}, "population", "short") == set()


def test_models_shards_and_training_text(in_repo, tmp_path):
    s = study()
    assert s.model_dir("base") == "results/default/models/base"
    assert s.training_text("base") == "results/default/corpus/train_target.parquet"
    assert s.training_text("base_b") == "results/default/corpus/train_target_named.parquet"
    assert s.scored_sets() == ["clinical", "clinical_named", "clinical~neighbours"]
    # 610 member, 180 held-in, 400 + 430 non-member and 228 + 228 population samples: 2076, in
    # shards of at most 2500; at most 1000, in 3
    assert s.shards("clinical") == 1
    smaller = load("config.yaml")
    smaller["scoring"]["shard_size"] = 1000
    assert study(smaller).shards("clinical") == 3
    # the 25 neighbour sets of each sample, 5 sets per job: 5 jobs per (model, energy kind); one set per job: 25;
    # 7 per job: ceil(25 / 7) = 4, times the dataset's 3 shards = 12
    assert s.shards("clinical~neighbours") == 5
    smaller["scoring"]["neighbour_sets_per_job"] = 1
    assert study(smaller).shards("clinical~neighbours") == 3 * 25
    smaller["scoring"]["neighbour_sets_per_job"] = 7
    assert study(smaller).shards("clinical~neighbours") == 12
    with pytest.raises(UserError, match="config key models: 'nope' is not a configured model"):
        s.model_dir("nope")
    paper = study(load("paper.yaml"), fake_paper_files=tmp_path)
    assert paper.model_dir("ref_general") == "bert-base-uncased" and paper.shards("clinical") == 16
    assert paper.dataset_tokenizer("clinical") == "bert-base-uncased"
    assert paper.training_text("base") is None  # Table 7 counts tokens on the dataset's members
    raw = load("paper.yaml") | load("paper_raw.yaml")
    outputs = study(raw, fake_paper_files=tmp_path).raw_outputs("mimic")
    assert outputs["member"] == "results/paper/raw/mimic_member.csv"
    assert outputs["member_named"] == "results/paper/raw/mimic_named_member.csv"


def test_training_precision_reaches_every_trained_model_but_dp(in_repo):
    assert study().training_spec("base")["settings"]["precision"] == "fp32"
    config = load("config.yaml")
    config["training"] = {"precision": "bf16"}
    config["models"]["large"]["precision"] = "fp32"
    s = study(config)
    assert s.training_spec("base")["settings"]["precision"] == "bf16"
    assert s.training_spec("large")["settings"]["precision"] == "fp32"  # its own entry wins
    assert s.training_spec("dp_eps8")["settings"]["precision"] == "fp32"  # DP-SGD runs in fp32
    assert s.models["base"]["precision"] == "bf16"  # resolved in the config itself
    assert s.training_spec("pool_ref_0")["settings"]["precision"] == "bf16"  # references.settings: resolved too


def test_the_validated_config_is_resolved(in_repo):
    # every model entry gets its precision, every DP model its dp.canaries: the DP audit's gradient canaries
    from mlmia.models.settings import TrainingSettings
    from mlmia.training_job import training_settings

    s = study()
    audit = s.config["dp_audit"]["gradient_canaries"]
    assert dp_targets(s)
    for name, entry in s.models.items():
        assert entry["precision"] in ("fp32", "bf16"), name
        if entry["dp"] is not None:
            assert entry["dp"]["canaries"] == {key: audit[key] for key in ("count", "sentinels", "norm", "seed")}
    for name in s.trained_models():  # complete: the trainer takes them as they are, with no fallback
        settings = s.training_spec(name)["settings"]
        assert isinstance(training_settings(settings), TrainingSettings), name
    # a copy of a DP model's settings trains without the audit's canaries (they are the audited model's)
    assert s.model_settings("dp_eps8")["dp"]["canaries"] is None
    with pytest.raises(KeyError, match="seed"):  # a settings mapping missing a key: a programming error
        training_settings({k: v for k, v in s.training_spec("base")["settings"].items() if k != "seed"})


def test_the_schema_knows_every_model_key():
    # a model key says where the model comes from (the study keeps those out of a reference's
    # settings) or is a training setting, with its default: a key of neither kind would reach the
    # trainer, which refuses it, from a reference's shape
    from mlmia.models.settings import TrainingSettings
    from mlmia.study.study import NOT_SETTINGS

    schema = yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text())["properties"]
    entry = schema["models"]["additionalProperties"]["properties"]
    # precision: no default in the schema, it follows training.precision (mlmia.study.resolve)
    assert {key for key, spec in entry.items() if "default" not in spec} == {*NOT_SETTINGS, "precision"}
    assert set(TrainingSettings.keys()) == set(entry) - set(NOT_SETTINGS)


def test_a_config_file_with_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text((REPO / "config" / "config.yaml").read_text() + "\nmodels:\n  base: {corpus: target}\n")
    with pytest.raises(UserError, match="twice.yaml: line \\d+: key 'models' given twice in one mapping") as info:
        Study.from_config(yaml.safe_load(path.read_text()), REPO, [path])
    assert "\n" not in str(info.value)


def test_an_audit_refuses_a_model_against_itself():
    from mlmia.study.audit import audit_spec

    audit = {"dataset": "d", "targets": ["m"], "references": ["m"], "nonmembers": ["x"], "population": "y",
             "lengths": ["all"], "energies": ["masked"], "levels": ["sample"], "alpha": 0.1}  # fmt: skip
    with pytest.raises(UserError, match="audit.references: 'm' is also a target"):
        audit_spec({"audit": audit, "datasets": {"d": {}}, "models": {"m": {}}})


def test_shards_are_clamped_to_the_samples_with_a_warning(tmp_path, caplog):
    (tmp_path / "notes.csv").write_text("g,t,r\np1,a b c,member\np2,d e f,nonmember\np3,g h i,population\n")
    config = {
        "run": "clamped",
        "datasets": {"notes": {"root": str(tmp_path), "columns": {"text": "t", "group": "g", "role": "r"},
                               "files": [{"path": "notes.csv", "source": "x"}], "shards": 200}},
        "models": {"t": {"path": "t"}, "r": {"path": "r"}},
        "audit": {"dataset": "notes", "targets": ["t"], "references": ["r"], "nonmembers": ["x"], "population": "x"},
    }  # fmt: skip
    s = Study.from_config(config, REPO)
    with caplog.at_level("WARNING", logger="mlmia.study.study"):
        assert s.shards("notes") == 3
    assert "config key datasets.notes.shards: 200 shards for 3 samples; scoring in 3" in caplog.text
    # files that cannot be counted yet (written later by an importer): the configured count
    from mlmia.data.datasets import count_rows

    assert count_rows({"files": [{"path": str(tmp_path / "later.csv")}]}) is None


def test_each_experiment_needs_only_the_roles_its_outputs_use(in_repo, tmp_path):
    s = study()
    # the overview rows hold the mu threshold (held-in members) and the population threshold
    assert s.required_roles("base_long_mimic") == ["member", "nonmember", "population", "member_heldin"]
    # Table 11's per-target rows: the population threshold only
    assert s.required_roles("base_short_mimic_enorm") == ["member", "nonmember", "population"]
    needs = pd.DataFrame(s.dataset_requirements("clinical"))
    assert set(needs.experiment) == {e for e, x in s.experiments.items() if x.dataset == "clinical"}
    row = needs[(needs.experiment == "base_long_i2b2") & (needs.role == "nonmember")].iloc[0]
    assert (row.source, row.length) == ("i2b2", "long")
    # an audit's rows use no mu threshold: held-in members are optional
    (tmp_path / "n.csv").write_text("g,t,r\np,a b,member\n")
    config = {
        "run": "r",
        "datasets": {"n": {"columns": {"text": "t", "group": "g", "role": "r"}, "files": [{"path": str(tmp_path / "n.csv"), "source": "x"}]}},
        "models": {"t": {"path": "t"}, "r": {"path": "r"}},
        "audit": {"dataset": "n", "targets": ["t"], "references": ["r"], "nonmembers": ["x"], "population": "x"},
    }  # fmt: skip
    audit = Study.from_config(config, REPO)
    assert {tuple(sorted(audit.required_roles(e))) for e in audit.experiments} == {
        ("member", "nonmember", "population")
    }


def test_reference_pool_fine_tuned_from_a_trained_model(in_repo, tmp_path):
    """`references.init` may name a model the workflow trains (it is trained before the pool),
    which no file check can find before the run; a model given by `path` must be there."""
    config = load("config.yaml")
    config["references"] = {**config["references"], "init": "ref_general"}
    s = study(config)
    assert s.training_spec("pool_ref_0")["init"] == "ref_general"
    assert s.training_tokenizer("pool_ref_0") == "results/default/models/ref_general"
    config["models"]["public"] = {"path": str(tmp_path / "absent")}
    config["references"]["init"] = "public"
    with pytest.raises(UserError, match="models.public.path: no such directory"):
        study(config)
    config["models"]["public"] = {"path": "bert-base-uncased"}  # a hub id: no local directory to fine-tune
    with pytest.raises(UserError, match="references.init: 'public' must be a local model directory"):
        study(config)


def test_what_a_tables_spec_leaves_out_is_the_schemas_default(tmp_path):
    # a finding cell's alpha, a column's alpha and an exposure table's attack: written once, in
    # tables.schema.yaml; the metrics jobs compute at those alphas, Table 7 labels with that attack
    threshold = {"metric": "recall", "attack": "loss", "threshold": "population"}
    spec = {
        "experiments": {name: {"dataset": "d", "target": "t", "reference": "r", "nonmembers": "x", "population": "y"}
                        for name in ("e", "f", "g")},
        "tables": {"t": {"columns": [{"id": "c", "experiment": "e"}], "rows": [{"metric": "auc", "attack": "loss"}]},
                   "t7": {"kind": "exposure", "columns": [{"id": "c", "experiment": "g", "metric": "precision", "split": "test"}],
                          "rows": [{"label": "all", "features": "all"}]}},
        "findings": [{"id": "f", "claim": "c", "experiments": ["f"], "compare": threshold,
                      "against": {**threshold, "alpha": 0.05}}],
    }  # fmt: skip
    (tmp_path / "d.csv").write_text("g,t,r\np,some words,member\n")
    config = {
        "run": "tiny", "tables_spec": str(tmp_path / "spec.yaml"),
        "datasets": {"d": {"columns": {"text": "t", "group": "g", "role": "r"},
                           "files": [{"path": str(tmp_path / "d.csv"), "source": "x"}]}},
        "models": {"t": {"path": "t"}, "r": {"path": "r"}}, "exposure": {"embedding_model": "r"},
    }  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    s = Study.from_config(config, REPO)
    assert s.tables["t"]["columns"][0]["alpha"] == 0.1 and "attack" not in s.tables["t"]
    assert s.metric_settings("f")["alphas"] == [0.05, 0.1]
    check = s.finding_checks()[0]
    assert (check["compare"]["alpha"], check["against"]["alpha"], check["kind"], check["margin"]) == (
        0.1, 0.05, "finding", 0
    )  # fmt: skip
    assert (s.exposure_settings("g")["attack"], s.exposure_settings("g")["alpha"]) == ("likelihood_ratio", 0.1)
    # an exposure table naming its attack keeps it
    spec["tables"]["t7"]["attack"] = "loss"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert Study.from_config(copy.deepcopy(config), REPO).exposure_settings("g")["attack"] == "loss"
