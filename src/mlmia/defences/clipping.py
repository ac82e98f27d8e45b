"""How DP-SGD finds and clips each unit's gradient (`mlmia.defences.dp_sgd`).

The loss per unit is the objective's loss of each line alone (`per_unit_loss`): the LM head runs
on each row's masked positions, gathered per row, so the rows stay the batch dimension.

How each unit's gradient is clipped (the `dp.clipping` setting, `clipping_mode`): ``per_sample``
materialises every unit's gradient (Opacus' hooks) and clips it; ``ghost`` (Li, Tramèr, Liang
and Hashimoto, "Large language models can be strong differentially private learners", ICLR 2022;
Bu, Mao and Xu, NeurIPS 2022; Opacus' `grad_sample_mode="ghost"`) finds each unit's gradient
norm from the layers' activations and output gradients without forming the gradient, then
backpropagates the rows' losses weighted by their clipping factors, which gives the sum of
clipped gradients: the same sum (up to float rounding; tests/test_dp.py) at a fraction of the
memory and time. Ghost clipping refuses a parameter two layers read, so it needs BERT's tied
word embeddings frozen (`freeze: [word_embeddings]`, the model setting), and it never forms a
line's gradient, so patient units (the mean of a patient's lines' gradients) keep the
per-sample path. `auto` (default) takes ghost wherever it applies. A ghost-clipped batch goes
through in chunks of lines of similar length (`length_chunks`, `ghost_clipped_sum`).
"""

from __future__ import annotations

import numpy as np

from mlmia.core.errors import UserError
from mlmia.models.objectives import MaskedBatch, Objective

#: how each unit's gradient norm is found (module docstring): per-sample gradients (Opacus'
#: grad_sample_mode "hooks") or ghost clipping ("ghost")
CLIPPINGS = ("per_sample", "ghost")


def unregister_head_bias(model):
    """BERT's LM head holds its output bias twice, as `decoder.bias` and as its own `bias` (one
    tensor). Opacus gives a parameter a per-sample gradient (or norm) per module that holds it,
    and ghost clipping refuses one that two modules hold; so while DP-SGD runs the head's own name
    is removed, and the decoder's hook alone accounts for the bias. Returns the function that
    puts the name back on the trained model (before it is saved)."""
    head = model.cls.predictions
    bias = head._parameters.pop("bias", None)

    def restore(trained) -> None:
        if bias is not None:
            trained.cls.predictions.bias = trained.cls.predictions.decoder.bias

    return restore


def clipping_mode(dp: dict, model) -> str:
    """How each unit's gradient norm is found (`CLIPPINGS`): `dp.clipping`, or for auto ghost
    clipping wherever it applies, i.e. unit sample and the word embeddings, which BERT ties to
    the output projection, frozen (`freeze: [word_embeddings]`); per-sample gradients otherwise."""
    word = model.bert.embeddings.word_embeddings.weight
    tied_trained = word.requires_grad and word is model.cls.predictions.decoder.weight
    if dp["clipping"] == "ghost" and tied_trained:
        raise UserError("model config: dp.clipping ghost needs the tied word embeddings frozen "
                        "(freeze: [word_embeddings]): ghost clipping refuses a parameter two layers read")  # fmt: skip
    if dp["clipping"] != "auto":
        return dp["clipping"]
    return "per_sample" if dp["unit"] == "patient" or tied_trained else "ghost"


def per_unit_loss(model, objective: Objective, batch: MaskedBatch, attention_mask, position_ids):
    """Each row's loss (`Objective.row_loss`; bert_mlm: the mean cross-entropy over its masked
    positions, labels != -100). The LM head runs on each row's masked positions only (gathered to
    the longest row's count, the rest padded with label -100): the rows stay the batch dimension,
    so a row's loss depends on that row alone and Opacus' per-sample hooks see one row per
    sample, at ~1/7 of the head's FLOPs."""
    import torch

    hidden = model.bert(
        input_ids=batch.input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        token_type_ids=torch.zeros_like(batch.input_ids),
    ).last_hidden_state
    masked = batch.labels != -100
    width = max(1, int(masked.sum(dim=1).max()))
    # masked positions first in each row (a stable sort keeps their order)
    order = torch.argsort((~masked).to(torch.int8), dim=1, stable=True)[:, :width]
    picked = hidden.gather(1, order.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
    logits = model.cls(picked).float()
    weights = None if batch.weights is None else batch.weights.gather(1, order)
    return objective.row_loss(logits, batch.labels.gather(1, order), weights)


def pool_by_unit(grad_sample, owner, weights, n_units: int):
    """Per-unit gradients from per-row ones: row r adds weights[r] x its gradient to unit owner[r]."""
    shape = (n_units, *grad_sample.shape[1:])
    scaled = grad_sample * weights.to(grad_sample.dtype).view(-1, *([1] * (grad_sample.dim() - 1)))
    return grad_sample.new_zeros(shape).index_add_(0, owner, scaled)


def unit_norms(params):
    """Each unit's L2 gradient norm over the model's parameters (what DP-SGD clips)."""
    import torch

    return torch.stack([p.grad_sample.reshape(len(p.grad_sample), -1).norm(2, dim=-1) for p in params],
                       dim=1).norm(2, dim=1)  # fmt: skip


#: tokens (rows x padded width) per chunk of a ghost-clipped batch
CHUNK_TOKENS = 8192


def length_chunks(lengths, max_tokens: int = CHUNK_TOKENS) -> list:
    """The rows of a batch in chunks of similar length, longest first, each holding at most
    `max_tokens` tokens once padded to its own longest row (at least one row)."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    chunks, start = [], 0
    while start < len(order):
        width = max(1, int(lengths[order[start]]))
        stop = start + max(1, max_tokens // width)
        chunks.append(order[start:stop])
        start = stop
    return chunks


def ghost_clipped_sum(gsm, optim, trained, objective, batch, attn, pos, dev, max_tokens: int = CHUNK_TOKENS):
    """Ghost clipping of one Poisson batch: each parameter's `grad` becomes the sum of the rows'
    clipped gradients. The rows go through in chunks of similar length, each cut to its own
    longest row (a Poisson batch padded to its longest row wastes about half its tokens), the
    chunks' clipped sums added up: a row's loss, norm and clipping depend on that row alone, so
    the sum is the whole batch's. Opacus' two backward passes per chunk (the rows' norms, then
    their losses times their clipping factors) zero the gradients in between, so each chunk's
    sum is put aside before the next. Returns (the batch's mean row loss, each row's norm)."""
    import torch
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping

    lengths = attn.sum(dim=1)
    total = [torch.zeros_like(p) for p in trained]
    losses, norms = torch.zeros(len(lengths)), torch.zeros(len(lengths))
    for rows in length_chunks(lengths.numpy(), max_tokens):
        rows_t = torch.as_tensor(rows)
        width = int(lengths[rows_t].max())
        part = batch.rows(rows_t, width)
        per_row = per_unit_loss(gsm._module, objective, part.to(dev), attn[rows_t, :width].to(dev),
                                pos[rows_t, :width].to(dev))  # fmt: skip
        DPTensorFastGradientClipping(gsm, optim, per_row, "mean").backward()
        losses[rows_t] = per_row.detach().cpu()
        norms[rows_t] = gsm.per_sample_gradient_norms.detach().cpu()
        for acc, p in zip(total, trained):
            acc += p.grad
    for acc, p in zip(total, trained):
        p.grad = acc
    return losses.mean(), norms
