"""The likelihood-ratio attack on the PLL-word-l2r energy (whole words scored left to right)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class PllWordL2r(Attack):
    """L(s) = E_w(s; θ) − E_w(s; θ_R) on the PLL-word-l2r energy E_w.

    Kauf and Ivanova, "A Better Way to Do Masked Language Model Scoring", ACL 2023: the
    pseudo-log-likelihood scores each token of a word split into several tokens with the
    tokens of the same word to its right masked as well ("PLL-word-l2r"), so that a word's
    later pieces do not give its earlier ones away (a plain PLL inflates such words); the
    energy is the mean cross-entropy per scored token under that masking (energy kind
    ``pll_word_l2r``, column spec "energy@pll_word_l2r"). The attack is the paper's
    likelihood ratio (Mireshghallah et al. 2022, attack B: target minus reference energy)
    with that energy for both models. Lower means "member"."""

    name = "pll_word_l2r"
    label = "likelihood ratio (PLL-word-l2r)"
    inputs = {"target": ("energy@pll_word_l2r",), "reference": ("energy@pll_word_l2r",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        target = table["target_pll_word_l2r_energy"].to_numpy(dtype=float)
        return target - table["reference_pll_word_l2r_energy"].to_numpy(dtype=float)
