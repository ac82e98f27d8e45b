"""The Min-K% Prob attack: the mean log-probability of a sample's least likely tokens."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.core.errors import UserError


def check_fraction(attack: str, k) -> float:
    """k as a float in (0, 1], or a UserError naming the config key."""
    try:
        value = float(k)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise UserError(f"config key attacks.{attack}.k: a fraction in (0, 1] is needed, got {k!r}")
    return value


def n_lowest(k: float, n: int) -> int:
    """How many of n tokens make the lowest k: ceil(k n), at least one (k n within 1e-9 of an
    integer counts as that integer, so that 0.1 * 30 is 3, not 4)."""
    return max(1, math.ceil(k * n - 1e-9))


def lowest_mean(values: np.ndarray, k: float) -> float:
    """The mean of the ceil(k n) smallest of `values`."""
    m = n_lowest(k, values.size)
    return float(np.partition(values, m - 1)[:m].mean())


def row_ids(table: pd.DataFrame) -> list:
    """Each row's sample id (the row label where the table has none), for messages."""
    return table["sample_id"].tolist() if "sample_id" in table.columns else list(table.index)


def token_lists(table: pd.DataFrame, column: str, attack: str) -> list[np.ndarray]:
    """The per-token lists of `column` as float arrays, each non-empty and finite."""
    out = []
    for sid, values in zip(row_ids(table), table[column].tolist()):
        values = np.asarray(values if values is not None else [], dtype=float).reshape(-1)
        if values.size == 0:
            raise UserError(f"attack {attack}: sample {sid} has no scored tokens ({column})")
        if not np.isfinite(values).all():
            raise UserError(f"attack {attack}: sample {sid}: {column} holds a value that is not a finite number")
        out.append(values)
    return out


class MinK(Attack):
    """−(1/m) Σ of the m = ceil(k n) lowest log p(x_t | context) over a sample's n scored tokens.

    Shi, Ajith, Xia, Huang, Liu, Blevins, Chen and Zettlemoyer, "Detecting Pretraining Data
    from Large Language Models", ICLR 2024 (Min-K% Prob): a text seen in training has few
    tokens of very low probability, so the mean log-probability of its k% least likely
    tokens is high. For a masked language model the token log-probabilities are those of the
    masked positions, over all the sample's masking patterns (`target_token_logp`: one entry
    per masked position of each pattern, so a position masked in two patterns counts twice),
    each predicted from the unmasked rest of the text rather than from a left context.
    Parameter `k` (a fraction, default 0.2, the paper's usual choice); at least one token.
    The statistic is minus the mean, so that, like an energy, lower means "member"."""

    name = "min_k"
    label = "Min-K%"
    inputs = {"target": ("token_logp",)}
    lower_is_member = True
    aggregates = True
    parameters = {"k": 0.2}

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        k = check_fraction(self.name, self.params["k"])
        logp = token_lists(table, "target_token_logp", self.name)
        return np.array([-lowest_mean(values, k) for values in logp], dtype=float)
