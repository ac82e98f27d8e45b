"""The embedded world's registers as the subcorpora of the shadow-model protocol (Hisamoto et
al. 2020): sentences with their patient (or document) and the register they are written in,
and the registers outside the clinical world (`mlmia.world.registers.wikipedia`: Wikipedia articles).

`register_documents` tells how large each register is from the `corpus:` settings alone (the
world's counts are a function of them), so that a study's sizes are checked before the world
is built (tests/test_config_checks.py compares them with a built world)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from mlmia.world.corpus import corpus_settings, medical_sentences, news_picks, world_patients
from mlmia.world.lexicon import general_sentences
from mlmia.world.patients import most_sentences

#: register of a corpus table row, by the prefix of its group id (mlmia.world.corpus)
REGISTERS = {"mimic": "mimic", "i2b2": "i2b2", "domain": "case_reports", "abstract": "abstracts",
             "general": "news", "encyclopedic": "encyclopedic", "wikipedia": "wikipedia"}  # fmt: skip
SUBCORPUS_COLUMNS = ["sample_id", "group_id", "text", "subcorpus"]
#: sentences per group of the abstract and news prose (mlmia.world.corpus: group i // 10)
PROSE_GROUP = 10


@dataclass(frozen=True)
class Documents:
    """How much text a subcorpus holds, as its settings determine it (nothing built): `count`
    documents, each of at most `most` sentences; `exact`: the corpus has exactly `count`
    documents (else at most `count`)."""

    count: int
    most: int
    exact: bool = True


def register_documents(corpus: dict) -> dict[str, Documents | None]:
    """{register: its size} of the world the `corpus:` settings build (`mlmia.world.corpus`);
    None for the Wikipedia register, whose size only reading gensim's dump would tell. A
    sentence that repeats another is dropped from the world, so a document may hold fewer
    sentences; a document loses all of them in no world shipped (the test builds one)."""
    cfg = corpus_settings(corpus)
    n = int(cfg["sentences_per_patient"])
    patients = world_patients(cfg)
    by_source = {
        source: sum(count for (_, s), count in patients.items() if s == source) for source in ("mimic", "i2b2")
    }
    abstracts = int(cfg["domain"]["abstract_sentences"])
    news = pd.Series(news_picks(cfg, len(general_sentences()))) // PROSE_GROUP
    medical = medical_sentences(cfg)
    return {
        "mimic": Documents(by_source["mimic"], most_sentences(n)),
        "i2b2": Documents(by_source["i2b2"], most_sentences(n)),
        "case_reports": Documents(int(cfg["domain"]["patients"]), most_sentences(n)),
        "abstracts": Documents(math.ceil(abstracts / PROSE_GROUP), min(abstracts, PROSE_GROUP)),
        "news": Documents(int(news.nunique()), int(news.value_counts().max()) if len(news) else 0),
        # abstract sentences by tens and patients of at most sentences_per_patient, drawn at random
        "encyclopedic": Documents(medical, max(n, PROSE_GROUP) if medical else 0, exact=False),
        "wikipedia": None,
    }


def subcorpora(world: pd.DataFrame, *tables: pd.DataFrame) -> pd.DataFrame:
    """Every sentence of the world's plain samples and of the other corpus tables (domain,
    general, the Wikipedia register), each with its register: MIMIC and i2b2 notes, case reports,
    abstracts, news, encyclopedic prose in the case-report register (near-domain) and Wikipedia
    articles. A sentence that two tables share is kept once."""
    plain = world[world["variant"] == "plain"][["sample_id", "group_id", "text"]]
    rows = pd.concat([plain, *(t[["sample_id", "group_id", "text"]] for t in tables)], ignore_index=True)
    rows = rows.drop_duplicates("sample_id").reset_index(drop=True)
    prefix = rows["group_id"].astype(str).str.split("-").str[0]
    rows["subcorpus"] = prefix.map(REGISTERS)
    return rows[rows["subcorpus"].notna()][SUBCORPUS_COLUMNS].reset_index(drop=True)
