"""The likelihood-ratio attack on the masked-diffusion ELBO energy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack


class LikelihoodRatioElbo(Attack):
    """L(s) = E_ELBO(s; θ) − E_ELBO(s; θ_R): the paper's likelihood ratio (Mireshghallah et al.
    2022, attack B) on the masked-diffusion ELBO energy (energy kind ``elbo``, column spec
    "energy@elbo", `mlmia.scoring.schedules`).

    A masked diffusion language model is trained to predict the masked tokens at every masking
    ratio t, its loss weighted by 1/t: the negative ELBO of the sequence's log-likelihood (Sahoo
    et al., "Simple and Effective Masked Diffusion Language Models", NeurIPS 2024; Nie et al.,
    "Large Language Diffusion Models", 2025). Its energy here is that bound per token under a
    fixed schedule (R ratios x P patterns, config ``scoring.elbo``), the same patterns for target
    and reference, so that the ratio compares two models on the objective the diffusion target
    was trained on, where the masked energy reads it at one ratio (15%) only. Lower means
    "member"."""

    name = "likelihood_ratio_elbo"
    label = "(B) likelihood ratio, ELBO energy"
    inputs = {"target": ("energy@elbo",), "reference": ("energy@elbo",)}
    lower_is_member = True
    aggregates = True

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return table["target_elbo_energy"].to_numpy(dtype=float) - table["reference_elbo_energy"].to_numpy(dtype=float)
