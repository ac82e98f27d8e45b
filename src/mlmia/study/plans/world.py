"""The embedded world (config `corpus`, rules/corpus.smk; `snakemake world`): its patients, notes
and registers, the training corpora, the world's tokenizer and its two scored sample sets; beside
them the DP targets' private text and the shadow protocol's out-of-domain register (real Wikipedia
prose), which only those studies read."""

from __future__ import annotations

from mlmia.study.plans.base import Plan, Registration
from mlmia.terms.layout import CORPORA, DP_PRIVATE_TEXT, TOKENIZER, WIKIPEDIA_REGISTER, WORLD, WORLD_SETS, samples

RULES = "rules/corpus.smk"


def world_plan(study) -> Plan:
    """The embedded world's plan: what its rules write and the settings they pass (the config's
    `corpus`, `dp_corpus`, `samples` and `tokenizer`)."""
    config = study.config
    plain, named = WORLD_SETS
    outputs = {
        "corpora": {**{name: study.corpus_table(name) for name in CORPORA}, "samples": study.path(WORLD)},
        "samples": {"plain": study.path(samples(plain)), "named": study.path(samples(named))},
        "tokenizer": {"tokenizer": study.path(TOKENIZER)},
    }
    tokenizer = config["tokenizer"]
    # with tokenizer.min_patients, the samples' length buckets are counted by the tokenizer learnt without it
    # (built again in memory from the corpora), so that the remedy leaves the scored sentences as they were
    filtered = tokenizer["min_patients"] is not None
    return Plan(
        target="world",
        targets=[path for step in outputs.values() for path in step.values()],
        outputs=outputs,
        files={
            "dp_private_text": study.path(DP_PRIVATE_TEXT),
            "wikipedia": study.path(WIKIPEDIA_REGISTER),
            "length_corpora": list(outputs["corpora"][name] for name in CORPORA) if filtered else [],
        },
        settings={
            "corpus": config["corpus"],
            "dp_corpus": config["dp_corpus"],
            "samples": config["samples"],
            "tokenizer": tokenizer,
            "length_tokenizer": {key: tokenizer[key] for key in ("vocab_size", "min_frequency")} if filtered else None,
            # the Wikipedia register's draw: the world's seed
            "seed": config["corpus"]["seed"],
        },
        rules=(RULES,),
    )


REGISTRATION = Registration("world", lambda study: "corpus" in study.config, world_plan)
