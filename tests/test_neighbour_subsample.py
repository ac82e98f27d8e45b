"""The neighbourhood attack on a stated subsample (config key `neighbours.subsample`, issue 42 item
5): the draw is what it claims (counts per role, source and length bucket, reproducible, a subset,
the default every sample), the attack table leaves the other samples without neighbours, and the
metrics compute the neighbourhood attack on the subsample's rows alone (checked against
scikit-learn on fixed arrays) while every other attack keeps the whole sample; with the key absent
the plan is the one it was. The end-to-end run is tests/test_zoo_subsample.py."""

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import roc_auc_score
from workflow_helpers import REPO

from mlmia.attacks.protocols import MetricSettings, attack_metrics, point_estimates
from mlmia.attacks.table import build_attack_table
from mlmia.core.errors import UserError
from mlmia.study.study import Study
from mlmia.terms.manifest import neighbour_subsample


def manifest() -> pd.DataFrame:
    """40 members, 10 held-in, 30 + 20 non-members (mimic, i2b2), 12 population, long and short."""
    rows = []
    for role, source, n in (("member", "mimic", 40), ("member_heldin", "mimic", 10), ("nonmember", "mimic", 30),
                            ("nonmember", "i2b2", 20), ("population", "mimic", 12)):  # fmt: skip
        for i in range(n):
            rows.append({"sample_id": f"{role}-{source}-{i:02d}", "group_id": f"{role}-{source}-p{i // 2}",
                         "role": role, "source": source, "length": "long" if i % 3 else "short"})  # fmt: skip
    return pd.DataFrame(rows)


SUBSAMPLE = {"member": {"mimic": {"long": 8, "short": 3}}, "nonmember": {"mimic": {"long": 12, "short": 4}}}


def test_the_subsample_holds_the_counts_asked_for_a_subset_drawn_reproducibly():
    samples = manifest()
    kept = neighbour_subsample(samples, SUBSAMPLE, seed=5)
    chosen = samples[kept]
    counts = chosen.groupby(["role", "source", "length"]).size().to_dict()
    whole = samples.groupby(["role", "source", "length"]).size().to_dict()
    assert counts[("member", "mimic", "long")] == 8 and counts[("member", "mimic", "short")] == 3
    assert counts[("nonmember", "mimic", "long")] == 12 and counts[("nonmember", "mimic", "short")] == 4
    # a role or source not named keeps every sample; the population gets no neighbour texts
    for key in (("member_heldin", "mimic", "long"), ("member_heldin", "mimic", "short"),
                ("nonmember", "i2b2", "long"), ("nonmember", "i2b2", "short")):  # fmt: skip
        assert counts[key] == whole[key], key
    assert "population" not in set(chosen.role)
    # reproducible, the same whatever the row order, another seed another draw
    assert kept.equals(neighbour_subsample(samples, SUBSAMPLE, seed=5))
    shuffled = samples.sample(frac=1.0, random_state=1)
    assert set(shuffled[neighbour_subsample(shuffled, SUBSAMPLE, seed=5)].sample_id) == set(chosen.sample_id)
    assert set(samples[neighbour_subsample(samples, SUBSAMPLE, seed=6)].sample_id) != set(chosen.sample_id)


def test_no_subsample_selects_every_sample_and_bad_ones_are_one_line():
    samples = manifest()
    assert neighbour_subsample(samples, {}, seed=0).all()
    for subsample, match in (
        ({"member": {"mimic": 28}}, r"config key neighbours.subsample.member.mimic: 28 long samples asked for, the sample table has 26"),
        ({"population": {"mimic": 1}}, r"config key neighbours.subsample.population: not an audited role"),
        ({"nonmember": {"other": 1}}, r"config key neighbours.subsample.nonmember.other: the sample table has no nonmember"),
    ):  # fmt: skip
        with pytest.raises(UserError, match=match) as info:
            neighbour_subsample(samples, subsample, seed=0)
        assert "\n" not in str(info.value)


def scored_world(seed: int = 0):
    """A manifest, its target energies and its neighbour energies (fixed arrays), and the
    neighbour table of `SUBSAMPLE`'s draw: (manifest, scores, neighbour table)."""
    samples = manifest()
    rng = np.random.default_rng(seed)
    trained = samples.role.isin(["member", "member_heldin"]).to_numpy()
    energy = rng.normal(2.0, 0.5, len(samples)) - 0.4 * trained
    drawn = samples[neighbour_subsample(samples, SUBSAMPLE, seed=5)]
    neighbours = pd.DataFrame(
        [{"sample_id": f"{sid}~n{j}", "neighbour_of": sid} for sid in drawn.sample_id for j in range(3)]
    )
    neighbour_energy = rng.normal(2.0, 0.5, len(neighbours))
    scores = {
        ("target", "masked"): pd.DataFrame({"sample_id": samples.sample_id, "energy": energy}),
        ("neighbours", "masked"): pd.DataFrame({"sample_id": neighbours.sample_id, "energy": neighbour_energy}),
    }
    return samples, scores, neighbours


