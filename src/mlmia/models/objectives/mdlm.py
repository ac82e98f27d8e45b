"""The masked-diffusion objective (MDLM: Sahoo, Arriola, Schiff, Gokaslan, Marroquin, Chiu, Rush and
Kuleshov, "Simple and Effective Masked Diffusion Language Models", NeurIPS 2024; LLaDA: Nie, Zhu,
You, Zhang, Ou, Hu, Zhou, Lin, Wen and Li, "Large Language Diffusion Models", 2025): per sequence
a masking ratio t ~ U(`EPS`, 1), each non-special token masked with probability t, every masked
token replaced by [MASK]; the sequence's loss is the sum of the masked tokens' cross-entropies
weighted by 1/t and divided by its length (its non-special tokens), the negative ELBO per token;
the batch's, the mean over its rows. A model trained so predicts masked tokens at every ratio.

As LLaDA's pre-training code draws it: t = (1 - EPS) u + EPS with u ~ U(0, 1), Bernoulli(t)
masking, no token forced (a row that draws no masked token adds 0 to the batch's loss). The
weights travel per position in `MaskedBatch.weights`: 1 / (t n) at the masked positions of a
row of n non-special tokens. DP-SGD does not take this objective yet (`supports_dp`): its 1/t
weights make a row's gradient up to 1/EPS times larger, which per-row clipping has not been
checked against.
"""

from __future__ import annotations

from mlmia.models.objectives.base import MaskedBatch, Objective

#: the smallest masking ratio (LLaDA's eps): 1/t stays at most 1000
EPS = 1e-3


class Mdlm(Objective):
    """Masking at a ratio t ~ U(EPS, 1) per sequence; the loss Σ_masked CE / (t n) per row."""

    name = "mdlm"
    supports_dp = False

    def __init__(self, mask_token_id: int, eps: float = EPS) -> None:
        self.mask_token_id = int(mask_token_id)
        self.eps = float(eps)

    @classmethod
    def from_settings(cls, settings: dict, tokenizer) -> Mdlm:  # noqa: ARG003 (no setting of its own)
        return cls(tokenizer.mask_token_id)

    def mask(self, input_ids, special_mask, generator) -> MaskedBatch:
        import torch

        rows = input_ids.shape[0]
        t = (1.0 - self.eps) * torch.rand(rows, 1, generator=generator) + self.eps
        chosen = (torch.rand(input_ids.shape, generator=generator) < t) & ~special_mask
        n = (~special_mask).sum(dim=1, keepdim=True).clamp(min=1)
        ids = torch.where(chosen, torch.full_like(input_ids, self.mask_token_id), input_ids)
        labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
        weights = torch.where(chosen, 1.0 / (t * n), torch.zeros_like(t))
        return MaskedBatch(ids, labels, weights)

    def loss(self, logits, labels, weights, rows: int):
        import torch.nn.functional as F

        ce = F.cross_entropy(logits, labels, reduction="none")
        return (ce * weights).sum() / max(1, int(rows))

    def row_loss(self, logits, labels, weights):
        import torch.nn.functional as F

        ce = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
        return (ce * weights).sum(dim=1)
