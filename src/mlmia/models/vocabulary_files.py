"""A checkpoint's vocabulary against its tokenizer's, read from their files alone (no torch, no
model built): the workflow asks this while it reads the config, so that a tokenizer that is not
the checkpoint's own is refused before any job (`mlmia.models.loading.check_vocabulary` applies
the same rule to the loaded model).

A checkpoint's rows: ``vocab_size`` of its ``config.json`` (or the old layout's
``bert_config.json``). A tokenizer's largest id: ``tokenizer.json`` (its model's vocabulary and
added tokens), else ``vocab.txt`` (one token a line). Each from a local directory (or a
``vocab.txt`` file), or from the local hub cache for a hub id; never from the network. Unknown
(None) when the files are not there yet (a model the workflow trains) or are not of these kinds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mlmia.core.errors import UserError
from mlmia.models.hub import looks_like_hub_id

#: embedding rows beyond the tokenizer's ids that padding to a multiple (64, 128) explains
PADDING_ROWS = 128
CONFIGS = ("config.json", "bert_config.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


def tokenizer_file(spec: str, filename: str) -> Path | None:
    """`filename` of a local directory, or of a hub id's snapshot in the local cache."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path / filename if (path / filename).is_file() else None
    if path.exists() or not looks_like_hub_id(spec):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(spec, filename)
    except Exception:  # noqa: BLE001 - a malformed id is simply not cached
        return None
    return Path(found) if isinstance(found, str) else None


def checkpoint_rows(spec: str | os.PathLike) -> int | None:
    """The rows of a checkpoint's input embeddings (`vocab_size`), None when not known."""
    for name in CONFIGS:
        found = tokenizer_file(os.fspath(spec), name)
        if found is None:
            continue
        try:
            size = json.loads(found.read_text()).get("vocab_size")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            return None  # unreadable: loading it says what is wrong
        return int(size) if isinstance(size, int) and not isinstance(size, bool) else None
    return None


def tokenizer_top_id(spec: str | os.PathLike) -> int | None:
    """The largest id a tokenizer (directory, ``vocab.txt`` file or hub id) can produce, None
    when not known from its files."""
    spec = os.fspath(spec)
    path = Path(spec).expanduser()
    vocab_file = path if path.is_file() else None
    found = None if vocab_file else tokenizer_file(spec, "tokenizer.json")
    try:
        if found is not None:
            data = json.loads(found.read_text())
            vocab = (data.get("model") or {}).get("vocab")
            ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab or [])))
            ids += [t["id"] for t in data.get("added_tokens") or [] if isinstance(t.get("id"), int)]
            return max(ids) if ids else None
        vocab_file = vocab_file or tokenizer_file(spec, "vocab.txt")
        if vocab_file is None:
            return None
        with vocab_file.open(encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        return lines - 1 if lines else None
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError):
        return None  # unreadable: loading it says what is wrong


def mismatch_kind(rows: int, top: int) -> str | None:
    """The one rule for the config check and the loaded model (`loading.check_vocabulary`):
    "beyond" when the tokenizer's largest id `top` has no row among `rows` embedding rows,
    "fewer" when more rows are left over than padding explains (`PADDING_ROWS`), else None."""
    if top >= rows:
        return "beyond"
    return "fewer" if rows - top - 1 > PADDING_ROWS else None


def vocabulary_mismatch(rows: int, top: int, tokenizer: str, checkpoint: str) -> str | None:
    """Why a tokenizer whose largest id is `top` is not the own of a checkpoint with `rows`
    embedding rows, or None when it may be (`mismatch_kind`)."""
    kind = mismatch_kind(rows, top)
    if kind == "beyond":
        return (
            f"the tokenizer {tokenizer} has ids up to {top} but the checkpoint {checkpoint} has {rows} vocabulary "
            "rows; use the tokenizer the model was trained with"
        )
    if kind == "fewer":
        return (
            f"the tokenizer {tokenizer} has {top + 1} tokens but the checkpoint {checkpoint} has {rows} vocabulary "
            f"rows, more than padding explains: it is not the checkpoint's own tokenizer"
        )
    return None


def check_checkpoint_files(key: str, checkpoint: str, tokenizer: str) -> None:
    """UserError naming `key` when the files show `tokenizer` is not `checkpoint`'s own; silent
    when either is not known from its files."""
    rows, top = checkpoint_rows(checkpoint), tokenizer_top_id(tokenizer)
    if rows is None or top is None:
        return
    reason = vocabulary_mismatch(rows, top, tokenizer, checkpoint)
    if reason:
        raise UserError(f"config key {key}: {reason}")
