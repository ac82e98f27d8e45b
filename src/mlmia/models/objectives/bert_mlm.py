"""BERT's masked-language-model objective (Devlin, Chang, Lee and Toutanova, "BERT: Pre-training
of deep bidirectional transformers for language understanding", NAACL 2019, section 3.1): each
non-special token is chosen with probability `mlm_probability` (0.15); of the chosen, 80%
become [MASK], 10% a random token, 10% stay; the loss is the mean cross-entropy over the chosen
positions (of the whole batch in the plain loop; of each row for DP-SGD's per-row losses)."""

from __future__ import annotations

from mlmia.models.objectives.base import MaskedBatch, Objective
from mlmia.models.tokenizer import SPECIAL_TOKENS


def mlm_mask(
    input_ids,
    special_mask,
    vocab_size: int,
    mask_token_id: int,
    generator,
    mlm_probability: float,
    first_normal_id: int = len(SPECIAL_TOKENS),
):
    """Standard BERT masking: choose each non-special token with probability `mlm_probability`;
    of those, 80% become [MASK], 10% a random token, 10% stay. Returns (masked_ids, labels) with
    labels -100 at unchosen positions. Guarantees at least one chosen token per sequence."""
    import torch

    ids = input_ids.clone()
    probs = torch.full(ids.shape, float(mlm_probability))
    probs.masked_fill_(special_mask, 0.0)
    chosen = torch.bernoulli(probs, generator=generator).bool()
    # a sequence with no chosen token: choose one random non-special position
    empty = ~chosen.any(dim=1)
    if empty.any():
        scores = torch.rand(ids.shape, generator=generator).masked_fill_(special_mask, -1.0)
        pick = scores.argmax(dim=1)
        rows = empty.nonzero(as_tuple=True)[0]
        chosen[rows, pick[rows]] = ~special_mask[rows, pick[rows]]
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(ids.shape, generator=generator)
    to_mask = chosen & (u < 0.8)
    to_random = chosen & (u >= 0.8) & (u < 0.9)
    ids[to_mask] = mask_token_id
    rand_ids = torch.randint(first_normal_id, vocab_size, ids.shape, generator=generator)
    ids[to_random] = rand_ids[to_random]
    return ids, labels


class BertMLM(Objective):
    """BERT's masking (`mlm_mask`) and the mean cross-entropy over the masked positions."""

    name = "bert_mlm"

    def __init__(self, vocab_size: int, mask_token_id: int, mlm_probability: float) -> None:
        self.vocab_size = int(vocab_size)
        self.mask_token_id = int(mask_token_id)
        self.mlm_probability = float(mlm_probability)

    @classmethod
    def from_settings(cls, settings: dict, tokenizer) -> BertMLM:
        return cls(len(tokenizer), tokenizer.mask_token_id, settings["mlm_probability"])

    def mask(self, input_ids, special_mask, generator) -> MaskedBatch:
        ids, labels = mlm_mask(
            input_ids, special_mask, self.vocab_size, self.mask_token_id, generator, self.mlm_probability
        )
        return MaskedBatch(ids, labels)

    def loss(self, logits, labels, weights, rows: int):  # noqa: ARG002 (unweighted; the mean needs no row count)
        import torch.nn.functional as F

        return F.cross_entropy(logits, labels, reduction="mean")

    def row_loss(self, logits, labels, weights):  # noqa: ARG002 (unweighted)
        import torch.nn.functional as F

        ce = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
        return ce.sum(dim=1) / (labels != -100).sum(dim=1).clamp(min=1)
