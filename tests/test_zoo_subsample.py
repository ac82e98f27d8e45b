"""End to end on the CI world: `neighbours.subsample` makes and scores neighbour texts for the drawn
samples only, and the neighbourhood attack's metrics read those rows while the other attacks keep
every sample (tests/test_neighbour_subsample.py has the unit checks). It runs in a copy of the
session's CI run (`ci_run`), so that only the neighbour jobs and one zoo experiment's table and
metrics run again, and the shared run is left as it was."""

import shutil

import numpy as np
import pandas as pd
import yaml
from sklearn.metrics import roc_auc_score
from workflow_helpers import run_snakemake

from mlmia.terms.manifest import neighbour_subsample
from mlmia.terms.schema import defaults

RUN = "results/ci"
SUBSAMPLE = {"member": {"mimic": {"short": 4, "long": 12}}, "nonmember": {"mimic": {"short": 2, "long": 12}}}


def test_snakemake_zoo_experiment_with_a_neighbour_subsample(ci_run, tmp_path):
    workdir = tmp_path / "ci_subsample"
    shutil.copytree(ci_run, workdir, symlinks=True)
    target = f"{RUN}/metrics/zoo_long_mimic.parquet"
    # the experiment without a subsample first (nothing to do where the session's zoo test built it)
    run_snakemake(workdir, target, "--configfile", "test_config.yaml")
    before = pd.read_parquet(workdir / target)
    config = yaml.safe_load((workdir / "test_config.yaml").read_text())
    config.setdefault("neighbours", {})["subsample"] = SUBSAMPLE
    (workdir / "test_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run_snakemake(workdir, target, "--configfile", "test_config.yaml")

    samples = pd.read_parquet(workdir / RUN / "samples/clinical.parquet")
    seed = config["neighbours"].get("seed", defaults("neighbours")["seed"])  # the file may leave it to the schema
    drawn = samples[neighbour_subsample(samples, SUBSAMPLE, seed)]
    made = pd.read_parquet(workdir / RUN / "samples/clinical~neighbours.parquet")
    # neighbour texts for the drawn samples only, count of each
    assert set(made.neighbour_of) == set(drawn.sample_id)
    assert made.groupby("neighbour_of").size().eq(config["neighbours"]["count"]).all()
    counts = drawn.groupby(["role", "source", "length"]).size().to_dict()
    assert counts[("member", "mimic", "long")] == 12 and counts[("nonmember", "mimic", "long")] == 12
    assert counts[("nonmember", "i2b2", "long")] == 16 and "population" not in set(drawn.role)  # not named: all
    scored = pd.read_parquet(workdir / RUN / "scores/clinical~neighbours/base.masked.parquet")
    assert set(scored.sample_id) <= set(made.sample_id)

    table = pd.read_parquet(workdir / RUN / "attack/zoo_long_mimic.parquet")
    has = table.neighbours_energy.notna()
    assert set(table.sample_id[has]) == set(drawn.sample_id) & set(table.sample_id)
    metrics = pd.read_parquet(workdir / RUN / "metrics/zoo_long_mimic.parquet")
    cell = metrics[(metrics.metric == "auc") & (metrics.protocol == "corrected") & metrics.replicate.isna()]
    auc = cell.set_index("attack").value
    # 12 members against 12 non-members in the subsample: every member in every draw, so the AUC is
    # the subsample's, computed here from the attack table's columns
    rows = table[has & table.role.isin(["member", "nonmember"])]
    statistic = rows.target_energy - rows.neighbours_energy.map(np.mean)
    assert auc["neighbourhood"] == roc_auc_score(rows.role == "member", -statistic)
    # every other attack reads the whole sample: its cells are those without the subsample, unchanged
    others = ~metrics.attack.isin(["neighbourhood"])
    pd.testing.assert_frame_equal(
        metrics[others].reset_index(drop=True), before[~before.attack.isin(["neighbourhood"])].reset_index(drop=True)
    )
