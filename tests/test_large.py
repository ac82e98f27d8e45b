"""config/large.yaml (docs/large.md): 10,000 long non-member samples of at least 1,000 patients
per source, drawn by the world's own functions; the default run's training text; the sharded
scoring jobs the workflow plans for it, the neighbourhood attack's on its subsample included (a
dry run in an empty directory, nothing trained)."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO

from mlmia.models.tokenizer import train_tokenizer
from mlmia.terms.schema import defaults, schema_path, validate
from mlmia.world.corpus import build_world
from mlmia.world.samples import select_samples

SOURCES = ("mimic", "i2b2")


def load(name):
    """A shipped config as validated: every default written in (the files hold only what they set apart)."""
    return validate(yaml.safe_load((REPO / "config" / name).read_text()), schema_path("config"))


@pytest.fixture(scope="module")
def large():
    return load("large.yaml")


def test_the_large_config_keeps_the_default_worlds_settings_but_its_counts(large):
    default = load("config.yaml")
    corpus = {**large["corpus"], "mimic": dict(large["corpus"]["mimic"]), "i2b2": dict(large["corpus"]["i2b2"])}
    for source in SOURCES:
        for key in ("nonmember_patients", "population_patients"):
            corpus[source][key] = default["corpus"][source][key]
    assert corpus == default["corpus"]
    assert large["tokenizer"] == default["tokenizer"]
    for model in ("base", "ref_domain", "ref_general"):
        assert large["models"][model] == default["models"][model], model
    assert large["training"] == default["training"]
    assert {k: v for k, v in large["scoring"].items() if k != "shard_size"} == {
        k: v for k, v in default["scoring"].items() if k != "shard_size"
    }
    # the neighbour texts are the default's, for a stated subsample of the non-members only
    assert {k: v for k, v in large["neighbours"].items() if k != "subsample"} == {
        k: v for k, v in default["neighbours"].items() if k != "subsample"
    }
    assert large["neighbours"]["subsample"] == {"nonmember": {source: 1500 for source in SOURCES}}
    assert {k: v for k, v in large["references"].items() if k != "online"} == {
        k: v for k, v in default["references"].items() if k != "online"
    }
    assert large["metrics"] | {"protocols": None} == default["metrics"] | {"protocols": None}
    assert large["samples"]["seed"] == default["samples"]["seed"]
    assert large["samples"]["counts"]["member"]["mimic"] == default["samples"]["counts"]["member"]["mimic"]["long"]


def test_the_large_world_gives_10000_long_non_members_of_1000_patients_per_source(large, tmp_path):
    world = build_world(large["corpus"])
    # the target's training text is the default world's, sentence for sentence
    assert world["target"].equals(build_world(load("config.yaml")["corpus"])["target"])
    texts = [t for name in ("target", "target_named", "domain", "general") for t in world[name]["text"]]
    tokenizer = train_tokenizer(texts, tmp_path / "tokenizer", **(defaults("tokenizer") | large["tokenizer"]))
    samples = large["samples"]
    chosen = select_samples(world["samples"], tokenizer, samples["counts"], samples["lengths"], samples["seed"])
    assert set(chosen["length"]) == {"long"}
    for source in SOURCES:
        nonmembers = chosen[(chosen["role"] == "nonmember") & (chosen["source"] == source)]
        assert len(nonmembers) >= 10_000, source
        assert nonmembers["group_id"].nunique() >= 1_000, source
        # intervals resample patients: no patient holds more than a handful of samples
        assert nonmembers["group_id"].value_counts().max() <= 6, source


def test_the_large_run_plans_its_scoring_in_shards_of_every_model(large, tmp_path):
    snakemake = str(Path(sys.executable).parent / "snakemake")
    result = subprocess.run(
        [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", "table_large", "fig_large",
         "--configfile", str(REPO / "config" / "large.yaml")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1], flags=re.M))
    counts = large["samples"]["counts"]
    total = sum(n for by_source in counts.values() for n in by_source.values())
    shards = math.ceil(total / large["scoring"]["shard_size"])
    assert shards >= 3
    # base, ref_domain and the pool (LiRA offline, RMIA); ref_general only trains the pool
    scored = {"base", "ref_domain", *(f"pool_ref_{i}" for i in range(large["references"]["count"]))}
    jobs = re.findall(
        r"rule score_shard:\n(?:.*\n)*?\s+wildcards: dataset=clinical, model=(\S+), energy=masked, shard=(\d+)", out
    )
    assert sorted(jobs) == sorted((m, str(s)) for m in scored for s in range(shards))
    # the neighbourhood attack's texts: 3,650 samples (every member and held-in member, 1,500
    # non-members per source) x 25, scored by Base in 1 shard x 25 / 5 sets a job
    subsample = large["neighbours"]["subsample"]["nonmember"]
    audited = counts["member"]["mimic"] + counts["member_heldin"]["mimic"] + sum(subsample.values())
    assert audited == 3650
    per_job = large["scoring"]["neighbour_sets_per_job"]
    neighbour_shards = math.ceil(audited / large["scoring"]["shard_size"]) * math.ceil(25 / per_job)
    neighbour_jobs = re.findall(
        r"rule score_shard:\n(?:.*\n)*?\s+wildcards: dataset=clinical~neighbours, model=(\S+), energy=masked, shard=(\d+)",
        out,
    )
    assert sorted(neighbour_jobs) == [("base", str(s)) for s in range(neighbour_shards)] and neighbour_shards == 5
    assert int(stats["score_shard"]) == len(scored) * shards + neighbour_shards
    assert int(stats["train_model"]) == len(scored) + 1
    assert int(stats["make_neighbours"]) == 1
