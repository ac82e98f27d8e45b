"""Energies of samples under a masked language model (paper Eq. 2, the normalized variant,
and the word-aware pseudo-log-likelihood).

Masked energy: for a sample with T content tokens, l = ceil(0.15 T); a masking pattern
replaces l content positions by the mask token and its value is the mean (or sum)
cross-entropy of the original tokens there; the energy is the mean over K patterns
(every pattern, in lexicographic order, when K >= C(T, l)). Normalized energy: every
content position masked alone; the energy is the mean cross-entropy over positions.
PLL-word-l2r energy (Kauf and Ivanova, "A Better Way to Do Masked Language Model Scoring",
ACL 2023): every content position scored once, with it and the rest of its word to the
right masked (a word's later pieces do not give its earlier ones away); the energy is the
mean cross-entropy over positions. Progressive (SAMA's nested masks, each step scoring the tokens
it masks first) and ELBO (the masked-diffusion ELBO under a fixed schedule of masking ratios)
energies: their patterns and schedules are in `mlmia.scoring.schedules`; the energy is the mean
over their patterns too.

Per-token evidence, from the same forward passes: for every scored position, the true
token's log-probability, the mean and the variance of log p under the model's distribution
there (E_p[log p], Var_p[log p]: what Min-K%++ standardises by) and whether the top-1
prediction is the true token; lists per sample in pattern order (`token_*` columns).

Two implementations share tokenization and masks (`mlmia.scoring.schedules`, keyed on `mask_keys`):

- `score_samples`, the fast path: the masked copies of all samples are sorted by length
  and cut into batches under a token budget, the encoder runs once per batch and the LM
  head only on the masked positions; inference mode, bf16/fp16 autocast on CUDA, fp32 on
  CPU, cross-entropy in fp32. On CUDA without a batch size or token budget, the rows of a
  batch come from the free GPU memory (`batch_size_for_memory`); a batch that runs out of
  memory is halved and retried. Throughput is logged and returned (`ScoringStats`).
- `score_samples_oracle`, the test oracle: one sample and one pattern at a time, the full
  model forward `model(input_ids).logits`.

Output: one row per sample, in input order, with the columns in `SCORE_COLUMNS`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import atomic_path, read_samples, require_columns
from mlmia.core.logs import get_logger
from mlmia.models.batching import eval_mode
from mlmia.models.loading import load_mlm, max_sequence_length, mlm_parts, resolve_device
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.layout import ENERGY_KINDS, PATTERN_SIZES, SCORE_COLUMNS, SIZED_KINDS
from mlmia.scoring.masks import MASK_COUNTS, mask_keys, n_masked
from mlmia.scoring.memory import batch_size_for_memory, sequence_bytes
from mlmia.scoring.schedules import check_schedule, content_patterns

log = get_logger(__name__)

REDUCTIONS = ("mean", "sum")
#: energy kinds whose patterns also mask positions they do not score
UNSCORED_MASKS = ("pll_word_l2r", "progressive")
#: CUDA autocast dtypes (auto: bf16 where the GPU supports it, else fp16); CPU always runs fp32
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# Tokens (padded rows x length) per forward pass when no batch size is given (CUDA: used
# only when the free memory cannot be read).
DEFAULT_TOKEN_BUDGET = {"cpu": 4096, "cuda": 65536}
THREADS_ENV = "MLMIA_NUM_THREADS"
PROGRESS_SECONDS = 30.0


# --------------------------------------------------------------------------- shared


def _check_params(
    energy: str,
    k: int,
    seed: int,
    reduction: str,
    batch_size: int | None = None,
    mask_count: str = "ceil",
    precision: str = "auto",
    schedule: Mapping | None = None,
) -> dict | None:
    """Check the scoring parameters; the energy kind's schedule with its defaults (or None)."""
    if mask_count not in MASK_COUNTS:
        raise UserError(f"unknown mask count {mask_count!r} (use one of {', '.join(MASK_COUNTS)})")
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r} (use one of {', '.join(PRECISIONS)})")
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
    return check_schedule(energy, schedule)


