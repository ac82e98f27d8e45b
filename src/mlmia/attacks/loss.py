"""(A) The loss attack: the target model's energy alone (Yeom et al. 2018; the paper's baseline)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class Loss(Attack):
    """E(s; θ): a member was trained on, so the target's energy of it is low.

    Mireshghallah et al. 2022, Section 3 baseline (A); Yeom et al., "Privacy risk in machine
    learning", CSF 2018."""

    name = "loss"
    label = "(A) loss"
    inputs = {"target": ("energy",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return table["target_energy"].to_numpy(dtype=float)
