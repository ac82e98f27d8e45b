"""Loading masked language models (local directory or hub id) and their parts."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

import torch

from mlmia.core.errors import UserError, first_line
from mlmia.core.logs import get_logger
from mlmia.models.hub import looks_like_path as _looks_like_path
from mlmia.models.hub import quiet_transformers
from mlmia.models.legacy_bert import LEGACY_CONFIG, LEGACY_VOCAB, load_legacy_bert, wordpiece_tokenizer
from mlmia.models.vocabulary_files import mismatch_kind

log = get_logger(__name__)

# How each known architecture's LM head maps the encoder's hidden states to logits, for
# `mlm_parts`: the attribute names of the modules it applies in turn (BERT `cls`, RoBERTa-like
# `lm_head`, ALBERT `predictions`, DistilBERT, ELECTRA's generator, ModernBERT), or "deberta-v3"
# (its head also reads the word embeddings). The first whose modules the model has is used; the
# split is checked against the full forward before use. (The missing-head check reads the head
# from the model itself, see `_check_loading_info`.)
_HEADS = (
    ("cls",),
    ("lm_head",),
    ("predictions",),
    ("vocab_transform", "activation", "vocab_layer_norm", "vocab_projector"),
    ("generator_predictions", "generator_lm_head"),
    ("head", "decoder"),
    "deberta-v3",
)
# Above this, `tokenizer.model_max_length` is the "no limit" sentinel.
_NO_LIMIT = 1_000_000


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """'auto' -> cuda when available, else cpu. Asking for cuda without one is a UserError."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for, but no CUDA device is available")
    return dev


def _hub_reachable(timeout: float = 3.0) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _in_hub_cache(name: str, filenames: tuple[str, ...] = ("config.json",)) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return any(isinstance(try_to_load_from_cache(name, f), str) for f in filenames)
    except Exception:  # noqa: BLE001 - a malformed id is simply not cached
        return False


def _fetch(what: str, name: str, is_local: bool, load, cache_files: tuple[str, ...]):
    """`load(local_files_only)`: locally first, then the hub only when it can answer.

    `what` ("model" or "tokenizer") starts every error line, which names `name`.
    """
    try:
        return load(True)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot load"
        if is_local or _in_hub_cache(name, cache_files):
            detail = "cannot load as a masked language model" if what == "model" else "cannot load the tokenizer"
            raise UserError(f"{what} {name}: {detail}: {first_line(exc)}") from exc
        if _offline():
            raise UserError(
                f"{what} {name}: not a local directory and not in the Hugging Face cache (offline mode)"
            ) from exc
        if not _hub_reachable():
            raise UserError(
                f"{what} {name}: not a local directory, not in the Hugging Face cache, and the hub is unreachable"
            ) from exc
        try:
            return load(False)
        except UserError:
            raise
        except Exception as exc2:  # noqa: BLE001
            raise UserError(f"{what} {name}: cannot load from the hub: {first_line(exc2)}") from exc2


