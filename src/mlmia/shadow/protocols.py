"""The targets the shadow protocol runs on, as the workflow runs them (one set of rules,
rules/shadow.smk, for both; no Snakemake here): a masked language model queried by fill-in
(`shadow`, `mlmia.shadow.workflow`) and a translation model queried with a sentence pair's source
(`shadow_mt`, `mlmia.shadow.mt_workflow`). A protocol is named by its config section; each says how
its corpus is made (`corpus`), how Carol's split and the training texts are (`split`) and how one
model's per-sentence features are computed (`features`); the tables are the same for both (`tables`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.models.loading import load_mlm
from mlmia.models.seq2seq import load_translation_model
from mlmia.shadow import mt_workflow, workflow
from mlmia.shadow.features import fill_in_features
from mlmia.shadow.translation import translation_features
from mlmia.world.parallel import build_parallel_corpus
from mlmia.world.subcorpora import subcorpora


@dataclass(frozen=True)
class Protocol:
    """One target of the shadow protocol: `section` its config section; `corpus(tables, settings)`
    its corpus from the tables it reads (by name) and its settings; `split(corpus, settings)`
    gives (Carol's split, Bob's labelled pairs, training texts by model: "alice", "bob_<s>");
    `features(model_dir, split, pairs, who, settings, threads, device)` one model's per-sentence
    features (`mlmia.shadow.workflow.PROTOCOL_COLUMNS`) on the sentences it is queried on, on the
    torch device `device` (the job's resource, the scoring jobs': auto, cpu or cuda)."""

    section: str
    corpus: Callable[..., pd.DataFrame]
    split: Callable[..., tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]]
    features: Callable[..., pd.DataFrame]


def registers(tables: Mapping[str, pd.DataFrame], settings: Mapping) -> pd.DataFrame:
    """The masked language model's corpus: the world's registers (`world`, `domain`, `general`)
    and real Wikipedia prose (`wikipedia`), by subcorpus (`mlmia.world.subcorpora`)."""
    return subcorpora(tables["world"], tables["domain"], tables["general"], tables["wikipedia"])


def parallel_corpus(tables: Mapping[str, pd.DataFrame], settings: Mapping) -> pd.DataFrame:
    """The translation target's corpus, built from its settings alone (`corpus`: `shadow_mt.corpus`,
    `seed`: the world's; `mlmia.world.parallel`)."""
    return build_parallel_corpus(settings["corpus"], settings["seed"])


def fill_in_query_features(model_dir, split: pd.DataFrame, pairs: pd.DataFrame, who: str, settings: Mapping,
                           threads: int, device: str) -> pd.DataFrame:  # fmt: skip
    """A masked language model's fill-in features of the sentences it is queried on (`settings`:
    the masks' `seed`), on `device` with torch's own thread count."""
    samples = workflow.queried_samples(split, pairs, who)
    model, tokenizer = load_mlm(model_dir, device)
    return fill_in_features(model, tokenizer, samples, settings["seed"])


def translation_query_features(model_dir, split: pd.DataFrame, pairs: pd.DataFrame, who: str, settings: Mapping,
                               threads: int, device: str) -> pd.DataFrame:  # fmt: skip
    """A translation model's features of the pairs it is queried on (`settings`: none), on `device`
    with the job's `threads`."""
    import torch

    torch.set_num_threads(max(1, int(threads)))
    queried = mt_workflow.queried_pairs(split, pairs, who)
    model, tokenizer = load_translation_model(model_dir, device)
    return translation_features(model, tokenizer, queried)


#: the protocols by config section
PROTOCOLS = {
    "shadow": Protocol("shadow", registers, workflow.split_and_texts, fill_in_query_features),
    "shadow_mt": Protocol("shadow_mt", parallel_corpus, mt_workflow.split_and_pairs, translation_query_features),
}


def protocol(name: str) -> Protocol:
    """The protocol of config section `name`."""
    if name not in PROTOCOLS:
        raise UserError(f"shadow protocol: unknown target {name!r} (known: {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]


def tables(name: str, split: pd.DataFrame, pairs: pd.DataFrame, features: Mapping[str, pd.DataFrame],
           texts: Mapping[str, pd.DataFrame], settings: Mapping) -> dict:  # fmt: skip
    """Tables 2-6, Figure 7's numbers and the findings of protocol `name` (`mlmia.shadow.workflow.tables`;
    `settings` its config section); `texts` each model's training texts (or pairs)."""
    protocol(name)  # an unknown name is refused
    return workflow.tables(split, pairs, features, settings, texts)
