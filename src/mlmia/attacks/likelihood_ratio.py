"""(B) The likelihood-ratio attack with a reference model (the paper's attack)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class LikelihoodRatio(Attack):
    """L(s) = E(s; θ) - E(s; θ_R): the target's energy calibrated by a reference model's.

    Masked language models as energy-based models: the log partition functions cancel to a
    constant, so L is the log-likelihood ratio up to a constant (Mireshghallah et al. 2022,
    Eq. 1 and Section 3). L(s) <= t means "member". Its test (`tests/test_attack_zoo.py`,
    reference definitions) follows MIMIR's reference-model attack (iamgroot42/mimir,
    ``mimir/attacks/reference.py``: the reference's loss minus the target's, higher meaning
    "member", i.e. -L, our `member_score`); the losses here are the masked energies (see
    `mlmia.attacks.loss`)."""

    name = "likelihood_ratio"
    label = "(B) likelihood ratio"
    inputs = {"target": ("energy",), "reference": ("energy",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return table["target_energy"].to_numpy(dtype=float) - table["reference_energy"].to_numpy(dtype=float)
