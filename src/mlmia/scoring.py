"""Energies of samples under a masked language model (paper Eq. 2 and the normalized variant).

Masked energy: for a sample with T content tokens, l = ceil(0.15 T); a masking pattern
replaces l content positions by the mask token and its value is the mean (or sum)
cross-entropy of the original tokens there; the energy is the mean over K patterns
(every pattern, in lexicographic order, when K >= C(T, l)). Normalized energy: every
content position masked alone; the energy is the mean cross-entropy over positions.

Two implementations share tokenization and masks (`mlmia.masks`):

- `score_samples`, the fast path: the masked copies of all samples are sorted by length
  and cut into batches under a token budget, the encoder runs once per batch and the LM
  head only on the masked positions; inference mode, bf16/fp16 autocast on CUDA, fp32 on
  CPU, cross-entropy in fp32.
- `score_samples_oracle`, the test oracle: one sample and one pattern at a time, the full
  model forward `model(input_ids).logits`.

Output: one row per sample, in input order, with the columns in `OUTPUT_COLUMNS`.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mlmia.errors import UserError
from mlmia.io import read_samples, require_columns, write_parquet
from mlmia.logs import get_logger
from mlmia.masks import mask_patterns, n_masked, single_position_patterns
from mlmia.models import load_mlm, max_sequence_length, mlm_parts, resolve_device

log = get_logger("scoring")

ENERGY_KINDS = ("masked", "normalized")
REDUCTIONS = ("mean", "sum")
OUTPUT_COLUMNS = ["sample_id", "model", "energy_kind", "energy", "n_tokens", "n_masked", "per_pattern", "k", "seed"]
# Tokens (padded rows x length) per forward pass when no batch size is given.
DEFAULT_TOKEN_BUDGET = {"cpu": 4096, "cuda": 65536}
THREADS_ENV = "MLMIA_NUM_THREADS"
PROGRESS_SECONDS = 30.0


# --------------------------------------------------------------------------- shared


def _check_params(energy: str, k: int, seed: int, reduction: str, batch_size: int | None = None) -> None:
    if energy not in ENERGY_KINDS:
        raise UserError(f"unknown energy kind {energy!r} (use one of {', '.join(ENERGY_KINDS)})")
    if reduction not in REDUCTIONS:
        raise UserError(f"unknown reduction {reduction!r} (use one of {', '.join(REDUCTIONS)})")
    if int(k) < 1:
        raise UserError(f"the number of masking patterns must be >= 1, got {k}")
    if int(seed) < 0:
        raise UserError(f"the seed must be >= 0, got {seed}")
    if batch_size is not None and int(batch_size) < 1:
        raise UserError(f"the batch size must be >= 1, got {batch_size}")


def _sample_columns(samples: pd.DataFrame) -> tuple[list[str], list[str]]:
    require_columns(samples, ["sample_id", "text"], "samples")
    sids = samples["sample_id"].astype(str).tolist()
    dup = pd.Series(sids).duplicated()
    if dup.any():
        raise UserError(f"samples: duplicate sample_id {sids[int(np.flatnonzero(dup.to_numpy())[0])]!r}")
    return sids, samples["text"].astype(str).tolist()


@dataclass
class _Prepared:
    sample_ids: list[str]
    ids: list[np.ndarray]  # token ids of each sample, special tokens included
    patterns: list[np.ndarray]  # (K_i, l_i) sequence positions to mask
    n_tokens: np.ndarray  # content tokens after truncation
    mask_id: int
    pad_id: int


def _prepare(model, tokenizer, samples: pd.DataFrame, energy: str, k: int, seed: int) -> _Prepared:
    """Tokenize (with truncation, logged) and lay out every sample's masking patterns."""
    sids, texts = _sample_columns(samples)
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise UserError(f"tokenizer of {type(model).__name__} has no mask token; not a masked language model")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    max_len = max_sequence_length(model, tokenizer)
    if not texts:
        return _Prepared(sids, [], [], np.zeros(0, dtype=np.int64), int(mask_id), int(pad_id))
    enc = tokenizer(
        texts,
        truncation=True,
        max_length=max_len,
        return_special_tokens_mask=True,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    full = tokenizer(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False)
    ids_list, patterns, n_tok = [], [], np.empty(len(texts), dtype=np.int64)
    n_truncated = 0
    for i, (sid, ids, special) in enumerate(zip(sids, enc["input_ids"], enc["special_tokens_mask"])):
        ids = np.asarray(ids, dtype=np.int64)
        content = np.flatnonzero((np.asarray(special) == 0) & (ids != pad_id))
        t = len(content)
        if t == 0:
            raise UserError(f"sample {sid!r}: no tokens to score (empty text after tokenization)")
        if len(full["input_ids"][i]) > t:
            n_truncated += 1
        pat = mask_patterns(seed, sid, t, k) if energy == "masked" else single_position_patterns(t)
        ids_list.append(ids)
        patterns.append(content[pat])
        n_tok[i] = t
    if n_truncated:
        log.warning(
            "%d of %d samples are longer than the model's maximum length (%d tokens with special tokens) and were truncated",
            n_truncated,
            len(texts),
            max_len,
        )
    return _Prepared(sids, ids_list, patterns, n_tok, int(mask_id), int(pad_id))


def _frame(prep: _Prepared, per_pattern: list[np.ndarray], energy: str, seed: int, model_name: str) -> pd.DataFrame:
    n = len(prep.sample_ids)
    return pd.DataFrame(
        {
            "sample_id": pd.Series(prep.sample_ids, dtype=object),
            "model": pd.Series([model_name] * n, dtype=object),
            "energy_kind": pd.Series([energy] * n, dtype=object),
            "energy": np.array([float(np.mean(v)) for v in per_pattern], dtype=np.float64),
            "n_tokens": prep.n_tokens.astype(np.int64),
            "n_masked": np.array([p.shape[1] for p in prep.patterns], dtype=np.int64),
            "per_pattern": pd.Series([np.asarray(v, dtype=np.float64).tolist() for v in per_pattern], dtype=object),
            "k": np.array([p.shape[0] for p in prep.patterns], dtype=np.int64),
            "seed": np.full(n, int(seed), dtype=np.int64),
        },
        columns=OUTPUT_COLUMNS,
    )


def _default_name(model) -> str:
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    return Path(str(name).rstrip("/")).name if os.path.isdir(str(name)) else str(name)


@contextlib.contextmanager
def _threads(num_threads: int | None):
    """Use `num_threads` (or $MLMIA_NUM_THREADS) torch threads inside the block, then restore."""
    if num_threads is None and os.environ.get(THREADS_ENV, "").strip():
        try:
            num_threads = int(os.environ[THREADS_ENV])
        except ValueError as exc:
            raise UserError(f"{THREADS_ENV}={os.environ[THREADS_ENV]!r} is not an integer") from exc
    before = torch.get_num_threads()
    if num_threads is not None and num_threads > 0 and num_threads != before:
        torch.set_num_threads(int(num_threads))
        try:
            yield
        finally:
            torch.set_num_threads(before)
    else:
        yield


@contextlib.contextmanager
def _eval_mode(model):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


# --------------------------------------------------------------------------- fast path


def score_samples(
    model,
    tokenizer,
    samples: pd.DataFrame,
    *,
    energy: str = "masked",
    k: int = 10,
    seed: int = 0,
    reduction: str = "mean",
    batch_size: int | None = None,
    device: str | torch.device | None = None,
    model_name: str | None = None,
    token_budget: int | None = None,
    num_threads: int | None = None,
    progress_seconds: float = PROGRESS_SECONDS,
) -> pd.DataFrame:
    """Score an in-memory sample table (`sample_id`, `text`) with a loaded model: one row per sample.

    `batch_size` caps the masked copies per forward pass; without it, batches are cut by a
    token budget (padded rows x length; `token_budget`, default per device type). `device`
    None keeps the model where it is; otherwise the model is moved there.
    """
    _check_params(energy, k, seed, reduction, batch_size)
    if device is not None:
        dev = resolve_device(device)
        if _model_device(model) != dev:
            model.to(dev)
    dev = _model_device(model)
    model_name = model_name or _default_name(model)
    prep = _prepare(model, tokenizer, samples, energy, k, seed)
    with _threads(num_threads), _eval_mode(model):
        values = _run_fast(model, prep, reduction, batch_size, token_budget, dev, progress_seconds)
    return _frame(prep, values, energy, seed, model_name)


def _batches(lengths: np.ndarray, batch_size: int | None, token_budget: int) -> list[tuple[int, int]]:
    """Cut copies (sorted by length, ascending) into [a, b) batches."""
    n = len(lengths)
    out, a = [], 0
    while a < n:
        if batch_size is not None:
            b = min(n, a + batch_size)
        else:
            # largest b with (b - a) * lengths[b - 1] <= budget (at least one row)
            rows = max(1, token_budget // int(lengths[a]))
            b = min(n, a + rows)
            while b - a > 1 and (b - a) * int(lengths[b - 1]) > token_budget:
                rows = max(1, token_budget // int(lengths[b - 1]))
                b = min(b - 1, a + rows)
        out.append((a, b))
        a = b
    return out


def _autocast(dev: torch.device):
    if dev.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast("cuda", dtype=dtype)
    return contextlib.nullcontext()


def _run_fast(model, prep: _Prepared, reduction, batch_size, token_budget, dev, progress_seconds) -> list[np.ndarray]:
    n = len(prep.ids)
    if n == 0:
        return []
    lengths = np.array([len(x) for x in prep.ids], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    k_per = np.array([p.shape[0] for p in prep.patterns], dtype=np.int64)
    l_per = np.array([p.shape[1] for p in prep.patterns], dtype=np.int64)

    # Copies in sorted order: copy c belongs to sample copy_sample[c]; sample order[j]'s copies
    # are contiguous, starting at copy_start[j].
    copy_sample = np.repeat(order, k_per[order])
    copy_len = lengths[copy_sample]
    copy_l = l_per[copy_sample]
    n_copies = len(copy_sample)
    sample_end = np.cumsum(k_per[order])  # in sorted order
    copy_start = sample_end - k_per[order]
    # Masked positions, flat in copy order, with their copy index.
    flat_pos = np.concatenate([prep.patterns[i].reshape(-1) for i in order])
    flat_copy = np.repeat(np.arange(n_copies), copy_l)
    pos_off = np.concatenate([[0], np.cumsum(copy_l)])

    max_len = int(lengths.max())
    ids_mat = np.full((n, max_len), prep.pad_id, dtype=np.int64)
    for i, ids in enumerate(prep.ids):
        ids_mat[i, : len(ids)] = ids
    ids_t = torch.from_numpy(ids_mat).to(dev)
    copy_sample_t = torch.from_numpy(copy_sample).to(dev)
    copy_len_t = torch.from_numpy(copy_len).to(dev)
    flat_pos_t = torch.from_numpy(flat_pos).to(dev)
    flat_copy_t = torch.from_numpy(flat_copy).to(dev)
    copy_l_t = torch.from_numpy(copy_l).to(dev)
    flat_target_t = ids_t[copy_sample_t[flat_copy_t], flat_pos_t]

    budget = token_budget or DEFAULT_TOKEN_BUDGET.get(dev.type, DEFAULT_TOKEN_BUDGET["cpu"])
    batches = _batches(copy_len, batch_size, budget)
    parts = mlm_parts(model)
    out = torch.empty(n_copies, dtype=torch.float32, device=dev)
    t0 = last = time.perf_counter()
    log.info(
        "scoring %d samples (%d masked copies, %d batches) on %s%s",
        n,
        n_copies,
        len(batches),
        dev,
        "" if parts else " with full logits",
    )
    with torch.inference_mode(), _autocast(dev):
        for bi, (a, b) in enumerate(batches):
            seq_len = int(copy_len[b - 1])
            rows = copy_sample_t[a:b]
            x = ids_t[:, :seq_len].index_select(0, rows)
            pa, pb = int(pos_off[a]), int(pos_off[b])
            r = flat_copy_t[pa:pb] - a
            p = flat_pos_t[pa:pb]
            x[r, p] = prep.mask_id
            if int(copy_len[a]) == seq_len:
                attn = None  # all rows the same length: no padding to mask
            else:
                attn = (torch.arange(seq_len, device=dev)[None, :] < copy_len_t[a:b, None]).long()
            if parts is not None:
                encoder, head = parts
                hidden = encoder(input_ids=x, attention_mask=attn).last_hidden_state
                logits = head(hidden[r, p])
            else:
                logits = model(input_ids=x, attention_mask=attn).logits[r, p]
            ce = F.cross_entropy(logits.float(), flat_target_t[pa:pb], reduction="none")
            vals = torch.zeros(b - a, dtype=torch.float32, device=dev).index_add_(0, r, ce)
            if reduction == "mean":
                vals = vals / copy_l_t[a:b]
            out[a:b] = vals
            now = time.perf_counter()
            if now - last >= progress_seconds and bi + 1 < len(batches):
                last = now
                done = int(np.searchsorted(sample_end, b, side="right"))
                log.info("scored %d/%d samples, %.1f samples/s on %s", done, n, done / (now - t0), dev)
    elapsed = time.perf_counter() - t0
    log.info("scored %d samples in %.1f s, %.1f samples/s on %s", n, elapsed, n / max(elapsed, 1e-9), dev)
    values = out.double().cpu().numpy()
    per = [None] * n
    for j, i in enumerate(order):
        per[i] = values[copy_start[j] : sample_end[j]]
    return per


# --------------------------------------------------------------------------- oracle


def score_samples_oracle(
    model,
    tokenizer,
    samples: pd.DataFrame,
    *,
    energy: str = "masked",
    k: int = 10,
    seed: int = 0,
    reduction: str = "mean",
    model_name: str | None = None,
) -> pd.DataFrame:
    """The deliberately simple reference: one sample, one pattern, one full forward at a time."""
    _check_params(energy, k, seed, reduction)
    model_name = model_name or _default_name(model)
    prep = _prepare(model, tokenizer, samples, energy, k, seed)
    dev = _model_device(model)
    per_pattern = []
    with torch.inference_mode(), _eval_mode(model):
        for ids, patterns in zip(prep.ids, prep.patterns):
            original = torch.tensor(ids, device=dev).unsqueeze(0)
            values = []
            for pattern in patterns:
                pos = torch.tensor(pattern, device=dev)
                masked = original.clone()
                masked[0, pos] = prep.mask_id
                logits = model(masked).logits[0]
                ce = F.cross_entropy(logits[pos].float(), original[0, pos], reduction="none")
                values.append(float(ce.mean() if reduction == "mean" else ce.sum()))
            per_pattern.append(np.array(values, dtype=np.float64))
    return _frame(prep, per_pattern, energy, seed, model_name)


# --------------------------------------------------------------------------- files


def score_file(
    model: str,
    samples: str,
    out: str,
    energy: str = "masked",
    k: int = 10,
    seed: int = 0,
    reduction: str = "mean",
    batch_size: int | None = None,
    device: str = "auto",
    model_name: str | None = None,
) -> pd.DataFrame:
    """Read samples, load the model, score, and write `out` (Parquet) atomically."""
    _check_params(energy, k, seed, reduction, batch_size)
    df = read_samples(samples)
    mdl, tokenizer = load_mlm(model, device)
    local = Path(str(model)).expanduser()
    # default label: a local directory's name, or the hub id as given
    label = model_name or (local.resolve().name if local.is_dir() else str(model))
    scores = score_samples(
        mdl,
        tokenizer,
        df,
        energy=energy,
        k=k,
        seed=seed,
        reduction=reduction,
        batch_size=batch_size,
        device=None,
        model_name=label,
    )
    write_parquet(scores, out)
    log.info("wrote %d rows to %s", len(scores), out)
    return scores


__all__ = [
    "ENERGY_KINDS",
    "OUTPUT_COLUMNS",
    "REDUCTIONS",
    "n_masked",
    "score_file",
    "score_samples",
    "score_samples_oracle",
]