def _sample_columns(samples: pd.DataFrame) -> tuple[list[str], list[str]]:
    require_columns(samples, ["sample_id", "text"], "samples")
    sids = samples["sample_id"].astype(str).tolist()
    dup = pd.Series(sids).duplicated()
    if dup.any():
        raise UserError(f"samples: duplicate sample_id {shown_id(sids[int(np.flatnonzero(dup.to_numpy())[0])])}")
    return sids, samples["text"].astype(str).tolist()


@dataclass
class _Prepared:
    sample_ids: list[str]
    ids: list[np.ndarray]  # token ids of each sample, special tokens included
    # sequence positions to mask and score: (K_i, l_i), or K_i arrays where patterns differ in size
    patterns: list[np.ndarray | list[np.ndarray]]
    n_tokens: np.ndarray  # content tokens after truncation
    mask_id: int
    pad_id: int
    # further positions to mask (not scored) in each pattern (pll_word_l2r: the rest of the word;
    # progressive: the tokens earlier steps masked)
    extra: list[list[np.ndarray]] | None = None
    # a pattern's value is the sum of its cross-entropies times T / l (elbo, reduction sum)
    per_sequence: bool = False

    def masked(self, i: int, j: int) -> np.ndarray:
        """Every position pattern j of sample i masks."""
        return self.patterns[i][j] if self.extra is None else np.r_[self.patterns[i][j], self.extra[i][j]]


