"""The paper-scores slice through Snakemake, in a temporary copy of the workflow."""

import shutil

import pandas as pd
import pytest

from workflow_helpers import copy_workflow, paper_scores_root, run_snakemake, write_config


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("paper_scores"))
    config = write_config(workdir, "paper_scores.yaml", imported__root=str(paper_scores_root()), metrics__bootstrap=20)
    run_snakemake(workdir, "--configfile", str(config))
    return workdir


def test_tables_hold_the_published_digits(slice_run):
    table2 = pd.read_csv(slice_run / "results/tables/table2.csv")
    published = table2[table2.protocol == "published"]
    assert set(published.column) == {"sample_mimic", "sample_i2b2"}
    # every printed cell beside its published number, and equal to the printed digit
    with_paper = published.dropna(subset=["paper_value"])
    assert len(with_paper) == 16
    digits = with_paper.metric.map({"auc": 3}).fillna(1).astype(int)
    same = [round(v, d) == p for v, d, p in zip(with_paper.value, digits, with_paper.paper_value)]
    # the three mu cells the scores do not reproduce are the only differences
    off = with_paper[[not s for s in same]]
    assert sorted(zip(off.column, off.metric, off.method)) == [
        ("sample_i2b2", "precision", "loss_mu"),
        ("sample_i2b2", "recall", "loss_mu"),
        ("sample_mimic", "recall", "loss_mu"),
    ]
    corrected = table2[table2.protocol == "corrected"]
    assert corrected.ci_low.notna().all() and (corrected.ci_low <= corrected.ci_high).all()
    table10 = pd.read_csv(slice_run / "results/tables/table10.csv")
    row = table10[(table10.protocol == "published") & (table10.method == "lr_pop") & (table10.metric == "precision")]
    assert row.alpha.iloc[0] == 0.01 and round(row.value.iloc[0], 1) == 98.5
    markdown = (slice_run / "results/tables/table10.md").read_text()
    assert "| Prec. (B) | 98.5 (98.5) |" in markdown
    assert r"\begin{tabular}" in (slice_run / "results/tables/table2.tex").read_text()


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
    assert not (workdir / "results/samples/long.parquet").exists()
    assert not list((workdir / "results").glob("**/*.tmp"))


def test_schema_violation_is_one_clear_line(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "paper_scores.yaml", imported__root=str(paper_scores_root()), metrics__draws=0)
    result = run_snakemake(workdir, "--configfile", str(config), "-n", check=False)
    assert result.returncode != 0
    assert "config key metrics.draws: 0 is less than the minimum of 1" in result.stdout + result.stderr
    assert not (workdir / "results").exists()
