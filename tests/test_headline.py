"""The paper's headline findings, checked by `make test`: `snakemake headline` on the default
world trains only the models they read (Base, Base-b, the domain and the general reference) and
each finding must separate (findings.md: the paired patient-bootstrap 95% interval of the
difference above its margin). The full default run and its every finding stay in `make
test-default` (an hour of 2 cores); this is the part of it a change must not break in CI."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from test_findings import HEADLINE as DEFAULT_RUN_HEADLINE
from test_findings import lr_auc

# (finding, scope): the headline claims of the paper (docs/paper.md), as config/tables.yaml's
# `headline` group states them: the full default run's headline checks (tests/test_findings.py:
# (B) over (A) on both sources, long over short samples, the domain reference over the general
# one, name insertion raising (B) and lowering (A)) and patient over sample level
HEADLINE = [*DEFAULT_RUN_HEADLINE, ("patient_beats_sample", "base_long_mimic_patient")]


@pytest.fixture(scope="module")
def findings(headline_run) -> pd.DataFrame:
    return pd.read_csv(headline_run / "results/default/findings_headline.csv")


def test_headline_trains_only_the_models_its_findings_read(headline_run):
    models = headline_run / "results/default/models"
    assert sorted(p.name for p in models.iterdir()) == ["base", "base_b", "ref_domain", "ref_general", "tokenizer"]


def test_every_headline_finding_separates(findings):
    rows = {(row.finding, row.scope): row for row in findings.itertuples()}
    assert set(rows) == set(HEADLINE)
    for key in HEADLINE:
        row = rows[key]
        assert row.holds and row.verdict == "separated", (key, row.difference, row.difference_ci_low)
        assert row.difference_ci_low > row.margin  # the definition of separated, read off the interval


def test_headline_numbers_are_the_default_runs(findings):
    """The same world, models and samples as the full default run: its AUCs, this project's own
    numbers as docs/paper.md records them from `make run` (Table 2, Tables 3, 5, 6: three
    decimals), not a publication's."""
    recorded = {
        ("lr_beats_loss", "base_long_mimic"): (0.803, 0.682),
        ("lr_beats_loss", "base_long_i2b2"): (0.927, 0.852),
        ("long_beats_short", "base_long_mimic"): (0.803, 0.704),
        ("domain_beats_general", "base_long_mimic"): (0.803, 0.710),
        ("names_raise_lr", "base_b_long_mimic"): (0.983, 0.803),
        ("names_lower_loss", "base_long_mimic"): (0.682, 0.598),
        ("patient_beats_sample", "base_long_mimic_patient"): (0.888, 0.803),
    }
    for row in findings.itertuples():
        assert (round(row.first_value, 3), round(row.second_value, 3)) == recorded[(row.finding, row.scope)]


def test_headline_orderings_by_hand(headline_run, findings):
    # each comparison recomputed from the attack tables with scikit-learn (tests/test_findings.py's
    # lr_auc: every member against every non-member, no member draws), independently of the metrics
    # code: (B) is the target's energy less the reference's, (A) the target's energy
    column = {"likelihood_ratio": "stat", "loss": "target"}
    for row in findings.itertuples():
        first, second = (
            lr_auc(headline_run, experiment, column[attack])
            for attack, experiment in (
                re.fullmatch(r"(\w+) auc \[(\w+)\]", cell).groups() for cell in (row.first, row.second)
            )
        )
        assert first > second, (row.finding, row.scope, first, second)


def test_the_readme_lists_exactly_the_headline_group():
    """README.md's list of what `snakemake headline` checks is the `headline` group of
    config/tables.yaml, claim for claim, in order: the README promises no check that is not run."""
    import yaml
    from workflow_helpers import REPO

    claims = [
        f["claim"]
        for f in yaml.safe_load((REPO / "config/tables.yaml").read_text())["findings"]
        if f.get("group") == "headline"
    ]
    readme = (REPO / "README.md").read_text()
    after = readme[readme.index("`snakemake headline`") :]
    listed = []
    for line in after.splitlines()[1:]:
        if line.startswith("- "):
            listed.append(line[2:].strip())
        elif listed:
            break
    assert listed == claims
