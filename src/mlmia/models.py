"""Loading masked language models (local directory or hub id) and their parts."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

import torch

from mlmia.errors import UserError
from mlmia.logs import get_logger

log = get_logger("models")

# "name" or "org/name", as the hub spells repository ids.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
# Known attribute names of the LM head on top of `model.base_model`.
_HEAD_NAMES = ("cls", "lm_head", "predictions")
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


def _looks_like_path(name: str) -> bool:
    if name.startswith(("/", ".", "~")) or "\\" in name or name.endswith("/"):
        return True
    if os.sep in name and name.count(os.sep) > 1:
        return True
    return not _HUB_ID.match(name) or ".." in name or "--" in name


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
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - a malformed id is simply not cached
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_mlm(path_or_id: str | os.PathLike, device: str | torch.device | None = "auto"):
    """Load (model, tokenizer) with AutoModelForMaskedLM + AutoTokenizer, in eval mode on `device`.

    A local directory is loaded without any network access. A name that looks like a
    path but does not exist fails at once. A hub id is looked up in the local cache
    first; the hub itself is tried only when it is reachable and HF_HUB_OFFLINE is unset,
    so an unknown name never hangs on network retries. Failures raise a one-line UserError
    naming the model. Weights are kept in fp32 (autocast does the GPU's reduced precision).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    name = os.fspath(path_or_id)
    dev = resolve_device(device)
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(f"model {name}: not a directory (expected a saved model directory or a hub id)")
        if not (path / "config.json").is_file():
            raise UserError(f"model {name}: no config.json in this directory (not a saved model)")
        source, is_local = str(path), True
    elif _looks_like_path(name):
        raise UserError(f"model {name}: no such directory")
    else:
        source, is_local = name, False

    def _load(local_files_only: bool):
        verbosity = hf_logging.get_verbosity()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            tok = AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
            mdl, info = AutoModelForMaskedLM.from_pretrained(
                source, local_files_only=local_files_only, dtype=torch.float32, output_loading_info=True
            )
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()
        _check_loading_info(name, info)
        return mdl, tok

    try:
        model, tokenizer = _load(True)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot load"
        if is_local or _in_hub_cache(name):
            raise UserError(f"model {name}: cannot load as a masked language model: {_first_line(exc)}") from exc
        if _offline():
            raise UserError(f"model {name}: not a local directory and not in the Hugging Face cache (offline mode)") from exc
        if not _hub_reachable():
            raise UserError(
                f"model {name}: not a local directory, not in the Hugging Face cache, and the hub is unreachable"
            ) from exc
        try:
            model, tokenizer = _load(False)
        except UserError:
            raise
        except Exception as exc2:  # noqa: BLE001
            raise UserError(f"model {name}: cannot load from the hub: {_first_line(exc2)}") from exc2
    model.eval()
    model.to(dev)
    log.info("loaded model %s (%s, %.2fM parameters) on %s", name, type(model).__name__, sum(p.numel() for p in model.parameters()) / 1e6, dev)
    return model, tokenizer


def _check_loading_info(name: str, info: dict) -> None:
    """A checkpoint without trained LM-head weights gives meaningless energies: refuse it."""
    missing = sorted(info.get("missing_keys") or [])
    head_missing = [k for k in missing if k.split(".", 1)[0] in _HEAD_NAMES + ("generator_lm_head", "vocab_projector")]
    if head_missing:
        raise UserError(
            f"model {name}: the checkpoint has no trained masked-LM head ({len(head_missing)} weights missing, "
            f"e.g. {head_missing[0]}); an encoder alone cannot be scored"
        )
    if missing:
        log.warning("model %s: %d weights missing from the checkpoint and randomly initialised, e.g. %s", name, len(missing), missing[0])


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

    Known heads: `model.cls` (BERT), `model.lm_head` (RoBERTa-like), `model.predictions`
    (ALBERT). The split is checked once on a short input against the full forward and
    cached on the model; None (use full logits) when it does not hold.
    """
    cached = getattr(model, "_mlmia_parts", "unset")
    if cached != "unset":
        return cached
    parts = None
    encoder = getattr(model, "base_model", None)
    if encoder is not None and encoder is not model:
        for attr in _HEAD_NAMES:
            head = getattr(model, attr, None)
            if isinstance(head, torch.nn.Module):
                if _check_parts(model, encoder, head):
                    parts = (encoder, head)
                break
    try:
        model._mlmia_parts = parts
    except Exception:  # pragma: no cover - exotic modules refusing attributes
        pass
    return parts


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