def load_mlm(
    path_or_id: str | os.PathLike,
    device: str | torch.device | None = "auto",
    *,
    tokenizer: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
):
    """Load (model, tokenizer) in eval mode on `device`; the model's vocabulary must match the tokenizer's.

    `path_or_id`: a saved model directory (`save_pretrained`: AutoModelForMaskedLM of any
    architecture; one without its trained LM head is refused, see `_check_loading_info`),
    an old pytorch_pretrained_bert directory (`bert_config.json` + `pytorch_model.bin` with
    LayerNorm gamma/beta, e.g. the ClinicalBERT checkpoints of Lehman et al.; converted in
    memory, see `convert_checkpoint`), or a hub id.
    `tokenizer`: the scoring tokenizer when it is not the checkpoint's own: a saved
    tokenizer directory, a directory holding only `vocab.txt`, a `vocab.txt` file, or a hub
    id. Without it the checkpoint's own tokenizer is used (for an old directory: its
    `vocab.txt`). Either way every id of the tokenizer must have a row in the model's
    input embeddings (more rows, a padded matrix, is fine; see `check_vocabulary`).
    `do_lower_case`: for tokenizers built from a bare `vocab.txt` only; None means the
    directory's tokenizer_config.json setting if there is one, else True (uncased BERT).

    A local directory is loaded without any network access. A name that looks like a
    path but does not exist fails at once. A hub id is looked up in the local cache
    first; the hub itself is tried only when it is reachable and HF_HUB_OFFLINE is unset,
    so an unknown name never hangs on network retries. Failures raise a one-line UserError
    naming the model. Weights are kept in fp32 (autocast does the GPU's reduced precision).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    name = os.fspath(path_or_id)
    dev = resolve_device(device)
    path = Path(name).expanduser()
    legacy = False
    if path.exists():
        if not path.is_dir():
            raise UserError(f"model {name}: not a directory (expected a saved model directory or a hub id)")
        if not (path / "config.json").is_file():
            if not (path / LEGACY_CONFIG).is_file():
                raise UserError(
                    f"model {name}: no config.json (nor {LEGACY_CONFIG}) in this directory (not a saved model)"
                )
            legacy = True
        source, is_local = str(path), True
    elif _looks_like_path(name):
        raise UserError(f"model {name}: no such directory")
    else:
        source, is_local = name, False

    own_tokenizer = tokenizer is None
    if not own_tokenizer:  # before the (large) model: a wrong tokenizer fails fast
        tok, tok_name = load_tokenizer(tokenizer, do_lower_case=do_lower_case), os.fspath(tokenizer)
    if legacy:
        model, own = load_legacy_bert(path, name, with_tokenizer=own_tokenizer, do_lower_case=do_lower_case)
        if own_tokenizer:
            tok, tok_name = own, str(path / LEGACY_VOCAB)
    else:

        def _load(local_files_only: bool):
            with quiet_transformers():
                tok = (
                    AutoTokenizer.from_pretrained(source, local_files_only=local_files_only) if own_tokenizer else None
                )
                mdl, info = AutoModelForMaskedLM.from_pretrained(
                    source, local_files_only=local_files_only, dtype=torch.float32, output_loading_info=True
                )
            _check_loading_info(name, info, mdl)
            return mdl, tok

        model, own = _fetch("model", name, is_local, _load, ("config.json",))
        if own_tokenizer:
            tok, tok_name = own, name
    check_vocabulary(model, tok, name, tok_name)
    model.eval()
    model.to(dev)
    log.info(
        "loaded model %s (%s, %.2fM parameters) on %s",
        name,
        type(model).__name__,
        sum(p.numel() for p in model.parameters()) / 1e6,
        dev,
    )
    return model, tok


def model_vocab_size(model) -> int:
    """Rows of the model's input embedding matrix (config.vocab_size when it has none)."""
    try:
        emb = model.get_input_embeddings()
        return int(emb.weight.shape[0])
    except (AttributeError, NotImplementedError):
        return int(getattr(model.config, "vocab_size", 0) or 0)


def check_vocabulary(model, tokenizer, model_name: str, tokenizer_name: str) -> None:
    """UserError when the tokenizer can produce an id the model has no embedding row for.

    More rows than tokens is normal: released checkpoints pad their embedding matrix for
    speed (DeBERTa-v3 128,100 rows for 128,001 tokens, NVIDIA's BERT 30,528 for 30,522,
    ModernBERT 50,368 for 50,280). The extra rows are never fed to the model; the softmax
    still runs over them, which is the distribution the model defines, so it is scored as
    it is. An id at or beyond the last row would index past the matrix or into another
    vocabulary's rows (e.g. a cased 28,996-token checkpoint scored with the uncased
    30,522-token tokenizer): the energies would be meaningless. More rows than padding explains
    (over `vocabulary_files.PADDING_ROWS`) is refused too: a tokenizer of a few tokens (a stale or wrong cache
    entry) would score and count every word as [UNK]. The config check applies the same rule
    to the files before any job (`mlmia.models.vocabulary_files`).
    """
    rows, size = model_vocab_size(model), len(tokenizer)
    top = largest_token_id(tokenizer)
    kind = mismatch_kind(rows, top)
    if kind == "beyond":
        raise UserError(
            f"model {model_name}: its vocabulary has {rows} tokens but the tokenizer {tokenizer_name} has {size} "
            f"(ids up to {top}); score with the tokenizer the model was trained with"
        )
    unused = rows - top - 1
    if kind == "fewer":
        raise UserError(
            f"model {model_name}: its vocabulary has {rows} rows but the tokenizer {tokenizer_name} has {size} tokens "
            f"(ids up to {top}), {unused} fewer, more than padding explains: it is not the model's own tokenizer; "
            "score with the tokenizer the model was trained with"
        )
    if unused:
        log.info("model %s: %d embedding rows for %d tokens (a padded embedding matrix)", model_name, rows, size)


