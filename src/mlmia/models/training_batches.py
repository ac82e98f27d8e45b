"""The batches of the masked-LM training loop (`mlmia.models.training.train_mlm`): which lines
each step trains on, and the one batch builder every step uses.

- `length_grouped_batches`: the plain step's batches of lines (shuffled, grouped by length);
- `pack_lines`: one epoch of packed blocks (`pack: true`);
- `BatchBuilder`: a step's token-id rows made a training batch: the random left crop
  (`crop_prob`, `crop_max`), padding, the objective's masking and the random position offset
  (`position_offset`), drawing from the run's numpy stream (crop) and its torch generator
  (masks, then offsets), in that order. DP-SGD's batches (Opacus' Poisson sampling) are drawn
  in `mlmia.defences.dp_sgd` and built here too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlmia.models.batching import pad_rows
from mlmia.models.objectives import MaskedBatch, Objective


def length_grouped_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Length-grouped random batches: shuffle, sort within chunks of 50 batches, shuffle batches."""
    order = rng.permutation(len(lengths))
    chunk = batch_size * 50
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def pack_lines(lines: list[np.ndarray], block: int, rng: np.random.Generator, sep_id: int) -> list[np.ndarray]:
    """One epoch of packed blocks (the `group_texts` recipe of transformers' run_mlm): the lines,
    in a fresh random order, each followed by [SEP], concatenated and cut into blocks of `block`
    tokens. Every sentence is trained, at varying positions and with varying left context, so the
    model does not learn "a sentence starts at position 1" and scores stand-alone sentences fairly."""
    order = rng.permutation(len(lines))
    sep = np.array([sep_id], dtype=np.int64)
    stream = np.concatenate([np.concatenate([lines[i], sep]) for i in order])
    return [stream[i : i + block] for i in range(0, len(stream), block)]


class BatchBuilder:
    """A step's rows of token ids (each [CLS] ... [SEP]) made one training batch (module
    docstring). `rng`: the run's numpy generator (the crops); `gen`: its torch generator (the
    objective's masks, then the offsets). `row_positions`: give every batch its position ids,
    zeros-based when the run has no offset (DP-SGD: Opacus needs a batch dimension on every
    embedding input); otherwise a run without offset gets None (the model's own positions)."""

    def __init__(self, objective: Objective, tokenizer, cfg: dict, rng: np.random.Generator, gen,
                 row_positions: bool = False) -> None:  # fmt: skip
        import torch

        self.objective = objective
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))
        self.pad_id = tokenizer.pad_token_id
        self.crop_prob, self.crop_max = float(cfg["crop_prob"]), max(1, int(cfg["crop_max"]))
        self.max_offset = int(cfg["position_offset"])
        self.rng, self.gen = rng, gen
        self.row_positions = row_positions

    def __call__(self, rows: Sequence[np.ndarray]) -> tuple[MaskedBatch, object, object]:
        """(the masked batch, the attention mask, the position ids or None), all on the CPU."""
        import torch

        rows = self.cropped(rows)
        ids = pad_rows(rows, self.pad_id)
        attn = (ids != self.pad_id).long()
        batch = self.objective.mask(ids, torch.isin(ids, self.special_ids), self.gen)
        if self.max_offset:  # random absolute offset per sequence: position-robust models
            off = torch.randint(0, self.max_offset + 1, (len(rows), 1), generator=self.gen)
        elif self.row_positions:
            off = torch.zeros((len(rows), 1), dtype=torch.long)
        else:
            return batch, attn, None
        return batch, attn, torch.arange(ids.shape[1]).unsqueeze(0) + off

    def cropped(self, rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each row, with probability `crop_prob`, without its first 1..`crop_max` tokens after
        [CLS] (at least 4 tokens kept after it), as packed training cuts lines at arbitrary points."""
        rows = list(rows)
        if self.crop_prob <= 0:
            return rows
        cut = self.rng.integers(1, self.crop_max + 1, size=len(rows))
        use = self.rng.random(len(rows)) < self.crop_prob
        return [np.concatenate([u[:1], u[1 + min(c, max(0, len(u) - 5)) :]]) if k else u
                for u, c, k in zip(rows, cut, use)]  # fmt: skip
