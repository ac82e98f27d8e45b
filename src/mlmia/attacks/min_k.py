"""The Min-K% Prob attack: the mean log-probability of a sample's least likely tokens."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import check_fraction, lowest_mean, token_lists


class MinK(Attack):
    """−(1/m) Σ of the m = ⌊k n⌋ (at least 1) lowest log p(x_t | context) over a sample's n scored tokens.

    Shi, Ajith, Xia, Huang, Liu, Blevins, Chen and Zettlemoyer, "Detecting Pretraining Data
    from Large Language Models", ICLR 2024 (Min-K% Prob): a text seen in training has few
    tokens of very low probability, so the mean log-probability of its k% least likely
    tokens is high. For a masked language model the token log-probabilities are those of the
    masked positions, over all the sample's masking patterns (`target_token_logp`: one entry
    per masked position of each pattern, so a position masked in two patterns counts twice),
    each predicted from the unmasked rest of the text rather than from a left context.
    Parameter `fraction` (k, default 0.2, the paper's usual choice); m is k n rounded down as
    the authors' code and MIMIR's round it (`mlmia.attacks.shared.n_lowest`), but at least one
    token. The statistic is minus the mean, so that, like an energy, lower means "member". Its
    test (`tests/test_attack_zoo.py`, reference definitions) follows MIMIR's Min-K% Prob
    attack (iamgroot42/mimir, ``mimir/attacks/min_k.py``, window 1 and stride 1: minus the
    mean of ``sorted(log_probs)[: int(len(log_probs) * k)]``)."""

    name = "min_k"
    label = "Min-K%"
    inputs = {"target": ("token_logp",)}
    lower_is_member = True
    aggregates = True
    parameters = {"fraction": 0.2}

    def check_params(self) -> None:
        check_fraction(self.name, self.params["fraction"])

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        k = check_fraction(self.name, self.params["fraction"])
        logp = token_lists(table, "target_token_logp", self.name)
        return np.array([-lowest_mean(values, k) for values in logp], dtype=float)