def _prepare(
    model,
    tokenizer,
    samples: pd.DataFrame,
    energy: str,
    k: int,
    seed: int,
    mask_count: str = "ceil",
    truncate: bool = False,
    schedule: Mapping | None = None,
    reduction: str = "mean",
) -> _Prepared:
    """Tokenize and lay out every sample's masking patterns. A text longer than the model's
    maximum length is refused (its score would be the score of a prefix) unless `truncate`,
    then cut and counted in the log.

    Content tokens: every token the tokenizer did not add ([CLS], [SEP], <s>, </s>); text
    that spells a special token is content like any other (`encode_text`), the count
    `mlmia.models.tokenizer.content_tokens` gives."""
    (sids, texts), keys = _sample_columns(samples), mask_keys(samples)  # masks keyed on mask_id where given
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise UserError(f"tokenizer of {type(model).__name__} has no mask token; not a masked language model")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    max_len = max_sequence_length(model, tokenizer)
    per_sequence = energy == "elbo" and reduction == "sum"
    if not texts:
        return _Prepared(
            sids,
            [],
            [],
            np.zeros(0, dtype=np.int64),
            int(mask_id),
            int(pad_id),
            [] if energy in UNSCORED_MASKS else None,
            per_sequence,
        )
    # special-token strings in the text ("[MASK]", "<pad>") are read as characters: see encode_text
    labels = [f"sample {shown_id(sid)}" for sid in sids]
    enc = encode_text(
        tokenizer,
        texts,
        labels=labels,
        truncation=True,
        max_length=max_len,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    full = encode_text(
        tokenizer,
        texts,
        labels=labels,
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    ids_list, patterns, n_tok = [], [], np.empty(len(texts), dtype=np.int64)
    extra: list[list[np.ndarray]] | None = [] if energy in UNSCORED_MASKS else None
    if energy == "pll_word_l2r" and not getattr(enc, "is_fast", False):
        raise UserError("energy pll_word_l2r needs word boundaries: a fast tokenizer (tokenizer.json)")
    n_truncated = 0
    for i, (sid, ids, special) in enumerate(zip(sids, enc["input_ids"], enc["special_tokens_mask"])):
        ids = np.asarray(ids, dtype=np.int64)
        content = np.flatnonzero(np.asarray(special) == 0)
        t = len(content)
        if t == 0:
            raise UserError(f"sample {shown_id(sid)}: no tokens to score (empty text after tokenization)")
        if len(full["input_ids"][i]) > t:
            if not truncate:
                raise UserError(
                    f"sample {shown_id(sid)} is longer than the model's maximum length ({max_len} tokens with special tokens; "
                    f"it has {len(full['input_ids'][i])} content tokens): shorten the samples, or allow truncation "
                    "(config scoring.truncate: true; mlmia score --truncate)"
                )
            n_truncated += 1
        pat, unscored = content_patterns(energy, seed, keys[i], t, k, mask_count, schedule)
        ids_list.append(ids)
        patterns.append(content[pat] if isinstance(pat, np.ndarray) else [content[p] for p in pat])
        n_tok[i] = t
        if energy == "pll_word_l2r":
            extra.append(_rest_of_word(enc.word_ids(i), content))
        elif extra is not None:
            extra.append([content[p] for p in unscored])
    if n_truncated:
        log.warning(
            "%d of %d samples are longer than the model's maximum length (%d tokens with special tokens) and were truncated",
            n_truncated,
            len(texts),
            max_len,
        )
    return _Prepared(sids, ids_list, patterns, n_tok, int(mask_id), int(pad_id), extra, per_sequence)


def _rest_of_word(word_ids: list, content: np.ndarray) -> list[np.ndarray]:
    """For each content position, the later content positions of the same word (PLL-word-l2r)."""
    out = []
    for n, position in enumerate(content):
        word = word_ids[position]
        later = []
        for other in content[n + 1 :]:
            if word is None or word_ids[other] != word:
                break
            later.append(other)
        out.append(np.asarray(later, dtype=np.int64))
    return out


def _frame(
    prep: _Prepared, per_pattern: list[np.ndarray], evidence: list[dict], energy: str, seed: int, model_name: str
) -> pd.DataFrame:
    n = len(prep.sample_ids)

    def lists(key, cast):
        return pd.Series([np.asarray(e[key]).astype(cast).tolist() for e in evidence], dtype=object)

    sized = energy in SIZED_KINDS
    sizes = [[len(pattern) for pattern in p] for p in prep.patterns]
    frame = pd.DataFrame(
        {
            "sample_id": pd.Series(prep.sample_ids, dtype=object),
            "model": pd.Series([model_name] * n, dtype=object),
            "energy_kind": pd.Series([energy] * n, dtype=object),
            "energy": np.array([float(np.mean(v)) for v in per_pattern], dtype=np.float64),
            "n_tokens": prep.n_tokens.astype(np.int64),
            "n_masked": np.array(
                [sum(z) if sized else p.shape[1] for z, p in zip(sizes, prep.patterns)], dtype=np.int64
            ),
            "per_pattern": pd.Series([np.asarray(v, dtype=np.float64).tolist() for v in per_pattern], dtype=object),
            "k": np.array([len(p) for p in prep.patterns], dtype=np.int64),
            "seed": np.full(n, int(seed), dtype=np.int64),
            "token_logp": lists("logp", np.float64),
            "token_mean": lists("mean", np.float64),
            "token_var": lists("var", np.float64),
            "token_top1": lists("top1", bool),
        },
        columns=SCORE_COLUMNS,
    )
    if sized:
        frame[PATTERN_SIZES] = pd.Series(sizes, dtype=object)
    return frame


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


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


@dataclass(frozen=True)
class ScoringStats:
    """What one `score_samples` call did, for the job log. No texts."""

    n_samples: int
    n_sequences: int  # masked copies run through the model
    n_tokens: int  # tokens of all masked copies, special tokens included, no padding
    n_scored_tokens: int  # masked positions scored
    n_batches: int
    seconds: float  # the whole call: tokenization, masks, forward passes
    device: str
    dtype: str  # of the forward pass (autocast on CUDA)
    batch_size: int  # the largest batch run (masked copies)
    batch_policy: str  # how batches were cut
    oom_halvings: int = 0

    @property
    def samples_per_s(self) -> float:
        return self.n_samples / max(self.seconds, 1e-9)

    @property
    def sequences_per_s(self) -> float:
        return self.n_sequences / max(self.seconds, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / max(self.seconds, 1e-9)

    @property
    def scored_tokens_per_s(self) -> float:
        return self.n_scored_tokens / max(self.seconds, 1e-9)

    def as_dict(self) -> dict:
        out = asdict(self)
        for name in ("samples_per_s", "sequences_per_s", "tokens_per_s", "scored_tokens_per_s"):
            out[name] = getattr(self, name)
        return out

    def summary(self) -> str:
        return (
            f"scored {self.n_samples} samples ({self.n_sequences} sequences, {self.n_tokens} tokens, "
            f"{self.n_scored_tokens} scored tokens) in {self.seconds:.1f} s: {self.samples_per_s:.1f} samples/s, "
            f"{self.sequences_per_s:.1f} sequences/s, {self.tokens_per_s:.0f} tokens/s, "
            f"{self.scored_tokens_per_s:.0f} scored tokens/s; device {self.device}, {self.dtype}, "
            f"batch size up to {self.batch_size} ({self.batch_policy}), {self.n_batches} batches"
            + (f", {self.oom_halvings} out-of-memory halvings" if self.oom_halvings else "")
        )


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
    return_stats: bool = False,
    mask_count: str = "ceil",
    precision: str = "auto",
    truncate: bool = False,
    schedule: Mapping | None = None,
) -> pd.DataFrame | tuple[pd.DataFrame, ScoringStats]:
    """Score an in-memory sample table (`sample_id`, `text`) with a loaded model: one row per sample.

    `batch_size` caps the masked copies per forward pass. Without it, batches are cut by a
    token budget (padded rows x length; `token_budget`, default per device type), except
    on CUDA without a `token_budget`, where the rows per batch come from the free GPU
    memory (`batch_size_for_memory`, logged). A batch that runs out of memory is halved
    and retried (logged). `device` None keeps the model where it is; otherwise the model
    is moved there. Throughput is logged at the end; `return_stats` also returns it as
    (scores, ScoringStats). `schedule`: the settings of a progressive or ELBO energy
    (`mlmia.scoring.schedules.SCHEDULES`; missing keys take their defaults).
    """
    t0 = time.perf_counter()
    schedule = _check_params(energy, k, seed, reduction, batch_size, mask_count, precision, schedule)
    if token_budget is not None and int(token_budget) < 1:
        raise UserError(f"the token budget must be >= 1, got {token_budget}")
    if device is not None:
        dev = resolve_device(device)
        if _model_device(model) != dev:
            model.to(dev)
    dev = _model_device(model)
    model_name = model_name or _default_name(model)
    prep = _prepare(model, tokenizer, samples, energy, k, seed, mask_count, truncate, schedule, reduction)
    with _threads(num_threads), eval_mode(model):
        values, run = _run_fast(model, prep, reduction, batch_size, token_budget, dev, progress_seconds, precision)
    evidence = run.pop("evidence", [])
    stats = ScoringStats(n_samples=len(prep.ids), seconds=time.perf_counter() - t0, device=str(dev), **run)
    log.info("%s", stats.summary())
    scores = _frame(prep, values, evidence, energy, seed, model_name)
    return (scores, stats) if return_stats else scores


def _batches(n: int, rows_for) -> list[tuple[int, int]]:
    """Cut copies 0..n-1 (sorted by length, ascending) into [a, b) batches.

    `rows_for(i)`: the most rows a batch whose longest copy is copy i may hold (>= 1, not
    increasing in i). Each batch is the largest [a, b) with b - a <= rows_for(b - 1).
    """
    out, a = [], 0
    while a < n:
        b = min(n, a + rows_for(a))
        while b - a > 1 and b - a > rows_for(b - 1):
            b = min(b - 1, a + rows_for(b - 1))
        out.append((a, b))
        a = b
    return out


def _compute_dtype(dev: torch.device, precision: str = "auto") -> torch.dtype:
    """fp32 unless asked otherwise; on CUDA `auto` is bf16 where supported, else fp16. On CPU
    only bf16 is offered (fp16 matmuls there are emulated and slower than fp32)."""
    if precision == "fp32" or (dev.type != "cuda" and precision == "auto"):
        return torch.float32
    if dev.type != "cuda":
        if precision != "bf16":
            raise UserError(f"precision {precision} needs a CUDA device; on CPU use fp32 or bf16")
        return torch.bfloat16
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def _autocast(dev: torch.device, precision: str = "auto"):
    """Autocast to the compute dtype (matmuls in it; softmax, norms and the cross-entropy stay
    fp32), or nothing for fp32. bf16 on a CPU without native bf16 (AVX-512 BF16, AMX) runs but
    slower than fp32: logged."""
    dtype = _compute_dtype(dev, precision)
    if dtype == torch.float32:
        return contextlib.nullcontext()
    if dev.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        log.warning("precision bf16: this CPU has no native bf16 support; fp32 is likely faster")
    return torch.autocast(dev.type, dtype=dtype)


def _free_memory(dev: torch.device) -> int | None:
    """Bytes the next batch can use on a CUDA device: free on the device plus cached by torch."""
    try:
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev))
    except Exception:  # noqa: BLE001 - no reading: fall back to the token budget
        return None