def largest_token_id(tokenizer) -> int:
    """The largest id the tokenizer can produce: its vocabulary, added and special tokens included."""
    ids = [len(tokenizer) - 1]
    with contextlib.suppress(NotImplementedError, AttributeError, TypeError):
        vocab = tokenizer.get_vocab()
        if vocab:
            ids.append(max(vocab.values()))
    ids.extend(i for i in tokenizer.all_special_ids if isinstance(i, int))
    return int(max(ids))


def load_tokenizer(spec: str | os.PathLike, *, do_lower_case: bool | None = None):
    """A tokenizer from a saved tokenizer directory, a directory or file `vocab.txt` (BERT WordPiece), or a hub id."""
    from transformers import AutoTokenizer

    name = os.fspath(spec)
    path = Path(name).expanduser()
    if path.is_file():
        return wordpiece_tokenizer(path, name, do_lower_case, None)
    if path.is_dir():
        saved = (path / "tokenizer.json").is_file() or _names_tokenizer_class(path / "tokenizer_config.json")
        if not saved and (path / LEGACY_VOCAB).is_file():
            return wordpiece_tokenizer(path / LEGACY_VOCAB, name, do_lower_case, None)
        if not saved:
            raise UserError(
                f"tokenizer {name}: no tokenizer.json, tokenizer_config.json or {LEGACY_VOCAB} in this directory"
            )
        source, is_local = str(path), True
    elif _looks_like_path(name):
        raise UserError(f"tokenizer {name}: no such file or directory")
    else:
        source, is_local = name, False

    def _load(local_files_only: bool):
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)

    return _fetch("tokenizer", name, is_local, _load, ("tokenizer_config.json", "tokenizer.json", "config.json"))


def _names_tokenizer_class(settings: Path) -> bool:
    """A tokenizer_config.json that AutoTokenizer can use (old ones hold only do_lower_case, max_len)."""
    import json

    try:
        return "tokenizer_class" in json.loads(settings.read_text())
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return settings.is_file()  # unreadable: let AutoTokenizer say what is wrong


def convert_checkpoint(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    tokenizer: str | os.PathLike | None = None,
    do_lower_case: bool | None = None,
) -> Path:
    """Save `src` (any model `load_mlm` reads, e.g. an old bert_config.json directory) as a
    current `save_pretrained` directory `dst` (model + tokenizer), written atomically.

    `tokenizer`/`do_lower_case` as in `load_mlm`; the vocabulary check applies. `dst` must
    not exist or be an empty directory. Returns `dst`.
    """
    import shutil
    import tempfile

    out = Path(dst).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{dst}: already exists and is not an empty directory; convert into a new directory")
    model, tok = load_mlm(src, "cpu", tokenizer=tokenizer, do_lower_case=do_lower_case)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with quiet_transformers():
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s -> %s (%s, vocabulary %d)", os.fspath(src), out, type(model).__name__, len(tok))
    return out


def _check_loading_info(name: str, info: dict, model) -> None:
    """A checkpoint without its trained LM-head weights gives meaningless energies: refuse it.

    Which weights are the head is read from the model itself, for any architecture: every
    parameter outside its base model (`model.base_model`: BERT's `cls.*`, RoBERTa's
    `lm_head.*`, ModernBERT's `head.*` and `decoder.*`, DeBERTa-v3's `lm_predictions.*`, ...)
    and every parameter of its output embeddings. A parameter counts as missing only when
    every name it goes by is missing: a decoder weight tied to the input embeddings is
    loaded with them. Other missing weights (inside the encoder) are logged.
    """
    missing_names = set(info.get("missing_keys") or [])
    if not missing_names:
        return
    names_of: dict[int, list[str]] = {}
    for pname, param in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(param), []).append(pname)
    head = _head_parameter_ids(model)
    head_missing, other_missing = [], []
    for pid, names in names_of.items():
        if all(n in missing_names for n in names):
            (head_missing if pid in head else other_missing).extend(names)
    # a name the model has no parameter for (a buffer, say) is outside the head
    known = {n for names in names_of.values() for n in names}
    other_missing.extend(n for n in missing_names if n not in known)
    if head_missing:
        base = _base_prefix(model)
        shown = sorted(head_missing, key=lambda n: (bool(base) and n.startswith(base), n))[0]
        raise UserError(
            f"model {name}: the checkpoint has no trained masked-LM head ({len(head_missing)} weights missing, "
            f"e.g. {shown}); an encoder alone cannot be scored"
        )
    if other_missing:
        log.warning(
            "model %s: %d weights missing from the checkpoint and randomly initialised, e.g. %s",
            name,
            len(other_missing),
            sorted(other_missing)[0],
        )


