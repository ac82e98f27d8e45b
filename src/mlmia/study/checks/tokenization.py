"""Whether two models' tokenizers split a text alike, from the config and the tokenizer files alone
(no torch, no tokenizer loaded): an attack that reads the reference pool's per-token evidence slot
by slot (`mlmia.study.audit`) needs references that tokenize each sample as the target does.

What the files say of a tokenizer (`Tokenization`): its vocabulary (token -> id, its added tokens
among them) and whether it lowercases the text (its normalisation). From ``tokenizer.json`` (the
model's vocabulary, the added tokens, the normalizer's lowercasing) or else ``vocab.txt`` (one token
a line, id = line; with ``added_tokens.json``); ``do_lower_case`` of ``tokenizer_config.json``
where given (the loaders apply it over the normalizer), else a bare ``vocab.txt`` lowercases (the
BERT WordPiece default of `mlmia.models.loading.load_tokenizer`). Each from a local directory (or a
``vocab.txt`` file), or from the local hub cache for a hub id (`mlmia.models.vocabulary_files`);
never from the network. Unknown (None) when the files are not there (a hub id not in the local
cache, a model the workflow has not trained yet) or are not of these kinds: nothing is refused
then, and an attack that reads the slots refuses a sample whose lists differ in length at attack
time (`mlmia.attacks.shared`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

# the one reader of a directory's or the hub cache's files (private there: the vocabulary check's)
from mlmia.models.vocabulary_files import tokenizer_file

_UNREADABLE = (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError)
#: the tokenizer.json normalizers that never lowercase
KEEPS_CASE = ("NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Strip", "Replace", "Prepend")


@dataclass(frozen=True)
class Tokenization:
    """What a tokenizer's files say of how it splits a text: its vocabulary (token -> id) and
    whether it lowercases (None: the files do not say)."""

    vocabulary: dict
    lowercase: bool | None


def _json(path: Path | None):
    """A JSON file's content, None when there is no such file."""
    return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None


def _lowercases(normalizer) -> bool | None:
    """Whether a tokenizer.json normalizer lowercases; None for one of a kind not known here."""
    if normalizer is None:
        return False
    kind = normalizer.get("type")
    if kind == "BertNormalizer":
        return bool(normalizer.get("lowercase", True))
    if kind == "Lowercase":
        return True
    if kind == "Sequence":
        parts = [_lowercases(part) for part in normalizer.get("normalizers") or []]
        return True if True in parts else (None if None in parts else False)
    return False if kind in KEEPS_CASE else None


def tokenization(spec: str | os.PathLike) -> Tokenization | None:
    """What the files of tokenizer `spec` (a directory, a ``vocab.txt`` file or a hub id) say of
    it, None when they are not there or not of the kinds read here (the module's docstring)."""
    spec = os.fspath(spec)
    path = Path(spec).expanduser()
    try:
        if path.is_file():  # a bare vocab.txt: the loader reads its folder's settings
            vocab_file, data = path, None
            settings = _json(path.parent / "tokenizer_config.json")
        else:
            vocab_file, data = None, _json(tokenizer_file(spec, "tokenizer.json"))
            settings = _json(tokenizer_file(spec, "tokenizer_config.json"))
        given = settings.get("do_lower_case") if isinstance(settings, dict) else None
        given = given if isinstance(given, bool) else None
        if data is not None:
            model = data.get("model") or {}
            vocab = model.get("vocab")
            vocabulary = dict(vocab) if isinstance(vocab, dict) else {item[0]: i for i, item in enumerate(vocab or [])}
            vocabulary |= {t["content"]: t["id"] for t in data.get("added_tokens") or []}
            lowercase = given if given is not None else _lowercases(data.get("normalizer"))
            return Tokenization(vocabulary, lowercase) if vocabulary else None
        vocab_file = vocab_file or tokenizer_file(spec, "vocab.txt")
        if vocab_file is None:
            return None
        lines = vocab_file.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocabulary = {token: i for i, token in enumerate(lines)}
        added = _json(vocab_file.parent / "added_tokens.json")
        vocabulary |= dict(added) if isinstance(added, dict) else {}
        return Tokenization(vocabulary, True if given is None else given) if vocabulary else None
    except _UNREADABLE:
        return None  # unreadable: loading it says what is wrong


def tokenizer_difference(one: str, other: str) -> str | None:
    """Why tokenizers `one` and `other` (as `tokenization` reads them) split some text otherwise,
    in words that quote no file's content; None when the same or when either is not known."""
    if one == other:
        return None
    a, b = tokenization(one), tokenization(other)
    if a is None or b is None:
        return None
    if a.vocabulary != b.vocabulary:
        return "their vocabularies differ"
    if None not in (a.lowercase, b.lowercase) and a.lowercase != b.lowercase:
        return "one lowercases the text, the other does not"
    return None


def pool_tokenizer(config: dict) -> str | None:
    """The tokenizer the workflow trains (and so scores) the reference pool with, where the config
    names one: that of `references.init` given by path (`Study.training_tokenizer`: the model it
    continues); None for a pool whose init the workflow trains, or with no init (the world's)."""
    init = (config.get("references") or {}).get("init")
    return (config.get("models") or {}).get(init, {}).get("path") if init else None


def scoring_tokenizer(config: dict, model: str) -> str | None:
    """The tokenizer a model of the config is scored with: `models.<model>.tokenizer`, else its
    `path` (its own; `Study.model_tokenizer`); None for a model the workflow trains."""
    spec = (config.get("models") or {}).get(model, {})
    return spec.get("tokenizer") or spec.get("path")