def test_the_neighbourhood_cell_is_the_attack_on_the_subsample_and_the_others_keep_every_sample():
    samples, scores, neighbours = scored_world()
    table = build_attack_table(
        samples, scores, {"target": "t", "neighbours": "t"}, {"target": ["energy"], "neighbours": ["energy"]},
        nonmembers="mimic", population="mimic", neighbours=neighbours, subsample={"subsample": SUBSAMPLE, "seed": 5},
    )  # fmt: skip
    drawn = set(samples[neighbour_subsample(samples, SUBSAMPLE, seed=5)].sample_id)
    has = table.neighbours_energy.notna()
    assert set(table.sample_id[has]) == drawn & set(table.sample_id)
    # without the subsample the same neighbour table is refused: every audited sample needs neighbours
    with pytest.raises(UserError, match="has no neighbours"):
        build_attack_table(samples, scores, {"target": "t", "neighbours": "t"},
                           {"target": ["energy"], "neighbours": ["energy"]}, nonmembers="mimic", population="mimic",
                           neighbours=neighbours)  # fmt: skip
    # 11 members and 16 non-members in the subsample (every member drawn in each draw: the AUC is exact)
    settings = MetricSettings(protocols=("corrected",), attacks=("loss", "neighbourhood"), alphas=(0.1,),
                              thresholds=("population",), fprs=(0.1,), draws=3, seed=1, bootstrap=0, level="sample")  # fmt: skip
    metrics = point_estimates(attack_metrics(table, settings))
    auc = metrics[metrics.metric == "auc"].set_index("attack").value

    # by hand, from the fixed arrays: the target's energy minus the mean of its neighbours'
    energy = scores[("target", "masked")].set_index("sample_id").energy
    of = neighbours.assign(energy=scores[("neighbours", "masked")].energy.to_numpy()).groupby("neighbour_of").energy
    members = [s for s in table.sample_id[table.role == "member"] if s in drawn]
    nonmembers = [s for s in table.sample_id[table.role == "nonmember"] if s in drawn]
    assert (len(members), len(nonmembers)) == (11, 16)
    ids = members + nonmembers
    statistic = np.array([energy[s] - of.mean()[s] for s in ids])
    y = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    assert auc["neighbourhood"] == pytest.approx(roc_auc_score(y, -statistic))
    # the loss attack on every member (40) against every MIMIC non-member (30): 30 members drawn, so
    # its AUC is the mean over draws; check it against the whole sample's AUC computed independently
    every = table[table.role.isin(["member", "nonmember"])]
    whole = roc_auc_score(every.role == "member", -every.sample_id.map(energy))
    assert abs(auc["loss"] - whole) < 0.1 and auc["loss"] != pytest.approx(auc["neighbourhood"])


def study(name: str) -> Study:
    return Study.from_config(yaml.safe_load((REPO / "config" / name).read_text()), REPO)


def test_without_the_key_the_neighbour_plan_is_unchanged():
    """The CI config (no subsample): every sample gets neighbour texts, the neighbour table is
    scored in its dataset's shards times the sets per job, as before the key existed."""
    ci = study("ci.yaml")
    assert ci.neighbour_settings()["subsample"] == {} and ci.neighbour_draw() == {"subsample": {}, "seed": 0}
    per_job = ci.config["scoring"]["neighbour_sets_per_job"]
    assert ci.shards("clinical~neighbours") == ci.shards("clinical") * math.ceil(
        ci.config["neighbours"]["count"] / per_job
    )


def test_the_large_config_scores_the_subsample_in_fewer_jobs():
    large = study("large.yaml")
    subsample = large.config["neighbours"]["subsample"]
    assert subsample == {"nonmember": {"mimic": 1500, "i2b2": 1500}}
    # 500 members + 150 held-in + 2 x 1,500 non-members = 3,650 samples: one shard of 6,000, 5 sets a job
    assert large.shards("clinical~neighbours") == 1 * 5 and large.shards("clinical") == 4