def _base_prefix(model) -> str:
    """'bert.' for BertForMaskedLM: the parameter-name prefix of its base model ('' when it has none apart)."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    base = getattr(model, "base_model", model)
    if not prefix or base is model or not isinstance(getattr(model, prefix, None), torch.nn.Module):
        return ""
    return prefix + "."


def _head_parameter_ids(model) -> set[int]:
    """ids of the parameters that turn the encoder's output into logits (see `_check_loading_info`)."""
    base = _base_prefix(model)
    head = {id(p) for pname, p in model.named_parameters(remove_duplicate=False) if base and not pname.startswith(base)}
    with contextlib.suppress(AttributeError, NotImplementedError):
        output = model.get_output_embeddings()
        if isinstance(output, torch.nn.Module):
            head.update(id(p) for p in output.parameters())
    return head


def max_sequence_length(model, tokenizer) -> int:
    """Longest input (special tokens included) that both the tokenizer and the model accept."""
    limits = []
    tml = getattr(tokenizer, "model_max_length", None)
    if isinstance(tml, int) and 0 < tml < _NO_LIMIT:
        limits.append(tml)
    cfg = getattr(model, "config", None)
    mpe = getattr(cfg, "max_position_embeddings", None)
    if isinstance(mpe, int) and mpe > 0:
        offset = 0
        embeddings = getattr(getattr(model, "base_model", None), "embeddings", None)
        padding_idx = getattr(embeddings, "padding_idx", None)
        # RoBERTa-like models number positions from padding_idx + 1.
        if isinstance(padding_idx, int) and getattr(cfg, "position_embedding_type", "absolute") == "absolute":
            offset = padding_idx + 1
        limits.append(mpe - offset)
    return min(limits) if limits else 512


def mlm_parts(model):
    """(encoder, head) such that head(encoder(ids).last_hidden_state) == model(ids).logits, or None.

    Known heads: `_HEADS` (BERT, RoBERTa-like, ALBERT, DistilBERT, ELECTRA's generator,
    ModernBERT, DeBERTa-v3). The split is checked once on a short input against the full
    forward and cached on the model; None (use full logits) when it does not hold.
    """
    cached = getattr(model, "_mlmia_parts", "unset")
    if cached != "unset":
        return cached
    parts = None
    encoder = getattr(model, "base_model", None)
    head = _known_head(model) if encoder is not None and encoder is not model else None
    if head is not None and _check_parts(model, encoder, head):
        parts = (encoder, head)
    try:
        model._mlmia_parts = parts
    except Exception:  # pragma: no cover - exotic modules refusing attributes
        pass
    return parts


def _known_head(model):
    """The LM head of `model` as one callable on hidden states, from `_HEADS`, or None."""
    for names in _HEADS:
        if names == "deberta-v3":
            predictions = getattr(model, "lm_predictions", None)
            embeddings = getattr(getattr(model.base_model, "embeddings", None), "word_embeddings", None)
            if isinstance(predictions, torch.nn.Module) and isinstance(embeddings, torch.nn.Module):
                return lambda hidden: predictions(hidden, embeddings)
            continue
        modules = [getattr(model, name, None) for name in names]
        if all(isinstance(m, torch.nn.Module) for m in modules):
            return modules[0] if len(modules) == 1 else torch.nn.Sequential(*modules)
    return None


def _check_parts(model, encoder, head) -> bool:
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab < 8:
        return False
    dev = next(model.parameters()).device
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (2, 7), generator=gen).to(dev)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            full = model(input_ids=ids, attention_mask=mask).logits.float()
            hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            split = head(hidden[mask.bool()]).float()
        ok = split.shape == full[mask.bool()].shape and torch.allclose(split, full[mask.bool()], atol=1e-4, rtol=1e-4)
    except Exception:  # noqa: BLE001 - any failure means "use the full forward"
        ok = False
    finally:
        model.train(was_training)
    if not ok:
        log.info("%s: LM head not recognised; scoring with full logits (slower)", type(model).__name__)
    return ok
