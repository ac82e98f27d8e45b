"""(B) on the normalized energy: the paper's appendix variant (Table 11)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class LikelihoodRatioNormalized(Attack):
    """L(s) with the normalized energy, whatever energy kind the experiment uses: every
    content position masked alone, the mean cross-entropy over positions (a
    pseudo-log-likelihood per token), target minus reference (Mireshghallah et al. 2022,
    Appendix, Table 11). Lower means "member"."""

    name = "likelihood_ratio_normalized"
    label = "(B) likelihood ratio, normalized energy"
    inputs = {"target": ("energy@normalized",), "reference": ("energy@normalized",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        target = table["target_normalized_energy"].to_numpy(dtype=float)
        return target - table["reference_normalized_energy"].to_numpy(dtype=float)
