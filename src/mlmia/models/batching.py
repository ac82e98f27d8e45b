"""What every masked-LM pass of the library shares: token id rows padded into one batch, and
the model in eval mode for the pass."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np


def pad_rows(rows: Sequence[np.ndarray], value: int):
    """The rows (token ids or labels) as one (n, longest) long tensor, each padded on the right
    with `value`."""
    import torch

    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.from_numpy(np.asarray(row, dtype=np.int64))
    return out


def padded_batch(rows: Sequence[np.ndarray], pad_id: int):
    """(input ids, attention mask): the rows padded with `pad_id`, the mask 1 on each row's own tokens."""
    import torch

    ids = pad_rows(rows, pad_id)
    lengths = torch.tensor([len(r) for r in rows])
    return ids, (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()


@contextlib.contextmanager
def eval_mode(model):
    """The model in eval mode (no dropout) inside the block, its own mode restored after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
