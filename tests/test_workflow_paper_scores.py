"""The paper-scores slice through Snakemake, in a temporary copy of the workflow."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import roc_auc_score
from workflow_helpers import REPO, copy_workflow, edit_yaml, paper_scores_root, run_snakemake, write_config


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("paper_scores"))
    # the shipped config's own root (resources/paper_scores in the copy) unless the tests are told
    # to read another folder
    override = {"imported__root": str(paper_scores_root())} if os.environ.get("MLMIA_PAPER_SCORES") else {}
    config = write_config(workdir, "paper_scores.yaml", metrics__bootstrap=20, **override)
    run_snakemake(workdir, "--configfile", str(config))
    return workdir


def test_tables_hold_the_published_digits(slice_run):
    table2 = pd.read_csv(slice_run / "results/paper_scores/tables/table2.csv")
    published = table2[table2.protocol == "published"]
    assert set(published.column) == {"sample_mimic", "sample_i2b2"}
    # every printed cell beside its published number, and equal to the printed digit
    with_paper = published.dropna(subset=["paper_value"])
    assert len(with_paper) == 16
    digits = with_paper.metric.map({"auc": 3}).fillna(1).astype(int)
    same = [round(v, d) == p for v, d, p in zip(with_paper.value, digits, with_paper.paper_value)]
    # the three mu cells the scores do not reproduce are the only differences
    off = with_paper[[not s for s in same]]
    assert sorted(zip(off.column, off.metric, off.attack, off.threshold)) == [
        ("sample_i2b2", "precision", "loss", "heldin_mean"),
        ("sample_i2b2", "recall", "loss", "heldin_mean"),
        ("sample_mimic", "recall", "loss", "heldin_mean"),
    ]
    corrected = table2[table2.protocol == "corrected"]
    assert corrected.ci_low.notna().all() and (corrected.ci_low <= corrected.ci_high).all()
    table10 = pd.read_csv(slice_run / "results/paper_scores/tables/table10.csv")
    row = table10[
        (table10.protocol == "published")
        & (table10.attack == "likelihood_ratio")
        & (table10.threshold == "population")
        & (table10.metric == "precision")
    ]
    assert row.alpha.iloc[0] == 0.01 and round(row.value.iloc[0], 1) == 98.5
    markdown = (slice_run / "results/paper_scores/tables/table10.md").read_text()
    assert "| Prec. (B) | 98.5 (98.5) |" in markdown
    assert r"\begin{tabular}" in (slice_run / "results/paper_scores/tables/table2.tex").read_text()


def test_named_target_and_nothing_left_to_do(slice_run):
    result = run_snakemake(slice_run, "table2", "-n", "--configfile", "test_config.yaml")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_unequal_score_files_fail_with_one_line_and_no_output(tmp_path):
    workdir = copy_workflow(tmp_path)
    scores = tmp_path / "scores"
    shutil.copytree(paper_scores_root(), scores)
    lines = (scores / "long/pubmed__nonmembers_mimic.txt").read_text().splitlines(keepends=True)
    (scores / "long/pubmed__nonmembers_mimic.txt").write_text("".join(lines[:-5]))
    config = write_config(workdir, "paper_scores.yaml", imported__root=str(scores), metrics__bootstrap=0)
    result = run_snakemake(workdir, "--configfile", str(config), check=False)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("mlmia: error:")]
    assert len(errors) == 1
    assert "pubmed__nonmembers_mimic.txt: 1713 scores but" in errors[0] and "has 1718" in errors[0]
    assert not (workdir / "results/paper_scores/samples/long.parquet").exists()
    assert not list((workdir / "results").glob("**/*.tmp"))


def test_schema_violation_is_one_clear_line(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "paper_scores.yaml", imported__root=str(paper_scores_root()), metrics__draws=0)
    result = run_snakemake(workdir, "--configfile", str(config), "-n", check=False)
    assert result.returncode != 0
    assert "config key metrics.draws: 0 is less than the minimum of 1" in result.stdout + result.stderr
    assert not (workdir / "results").exists()


PLUGIN = '''
from mlmia.attacks import Attack


class EnergyQuotient(Attack):
    """The target's energy over the reference's: a user's own attack, from an entry point."""

    name = "energy_quotient"
    label = "(Q) energy quotient"
    inputs = {"target": ("energy",), "reference": ("energy",)}
    lower_is_member = True

    def statistic(self, table):
        return table["target_energy"].to_numpy() / table["reference_energy"].to_numpy()
