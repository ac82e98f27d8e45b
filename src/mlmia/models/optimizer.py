"""The optimiser of every model the library trains (the masked language models, plain and
DP-SGD, and the d-exposure tagger): AdamW with a linear warm-up and a linear decay."""

from __future__ import annotations


def adamw_with_schedule(
    model, *, lr: float, weight_decay: float, warmup_ratio: float, total_steps: int, lr_decay: bool = True
):
    """AdamW (Loshchilov and Hutter, "Decoupled weight decay regularization", ICLR 2019) and its
    learning-rate schedule, as (optimizer, scheduler); the scheduler steps once per optimiser step.

    Two parameter groups, in `model.named_parameters()` order: the weight matrices with
    `weight_decay`, then the biases, LayerNorm weights and other 1-d parameters without (BERT's
    recipe). The rate: linear warm-up over warmup = round(warmup_ratio x total_steps) steps
    (lr x (step + 1) / warmup at step 0-based `step`), then linear decay to 0 at `total_steps`;
    with `lr_decay` False it stays at lr after the warm-up."""
    import torch

    decayed, not_decayed = [], []
    for name, p in model.named_parameters():
        (not_decayed if p.ndim < 2 or "LayerNorm" in name or name.endswith("bias") else decayed).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": float(weight_decay)}, {"params": not_decayed, "weight_decay": 0.0}],
        lr=float(lr),
    )
    warmup = int(round(float(warmup_ratio) * total_steps))

    def rate(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if not lr_decay:
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
