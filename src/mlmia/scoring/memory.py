"""How many sequences fit in one forward pass on a GPU: the memory of one sequence in an
inference-mode batch, estimated from the model's config (`sequence_bytes`), and the batch size
that fits in the free memory (`batch_size_for_memory`, used by `mlmia.scoring.energy`)."""

from __future__ import annotations

import math

from mlmia.core.errors import UserError

# Batch size chosen from free GPU memory: at most this many rows, using this share of it.
MAX_MEMORY_BATCH = 4096
MEMORY_HEADROOM = 0.8


def _config_value(config, names: tuple[str, ...], default=None):
    for name in names:
        value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
        if value:
            return int(value)
    if default is None:
        raise UserError(f"model config: none of {', '.join(names)} is set; cannot estimate the memory of a batch")
    return int(default)


def sequence_bytes(
    model_config, seq_len: int, dtype_bytes: int, masked_per_seq: int | None = None, *, full_logits: bool = False
) -> int:
    """Estimated peak GPU memory (bytes) of one sequence of `seq_len` tokens in an inference-mode batch.

    With H = hidden size, I = intermediate size, A = attention heads, V = vocabulary,
    d = `dtype_bytes` (autocast dtype), m = masked positions (default ceil(0.15 (seq_len - 2))):

        encoder = seq_len * ((6 H + I) d + 2 H * 4) + A seq_len^2 (d + 4)
        head    = m (2 H * 4 + V (d + 8))                       (LM head on masked positions)
                  + seq_len V d                                  (full logits: no head split)

    The encoder term is the working set of one layer (q, k, v, context, attention output
    and the intermediate activation in d; the fp32 residual stream twice; attention scores
    in d and their fp32 softmax, as if materialised). In inference mode no activation is
    kept across layers, so the number of layers does not multiply it (the weights are
    already out of the free memory). The head term: logits in d, their fp32 copy and the
    cross-entropy's fp32 log-softmax per masked position.
    """
    hidden = _config_value(model_config, ("hidden_size", "dim", "d_model"))
    inter = _config_value(model_config, ("intermediate_size", "hidden_dim", "d_ff"), 4 * hidden)
    heads = _config_value(model_config, ("num_attention_heads", "n_heads"), 1)
    vocab = _config_value(model_config, ("vocab_size",))
    seq_len, d = max(1, int(seq_len)), int(dtype_bytes)
    m = max(1, math.ceil(0.15 * max(1, seq_len - 2))) if masked_per_seq is None else max(1, int(masked_per_seq))
    encoder = seq_len * ((6 * hidden + inter) * d + 2 * hidden * 4) + heads * seq_len * seq_len * (d + 4)
    head = m * (2 * hidden * 4 + vocab * (d + 8))
    if full_logits:
        head += seq_len * vocab * d
    return int(encoder + head)


def batch_size_for_memory(
    free_bytes: int,
    model_config,
    seq_len: int,
    dtype_bytes: int,
    *,
    masked_per_seq: int | None = None,
    full_logits: bool = False,
    headroom: float = MEMORY_HEADROOM,
    max_batch: int = MAX_MEMORY_BATCH,
) -> int:
    """Sequences of `seq_len` tokens per forward pass that fit in `headroom` x `free_bytes`.

    floor(headroom * free_bytes / sequence_bytes(...)), clamped to [1, max_batch]; see
    `sequence_bytes` for the estimate. `model_config`: a transformers config or a dict.
    """
    if max_batch < 1:
        raise UserError(f"max_batch must be >= 1, got {max_batch}")
    per = sequence_bytes(model_config, seq_len, dtype_bytes, masked_per_seq, full_logits=full_logits)
    rows = int(max(0.0, float(headroom)) * max(0, int(free_bytes)) // per)
    return max(1, min(int(max_batch), rows))
