"""The Min-K%++ attack: Min-K% on token log-probabilities standardised by the model's distribution."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import check_fraction, lowest_mean, row_ids, token_lists
from mlmia.core.errors import UserError

#: σ at or below this is a point mass (the model is certain): z = 0 there
SIGMA_ZERO = 1e-12


class MinKPlusPlus(Attack):
    """−(1/m) Σ of the m = ⌊k n⌋ (at least 1) lowest z_t = (log p(x_t) − μ_t) / σ_t over a sample's n
    scored tokens, with μ_t = E_{v∼p_t}[log p_t(v)] and σ_t² = Var_{v∼p_t}[log p_t(v)] the mean
    and variance of the log-probability under the model's own distribution p_t at that
    position.

    Zhang, Sun, Yeats, Ouyang, Kuo, Zhang, Yang and Li, "Min-K%++: Improved Baseline for
    Detecting Pre-Training Data from Large Language Models", arXiv 2404.02936 (2024), ICLR
    2025: maximum-likelihood training makes a training text a local maximum of the modelled
    distribution along each input dimension, so the true token's log-probability stands high
    relative to the distribution at its position; standardising by μ_t and σ_t calibrates
    positions where the model is confident against those where it is not. For a masked
    language model the positions are the masked ones over all masking patterns
    (`target_token_logp`, `target_token_mean`, `target_token_var`: one entry each per masked
    position of each pattern). Where σ_t = 0 (at most `SIGMA_ZERO`) the distribution is a point
    mass and the true token's log-probability can only be its mean: z_t = 0 there (no
    evidence either way; their code divides by zero there). Parameter `fraction` (k, default
    0.2); m rounded down and at least one token, as for Min-K% (`mlmia.attacks.min_k`). The
    statistic is minus the mean, so that, like an energy, lower means "member". Its test
    (`tests/test_attack_zoo.py`, reference definitions) follows MIMIR's Min-K%++ attack
    (iamgroot42/mimir, ``mimir/attacks/min_k_plus_plus.py``, after the authors'
    zjysteven/mink-plus-plus: μ = Σ p log p and σ² = Σ p (log p)² − μ² over the vocabulary,
    minus the mean of ``sorted(z)[: int(len(z) * k)]``)."""

    name = "min_k_plus_plus"
    label = "Min-K%++"
    inputs = {"target": ("token_logp", "token_mean", "token_var")}
    lower_is_member = True
    aggregates = True
    parameters = {"fraction": 0.2}

    def check_params(self) -> None:
        check_fraction(self.name, self.params["fraction"])

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        k = check_fraction(self.name, self.params["fraction"])
        logp = token_lists(table, "target_token_logp", self.name)
        mean = token_lists(table, "target_token_mean", self.name)
        var = token_lists(table, "target_token_var", self.name)
        out = np.empty(len(table), dtype=float)
        for i, (sid, lp, mu, v) in enumerate(zip(row_ids(table), logp, mean, var)):
            if not lp.size == mu.size == v.size:
                raise UserError(
                    f"attack {self.name}: sample {sid}: token_logp, token_mean and token_var differ in length"
                )
            sigma = np.sqrt(np.maximum(v, 0.0))  # a variance rounded below zero is zero
            point = sigma <= SIGMA_ZERO
            z = np.where(point, 0.0, (lp - mu) / np.where(point, 1.0, sigma))
            out[i] = -lowest_mean(z, k)
        return out
