"""The zlib attack: the target's energy relative to the text's zlib entropy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.core.errors import UserError, shown_id


class Zlib(Attack):
    """E(s; θ) / zlib(s): the target's energy divided by the zlib-compressed length of the text.

    Carlini, Tramèr, Wallace, Jagielski, Herbert-Voss, Lee, Roberts, Brown, Song, Erlingsson,
    Oprea and Raffel, "Extracting Training Data from Large Language Models", USENIX Security
    2021 (the "zlib" membership metric: the ratio of the model's log-perplexity to the zlib
    entropy of the text). Here the log-perplexity is the energy (mean cross-entropy per
    masked token, `target_energy`) and the zlib entropy the compressed length in bytes
    (`mlmia.attacks.table.zlib_bytes`: zlib's default level, UTF-8). Text that is easy to
    compress is "expected" to be easy for the model, so it is not taken for a member on that
    ground alone. Lower means "member". Its test (`tests/test_attack_zoo.py`, reference
    definitions) follows MIMIR's zlib attack (iamgroot42/mimir, ``mimir/attacks/zlib.py``: the
    loss over ``len(zlib.compress(bytes(text, "utf-8")))``), the loss being the masked energy
    (see `mlmia.attacks.loss`)."""

    name = "zlib"
    label = "zlib ratio"
    inputs = {"target": ("energy",), "sample": ("zlib_bytes",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        compressed = table["sample_zlib_bytes"].to_numpy(dtype=float)
        bad = ~(compressed > 0)
        if bad.any():
            row = table.iloc[int(np.flatnonzero(bad)[0])]
            raise UserError(
                f"attack zlib: sample {shown_id(row.get('sample_id', row.name), quoted=False)}: zlib length is not positive"
            )
        return table["target_energy"].to_numpy(dtype=float) / compressed
