"""The scorer's fast path: the masked copies of all samples sorted by length and cut into
batches (under a batch size, a token budget, or the free GPU memory), the encoder run once per
batch and the LM head only on the masked positions, per-token evidence from the same logits;
inference mode, bf16/fp16 autocast on CUDA, fp32 on CPU, cross-entropy in fp32; a batch that runs
out of memory is halved and retried. `mlmia.scoring.energy.score_samples` calls `run_fast`."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.models.loading import mlm_parts
from mlmia.scoring.memory import batch_size_for_memory
from mlmia.scoring.prepared import Prepared

log = get_logger(__name__)

# Tokens (padded rows x length) per forward pass when no batch size is given (CUDA: used
# only when the free memory cannot be read).
DEFAULT_TOKEN_BUDGET = {"cpu": 4096, "cuda": 65536}


def cut_batches(n: int, rows_for) -> list[tuple[int, int]]:
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


def compute_dtype(dev: torch.device, precision: str) -> torch.dtype:
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


def compute_autocast(dev: torch.device, precision: str):
    """Autocast to the compute dtype (matmuls in it; softmax, norms and the cross-entropy stay
    fp32), or nothing for fp32. bf16 on a CPU without native bf16 (AVX-512 BF16, AMX) runs but
    slower than fp32: logged."""
    dtype = compute_dtype(dev, precision)
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


def batch_rule(model, dev, batch_size, token_budget, copy_len, copy_l, full_logits, precision):
    """(rows_for(i), policy text) for `cut_batches`."""
    if batch_size is not None:
        return (lambda i: int(batch_size)), f"batch size {int(batch_size)}"
    free = _free_memory(dev) if dev.type == "cuda" and token_budget is None else None
    if free is None:
        budget = int(token_budget or DEFAULT_TOKEN_BUDGET.get(dev.type, DEFAULT_TOKEN_BUDGET["cpu"]))
        return (lambda i: max(1, budget // int(copy_len[i]))), f"token budget {budget}"
    dtype_bytes = torch.empty((), dtype=compute_dtype(dev, precision)).element_size()
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
        str(compute_dtype(dev, precision)).replace("torch.", ""),
        rows_for(last),
        int(copy_len[last]),
        rows_for(0),
        int(copy_len[0]),
    )
    return rows_for, f"free memory {free / 2**30:.1f} GiB"


@dataclass
class _Inputs:
    """Device tensors of one `run_fast` call, in sorted copy order."""

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


def token_evidence(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
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
    evidence = token_evidence(logits, inp.flat_target[pa:pb])
    vals = torch.zeros(b - a, dtype=torch.float32, device=dev).index_add_(0, r, -evidence[0])
    if inp.mean:
        vals = vals / inp.copy_l[a:b]
    elif inp.scale is not None:
        vals = vals * inp.scale[a:b]
    return vals, evidence


def run_fast(
    model, prep: Prepared, reduction, batch_size, token_budget, dev, progress_seconds, precision="auto"
) -> tuple[list[np.ndarray], dict]:
    """(per-pattern energies of each sample, run facts for ScoringStats)."""
    n = len(prep.ids)
    dtype = str(compute_dtype(dev, precision)).replace("torch.", "")
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

    rows_for, policy = batch_rule(model, dev, batch_size, token_budget, copy_len, copy_l, parts is None, precision)
    queue = deque(cut_batches(n_copies, rows_for))
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
    with torch.inference_mode(), compute_autocast(dev, precision):
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