'''


def test_a_users_attack_from_an_entry_point_gets_its_row(tmp_path):
    """Bring your own attack: an installed distribution's `mlmia.attacks` entry point, named
    in a table spec; no file of the project changes."""
    (tmp_path / "workflow").mkdir()
    workdir = copy_workflow(tmp_path / "workflow")
    plugin = tmp_path / "plugin"
    (plugin / "my_attacks-0.1.dist-info").mkdir(parents=True)
    (plugin / "my_attacks.py").write_text(PLUGIN)
    (plugin / "my_attacks-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: my-attacks\nVersion: 0.1\n"
    )
    (plugin / "my_attacks-0.1.dist-info" / "entry_points.txt").write_text(
        "[mlmia.attacks]\nenergy_quotient = my_attacks:EnergyQuotient\n"
    )
    spec = yaml.safe_load((REPO / "config" / "tables_paper_scores.yaml").read_text())
    spec["row_sets"]["overview"].append({"metric": "auc", "attack": "energy_quotient", "label": "AUC (Q)"})
    (workdir / "my_tables.yaml").write_text(yaml.safe_dump(spec))
    config = write_config(workdir, "paper_scores.yaml", imported__root=str(paper_scores_root()), metrics__bootstrap=0,
                          metrics__protocols=["corrected"], tables_spec="my_tables.yaml", tables=["table2"])  # fmt: skip
    run_snakemake(workdir, "--configfile", str(config), env={"PYTHONPATH": str(plugin)})
    table2 = pd.read_csv(workdir / "results/paper_scores/tables/table2.csv")
    cell = table2[(table2.row == "AUC (Q)") & (table2.column == "sample_mimic")]
    assert cell.attack.tolist() == ["energy_quotient"]
    # independently: the quotient's AUC over every member and non-member of the score files
    files = paper_scores_root() / "long"
    members = np.loadtxt(files / "base__members.txt") / np.loadtxt(files / "pubmed__members.txt")
    nonmembers = np.loadtxt(files / "base__nonmembers_mimic.txt") / np.loadtxt(files / "pubmed__nonmembers_mimic.txt")
    expected = roc_auc_score(np.r_[np.ones(len(members)), np.zeros(len(nonmembers))], -np.r_[members, nonmembers])
    # the table averages 10 draws of 1718 of the 13983 members: within sampling noise of the full AUC
    assert cell.value.iloc[0] == pytest.approx(expected, abs=0.01)
    assert "| AUC (Q) |" in (workdir / "results/paper_scores/tables/table2.md").read_text()


def test_a_run_from_another_directory_finds_the_workflow_files(tmp_path):
    """`snakemake -s path/to/Snakefile --directory DIR`: the schemas and the configs' tables
    spec and paper values are the workflow's own, wherever the run writes."""
    (tmp_path / "workflow").mkdir()
    workflow = copy_workflow(tmp_path / "workflow")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = elsewhere / "scores.yaml"
    shutil.copy2(REPO / "config" / "paper_scores.yaml", config)
    edit_yaml(config, imported__root=str(paper_scores_root()), metrics__draws=0)
    args = ["-s", str(workflow / "Snakefile"), "--directory", str(elsewhere), "--configfile", str(config), "-n"]
    result = run_snakemake(tmp_path, *args, check=False)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("mlmia: error:")]
    assert errors == ["mlmia: error: config key metrics.draws: 0 is less than the minimum of 1"]
    edit_yaml(config, metrics__draws=2)
    result = run_snakemake(tmp_path, *args)
    assert "render_table" in result.stdout and not (workflow / "results").exists()
