"""(A) The loss attack: the target model's energy alone (Yeom et al. 2018; the paper's baseline)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class Loss(Attack):
    """E(s; θ): a member was trained on, so the target's energy of it is low.

    Mireshghallah et al. 2022, Section 3 baseline (A); Yeom et al., "Privacy risk in machine
    learning", CSF 2018. Its test (`tests/test_attack_zoo.py`, reference definitions) follows
    MIMIR's LOSS attack (iamgroot42/mimir, ``mimir/attacks/loss.py``: the mean negative
    log-likelihood of the text's tokens). For a masked language model the tokens are the
    masked positions, each predicted from the unmasked rest of the text rather than from a left
    context: the energy, the mean over K masking patterns of the mean cross-entropy of a
    pattern's l masked tokens, which is the mean over all K l of them."""

    name = "loss"
    label = "(A) loss"
    inputs = {"target": ("energy",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return table["target_energy"].to_numpy(dtype=float)