def _batch_rule(model, dev, batch_size, token_budget, copy_len, copy_l, full_logits, precision="auto"):
    """(rows_for(i), policy text) for `_batches`."""
    if batch_size is not None:
        return (lambda i: int(batch_size)), f"batch size {int(batch_size)}"
    free = _free_memory(dev) if dev.type == "cuda" and token_budget is None else None
    if free is None:
        budget = int(token_budget or DEFAULT_TOKEN_BUDGET.get(dev.type, DEFAULT_TOKEN_BUDGET["cpu"]))
        return (lambda i: max(1, budget // int(copy_len[i]))), f"token budget {budget}"
    dtype_bytes = torch.empty((), dtype=_compute_dtype(dev, precision)).element_size()
    cache: dict[tuple[int, int], int] = {}

    def rows_for(i):
        key = (int(copy_len[i]), int(copy_l[i]))
        if key not in cache:
            cache[key] = batch_size_for_memory(
                free, model.config, key[0], dtype_bytes, masked_per_seq=key[1], full_logits=full_logits
            )
        return cache[key]

    last = len(copy_len) - 1
    log.info(
        "batch size from free GPU memory (%.2f GiB, %s): %d sequences of %d tokens (the longest), %d of %d tokens (the shortest)",
        free / 2**30,
        str(_compute_dtype(dev, precision)).replace("torch.", ""),
        rows_for(last),
        int(copy_len[last]),
        rows_for(0),
        int(copy_len[0]),
    )
    return rows_for, f"free memory {free / 2**30:.1f} GiB"


@dataclass
class _Inputs:
    """Device tensors of one `_run_fast` call, in sorted copy order."""

    model: object
    parts: tuple | None
    ids: torch.Tensor  # (n samples, max length), padded
    copy_sample: torch.Tensor
    copy_len: np.ndarray
    copy_len_t: torch.Tensor
    copy_l: torch.Tensor
    pos_off: np.ndarray
    flat_pos: torch.Tensor
    flat_copy: torch.Tensor
    flat_target: torch.Tensor
    mask_id: int
    mean: bool
    # per-copy factor of a pattern's sum (elbo per sequence: T / l); None: none
    scale: torch.Tensor | None = None
    # positions masked but not scored (PLL-word-l2r, progressive), flat in copy order; None: none
    mask_off: np.ndarray | None = None
    mask_pos: torch.Tensor | None = None
    mask_copy: torch.Tensor | None = None


def _evidence(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(log p of the target, E_p[log p], Var_p[log p], top-1 == target) per scored position, fp32."""
    # fp32 log-probabilities, floored so that a zero probability gives 0 * log p = 0, not NaN
    logp = torch.log_softmax(logits.float(), dim=-1).clamp_min_(-1e4)
    true = logp.gather(1, target[:, None]).squeeze(1)
    weighted = logp.exp().mul_(logp)  # p log p
    mean = weighted.sum(-1)
    second = weighted.mul_(logp).sum(-1)  # p (log p)^2
    return true, mean, (second - mean.square()).clamp_min(0.0), logits.argmax(-1) == target


def _score_batch(inp: _Inputs, a: int, b: int) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Per-copy energies (fp32) of copies [a, b), and the per-token evidence of their scored positions."""
    dev = inp.ids.device
    seq_len = int(inp.copy_len[b - 1])
    rows = inp.copy_sample[a:b]
    x = inp.ids[:, :seq_len].index_select(0, rows)
    pa, pb = int(inp.pos_off[a]), int(inp.pos_off[b])
    r = inp.flat_copy[pa:pb] - a
    p = inp.flat_pos[pa:pb]
    x[r, p] = inp.mask_id
    if inp.mask_off is not None:
        ma, mb = int(inp.mask_off[a]), int(inp.mask_off[b])
        x[inp.mask_copy[ma:mb] - a, inp.mask_pos[ma:mb]] = inp.mask_id
    if int(inp.copy_len[a]) == seq_len:
        attn = None  # all rows the same length: no padding to mask
    else:
        attn = (torch.arange(seq_len, device=dev)[None, :] < inp.copy_len_t[a:b, None]).long()
    if inp.parts is not None:
        encoder, head = inp.parts
        hidden = encoder(input_ids=x, attention_mask=attn).last_hidden_state
        logits = head(hidden[r, p])
    else:
        logits = inp.model(input_ids=x, attention_mask=attn).logits[r, p]
    evidence = _evidence(logits, inp.flat_target[pa:pb])
    vals = torch.zeros(b - a, dtype=torch.float32, device=dev).index_add_(0, r, -evidence[0])
    if inp.mean:
        vals = vals / inp.copy_l[a:b]
    elif inp.scale is not None:
        vals = vals * inp.scale[a:b]
    return vals, evidence


def _run_fast(
    model, prep: _Prepared, reduction, batch_size, token_budget, dev, progress_seconds, precision="auto"
) -> tuple[list[np.ndarray], dict]:
    """(per-pattern energies of each sample, run facts for ScoringStats)."""
    n = len(prep.ids)
    dtype = str(_compute_dtype(dev, precision)).replace("torch.", "")
    if n == 0:
        policy = f"batch size {batch_size}" if batch_size is not None else "none"
        return [], dict(
            n_sequences=0, n_tokens=0, n_scored_tokens=0, n_batches=0, dtype=dtype, batch_size=0, batch_policy=policy
        )
    lengths = np.array([len(x) for x in prep.ids], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    k_per = np.array([len(p) for p in prep.patterns], dtype=np.int64)

    # Copies in sorted order: copy c belongs to sample copy_sample[c]; sample order[j]'s copies
    # are contiguous, starting at copy_start[j].
    copy_sample = np.repeat(order, k_per[order])
    copy_len = lengths[copy_sample]
    copy_l = np.array([len(pattern) for i in order for pattern in prep.patterns[i]], dtype=np.int64)
    n_copies = len(copy_sample)
    sample_end = np.cumsum(k_per[order])  # in sorted order
    copy_start = sample_end - k_per[order]
    # Masked positions, flat in copy order, with their copy index.
    flat_pos = np.concatenate([np.asarray(p).reshape(-1) if isinstance(p, np.ndarray) else np.concatenate(p)
                               for p in (prep.patterns[i] for i in order)])  # fmt: skip
    flat_copy = np.repeat(np.arange(n_copies), copy_l)
    pos_off = np.concatenate([[0], np.cumsum(copy_l)])
    masking = {}
    if prep.extra is not None:  # positions masked, not scored: flat in copy order too
        extra = [e for i in order for e in prep.extra[i]]
        extra_n = np.array([len(e) for e in extra], dtype=np.int64)
        masking = dict(
            mask_off=np.concatenate([[0], np.cumsum(extra_n)]),
            mask_pos=torch.from_numpy(np.concatenate(extra + [np.zeros(0, dtype=np.int64)])).to(dev),
            mask_copy=torch.from_numpy(np.repeat(np.arange(n_copies), extra_n)).to(dev),
        )

    max_len = int(lengths.max())
    ids_mat = np.full((n, max_len), prep.pad_id, dtype=np.int64)
    for i, ids in enumerate(prep.ids):
        ids_mat[i, : len(ids)] = ids
    ids_t = torch.from_numpy(ids_mat).to(dev)
    copy_sample_t = torch.from_numpy(copy_sample).to(dev)
    flat_pos_t = torch.from_numpy(flat_pos).to(dev)
    flat_copy_t = torch.from_numpy(flat_copy).to(dev)
    parts = mlm_parts(model)
    inp = _Inputs(
        model=model,
        parts=parts,
        ids=ids_t,
        copy_sample=copy_sample_t,
        copy_len=copy_len,
        copy_len_t=torch.from_numpy(copy_len).to(dev),
        copy_l=torch.from_numpy(copy_l).to(dev),
        pos_off=pos_off,
        flat_pos=flat_pos_t,
        flat_copy=flat_copy_t,
        flat_target=ids_t[copy_sample_t[flat_copy_t], flat_pos_t],
        mask_id=prep.mask_id,
        mean=reduction == "mean",
        scale=torch.from_numpy(prep.n_tokens[copy_sample] / copy_l).float().to(dev) if prep.per_sequence else None,
        **masking,
    )

    rows_for, policy = _batch_rule(model, dev, batch_size, token_budget, copy_len, copy_l, parts is None, precision)
    queue = deque(_batches(n_copies, rows_for))
    n_planned = len(queue)
    out = torch.empty(n_copies, dtype=torch.float32, device=dev)
    n_flat = int(pos_off[-1])
    token_out = [torch.empty(n_flat, dtype=dtype_, device=dev) for dtype_ in (torch.float32,) * 3 + (torch.bool,)]
    t0 = last = time.perf_counter()
    log.info(
        "scoring %d samples (%d masked copies, %d batches) on %s, %s%s",
        n,
        n_copies,
        n_planned,
        dev,
        dtype,
        "" if parts else " with full logits",
    )
    cap, halvings, n_run, largest = None, 0, 0, 0
    with torch.inference_mode(), _autocast(dev, precision):
        while queue:
            a, b = queue.popleft()
            if cap is not None and b - a > cap:
                queue.extendleft(reversed([(s, min(b, s + cap)) for s in range(a, b, cap)]))
                continue
            oom = False
            try:
                out[a:b], evidence = _score_batch(inp, a, b)
                for target, values in zip(token_out, evidence):
                    target[int(pos_off[a]) : int(pos_off[b])] = values
            except torch.cuda.OutOfMemoryError as exc:  # torch.OutOfMemoryError (CPU allocations too)
                if b - a == 1:
                    raise UserError(
                        f"out of memory on {dev} with a single sequence of {int(copy_len[a])} tokens; "
                        "free the device or score on a larger one"
                    ) from exc
                oom = True
            if oom:  # outside the except block, so the failed batch's tensors are released
                cap = max(1, (b - a) // 2)
                halvings += 1
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                log.warning(
                    "out of memory on %s with %d sequences of %d tokens; retrying with batches of at most %d",
                    dev,
                    b - a,
                    int(copy_len[b - 1]),
                    cap,
                )
                queue.appendleft((a, b))
                continue
            n_run += 1
            largest = max(largest, b - a)
            now = time.perf_counter()
            if now - last >= progress_seconds and queue:
                last = now
                done = int(np.searchsorted(sample_end, b, side="right"))
                log.info("scored %d/%d samples, %.1f samples/s on %s", done, n, done / (now - t0), dev)
    values = out.double().cpu().numpy()
    tokens = [t.cpu().numpy() for t in token_out]
    per, evidence = [None] * n, [None] * n
    for j, i in enumerate(order):
        per[i] = values[copy_start[j] : sample_end[j]]
        fa, fb = int(pos_off[copy_start[j]]), int(pos_off[sample_end[j]])
        evidence[i] = dict(zip(("logp", "mean", "var", "top1"), (t[fa:fb] for t in tokens)))
    run = dict(
        n_sequences=int(n_copies),
        n_tokens=int(copy_len.sum()),
        n_scored_tokens=int(copy_l.sum()),
        n_batches=n_run,
        dtype=dtype,
        batch_size=int(largest),
        batch_policy=policy,
        oom_halvings=halvings,
    )
    run["evidence"] = evidence
    return per, run


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
    mask_count: str = "ceil",
    truncate: bool = False,
    schedule: Mapping | None = None,
) -> pd.DataFrame:
    """The deliberately simple reference: one sample, one pattern, one full forward at a time."""
    schedule = _check_params(energy, k, seed, reduction, mask_count=mask_count, schedule=schedule)
    model_name = model_name or _default_name(model)
    prep = _prepare(model, tokenizer, samples, energy, k, seed, mask_count, truncate, schedule, reduction)
    dev = _model_device(model)
    per_pattern, evidence = [], []
    with torch.inference_mode(), eval_mode(model):
        for i, (ids, patterns) in enumerate(zip(prep.ids, prep.patterns)):
            original = torch.tensor(ids, device=dev).unsqueeze(0)
            values, tokens = [], {"logp": [], "mean": [], "var": [], "top1": []}
            for j, pattern in enumerate(patterns):
                pos = torch.tensor(pattern, device=dev)
                masked = original.clone()
                masked[0, torch.tensor(prep.masked(i, j), device=dev)] = prep.mask_id
                logits = model(masked).logits[0]
                ce = F.cross_entropy(logits[pos].float(), original[0, pos], reduction="none")
                value = ce.mean() if reduction == "mean" else ce.sum()
                values.append(float(value * prep.n_tokens[i] / len(pattern) if prep.per_sequence else value))
                for key, value in zip(tokens, _evidence(logits[pos], original[0, pos])):
                    tokens[key].extend(value.cpu().numpy().tolist())
            per_pattern.append(np.array(values, dtype=np.float64))
            evidence.append(tokens)
    return _frame(prep, per_pattern, evidence, energy, seed, model_name)


# --------------------------------------------------------------------------- files


#: samples scored and written per step of `score_file`: its peak memory stays flat in the corpus size
FILE_CHUNK_SAMPLES = 2048


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
    tokenizer: str | None = None,
    mask_count: str = "ceil",
    precision: str = "auto",
    truncate: bool = False,
    chunk_samples: int = FILE_CHUNK_SAMPLES,
    schedule: Mapping | None = None,
) -> int:
    """Read samples, load the model (with `tokenizer` when it is not the model's own; see
    `load_mlm`), score, and write `out` (Parquet) atomically; returns the number of rows.

    Samples are scored and written `chunk_samples` at a time (one Parquet row group each), so
    the scores and per-token evidence of a large corpus are never all in memory. Masks depend
    on (seed, sample_id, k) only, so the chunking changes no score."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schedule = _check_params(energy, k, seed, reduction, batch_size, mask_count, precision, schedule)
    df = read_samples(samples)
    mdl, tok = load_mlm(model, device, tokenizer=tokenizer)
    local = Path(str(model)).expanduser()
    # default label: a local directory's name, or the hub id as given
    label = model_name or (local.resolve().name if local.is_dir() else str(model))
    step = max(1, int(chunk_samples))
    with atomic_path(out) as tmp:
        writer = None
        try:
            for start in range(0, max(len(df), 1), step):
                part = score_samples(
                    mdl,
                    tok,
                    df.iloc[start : start + step],
                    energy=energy,
                    k=k,
                    seed=seed,
                    reduction=reduction,
                    batch_size=batch_size,
                    device=None,
                    model_name=label,
                    mask_count=mask_count,
                    precision=precision,
                    truncate=truncate,
                    schedule=schedule,
                )
                table = pa.Table.from_pandas(part, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table.cast(writer.schema))
        finally:
            if writer is not None:
                writer.close()
    log.info("wrote %d rows to %s", len(df), out)
    return len(df)


__all__ = [
    "ENERGY_KINDS",
    "SCORE_COLUMNS",
    "REDUCTIONS",
    "ScoringStats",
    "batch_size_for_memory",
    "n_masked",
    "score_file",
    "score_samples",
    "score_samples_oracle",
    "sequence_bytes",
]
