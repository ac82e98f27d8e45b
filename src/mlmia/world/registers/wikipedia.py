"""Registers outside the clinical world, for the shadow study's out-of-domain probes (Hisamoto,
Post and Duh, TACL 2020, Table 4: probes from domains Alice never trained on).

The world's `encyclopedic` prose is generated in the case-report register Alice trains on (it feeds
the general reference, `mlmia.world.corpus`): near-domain, not out-of-domain. `wikipedia` is real
encyclopedic prose about history, geography, politics and science: the English Wikipedia articles
shipped with gensim's test data (`enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`,
about a hundred articles), the markup stripped by `gensim.corpora.wikicorpus.filter_wiki`.

Each article is a document (`group_id`); its prose sentences of `MIN_WORDS` to `MAX_WORDS` words
(at most `MAX_CHARS` characters, so that a sentence fits a model of 128 positions even when its
words split into several word pieces) that hold no markup left over are candidates, and at most
`per_article` of them, drawn by a random stream of their own (`wikipedia:<seed>`) and kept in
article order, become the register's sentences. No other draw of the world reads that stream and
the table is written by a rule of its own, so no table of the world changes with it.
"""

from __future__ import annotations

import bz2
import functools
import random
import re

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.world.lexicon import package_dir

WIKIPEDIA_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
WIKIPEDIA_PREFIX = "wikipedia"
MIN_WORDS, MAX_WORDS, MAX_CHARS = 8, 25, 160
PER_ARTICLE = 12
#: a sentence holding one of these is markup left over, not prose
_MARKUP = re.compile(r"[|{}\[\]<>=_\\*#]|https?:|&\w+;|\bthumb\b")
_SENTENCE_END = re.compile(r'(?<=[.!?])\s+(?=[A-Z"])')


def _prose_sentences(wikitext: str) -> list[str]:
    """The prose sentences of one article: markup stripped, headings, lists and tables dropped."""
    from gensim.corpora.wikicorpus import filter_wiki

    text = filter_wiki(wikitext).replace("'''", "").replace("''", "")
    out = []
    for paragraph in text.split("\n"):
        paragraph = " ".join(paragraph.split())
        if not paragraph or paragraph[0] in "=*#:;|!{":
            continue
        for sentence in _SENTENCE_END.split(paragraph):
            words = sentence.split()
            if (
                MIN_WORDS <= len(words) <= MAX_WORDS
                and len(sentence) <= MAX_CHARS
                and sentence[0].isupper()
                and sentence.endswith(".")
                and not _MARKUP.search(sentence)
                and sentence.count("(") == sentence.count(")")
            ):
                out.append(sentence)
    return out


def wikipedia_register(seed: int, per_article: int = PER_ARTICLE) -> pd.DataFrame:
    """The `wikipedia` register: `sample_id` ("wikipedia-<article:04d>-<j:03d>"), `group_id`
    ("wikipedia-<article:04d>", articles numbered in dump order, redirects skipped) and `text`;
    at most `per_article` sentences per article (see the module docstring)."""
    if int(per_article) < 1:
        raise UserError(f"wikipedia register: per_article must be >= 1, got {per_article}")
    rng = random.Random(f"wikipedia:{int(seed)}")
    rows = []
    for a, sentences in enumerate(_article_sentences()):
        chosen = sorted(rng.sample(range(len(sentences)), min(int(per_article), len(sentences))))
        group = f"{WIKIPEDIA_PREFIX}-{a:04d}"
        rows += [
            {"sample_id": f"{group}-{j:03d}", "group_id": group, "text": sentences[i]} for j, i in enumerate(chosen)
        ]
    return pd.DataFrame(rows, columns=["sample_id", "group_id", "text"])


@functools.lru_cache(maxsize=1)
def _article_sentences() -> tuple[tuple[str, ...], ...]:
    """Each article's distinct prose sentences, in dump order (redirects skipped; cached)."""
    from gensim.corpora.wikicorpus import extract_pages

    path = package_dir("gensim") / "test" / "test_data" / WIKIPEDIA_DUMP
    if not path.exists():
        raise UserError(f"{path}: not found (the Wikipedia register comes with gensim's test data)")
    with bz2.open(path) as handle:
        articles = [text for _, text, _ in extract_pages(handle) if not text.lstrip().lower().startswith("#redirect")]
    return tuple(tuple(dict.fromkeys(_prose_sentences(text))) for text in articles)
