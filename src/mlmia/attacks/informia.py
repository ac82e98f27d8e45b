"""InfoRMIA: RMIA's likelihood ratio as information in bits, per masked token and per sample."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.rmia import (
    AUTO,
    GRID,
    check_ratio_params,
    log_ratio,
    population_rows,
    references_lack,
    tune_a,
)
from mlmia.attacks.shared import reference_token_lists, row_ids, token_lists
from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger

log = get_logger(__name__)

LN2 = float(np.log(2.0))


def centring(row_bits: np.ndarray, population: np.ndarray) -> np.ndarray:
    """Each row's m: the mean of `row_bits` over the population rows, over the other population
    rows for a population row (leave one out, as RMIA compares it with the others only)."""
    z = row_bits[population]
    total, n_z = float(z.sum()), int(population.sum())
    m = np.full(row_bits.shape, total / n_z)
    m[population] = (total - z) / (n_z - 1)
    return m


def information(bits: list[np.ndarray], population: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """(per-slot scores, statistic) from each row's per-slot log2 LR: the slot's bits less the
    population's mean bits per slot (`centring` of the row means); the statistic is the mean of
    the row's slot scores."""
    row_bits = np.array([b.mean() for b in bits], dtype=float)
    m = centring(row_bits, population)
    return [b - mi for b, mi in zip(bits, m)], row_bits - m


def _tuning_score(log_target: np.ndarray, out_mean: np.ndarray, is_z: np.ndarray, a: float) -> np.ndarray:
    """The statistic of one reference's rows in `tune_a` (rows x slots, NaN past a row's last slot)."""
    bits = log_ratio(log_target, out_mean, a) / LN2
    row_bits = np.nanmean(bits, axis=1)
    return row_bits - centring(row_bits, is_z)


class InfoRmia(Attack):
    """RMIA's comparison of a sample with the population, in bits and per masked token: slot j's
    score is s_j(x) = log2 Pr(x_j | θ) / Pr(x_j) − m, m the population's mean of the same per
    slot; the sequence statistic is their mean, mean_j s_j(x).

    Tao and Shokri, "(Token-Level) InfoRMIA: Stronger Membership Inference and Memorization
    Assessment for LLMs", arXiv 2510.05582 (2025), ICLR 2026 as "Information-Theoretic
    Membership Inference for Granular Quantification of Memorization". InfoRMIA scores a
    sample by the information the target gives about it, log p(x | θ) / p(x), in bits, against
    the shift D_KL(p(z) || p(z | θ)) the target shows on data it need not have seen; its
    token-level form scores each token that way (a token's own Bayes factor) and aggregates
    the tokens' scores. The stored copies of the paper hold its abstract and summaries, not
    its numbered equations; the definitions below follow those terms and the authors' code
    for the LLM experiments (taojiashu/mimir, ``mimir/attacks/info_rmia.py``,
    ``InfoRMIAToken``: per token, log p_θ(x_t) − log p_ref(x_t) − Σ_v p_ref(v) (log p_θ(v) −
    log p_ref(v)) with log p_ref the references' mean log-probability, i.e. the log ratio plus
    D_KL(p_ref || p_θ) at that position; sequence score: the mean over tokens, config
    ``aggregate: mean``). ML Privacy Meter (privacytrustlab/ml_privacy_meter) holds no
    InfoRMIA.

    The quantities, mapped as `mlmia.attacks.rmia` maps RMIA's:

    - a slot j of a row is one masked position of one masking pattern (the row's
      ``target_token_logp`` in pattern order); Pr(x_j | θ) := exp(target_token_logp[j]), the
      target's probability of the true token with the pattern masked (the LLM code's
      next-token probability);
    - Pr(x_j) := ((1 + a) / 2) · mean_OUT exp(references_token_logp[r][j]) + (1 − a) / 2, RMIA's
      offline Pr(x) per slot (`rmia.log_ratio`) over the references not trained on the sample
      (``references_in`` False; a sample with none is an error). Slot j of a reference is slot
      j of the target (the patterns are a function of the sample): a reference whose list
      differs in length does not tokenize as the target and is refused;
    - ℓ_j(x) = log2 Pr(x_j | θ) − log2 Pr(x_j), the slot's information in bits;
    - the shift: m = mean over the population rows z (the attack table's rows of role
      ``population``) of ℓ̄(z) = mean_j ℓ_j(z): an estimate of E_z[log2 Pr(z_j | θ) / Pr(z_j)]
      = −D_KL in bits per token; a population row's m leaves the row out (at least two
      population rows are needed);
    - per-slot score (`token_statistics`): s_j(x) = ℓ_j(x) − m, in bits, higher = more
      member-like; statistic: mean_j s_j(x) = ℓ̄(x) − m = mean_{z ∈ Z \\ {x}} (ℓ̄(x) − ℓ̄(z)).

    With a = 1 and one OUT reference ℓ̄(x) is log2 of RMIA's LR on the energies (E = −mean_j
    log p); with several references the per-slot mean of probabilities differs from the mean of
    the references' exp(−E). With one slot per row ℓ̄ is RMIA's log2 LR at every a, and the
    statistic is the mean over z of
    log2(LR(x) / LR(z)) where RMIA takes the share of z with LR(x) / LR(z) ≥ γ: the indicator
    is replaced by the ratio's information, continuous, without threshold, and the audited
    rows rank as RMIA's (γ = 1, with its tie-break) rank them (tests/test_informia.py).

    `a` (default ``auto``) as RMIA's: each reference in turn plays the target, with its own
    per-slot log-probabilities and ``references_in`` and the other references' OUT
    probabilities, and the value of ``a_grid`` with the best mean AUC of this statistic wins
    (`rmia.tune_a`); the chosen value is in `tuned`. A number fixes it.

    Departures from the authors, and why:

    - the shift: their code takes D_KL(p_ref || p_θ) over the vocabulary at each position; the
      score tables hold per slot log p of the true token and the mean and variance of log p
      under the model's own distribution, not the cross term Σ_v p_ref(v) log p_θ(v), so the
      KL is estimated, as the sequence-level InfoRMIA does, from the population samples
      instead (their tokens in place of v ~ p_ref). It is then one number per table: it
      centres the scores (a non-member's are near 0 bits) but reorders neither rows nor the
      slots of a row, where the authors' per-position KL raises positions whose distributions
      the target has shifted;
    - Pr(x_j): their code averages the references' log-probabilities (a geometric mean) and has
      no `a`; here RMIA's arithmetic mean of the OUT references' probabilities with `a`, as the
      sequence-level InfoRMIA builds on RMIA's Pr(x). The two agree with one OUT reference and
      a = 1 (their LLM runs use one reference);
    - the masked language model's slots stand for the causal model's next tokens; their
      ``sum`` and ``mink`` aggregates are not offered; bits (log2) where their code uses nats,
      a scale only; higher means "member" (their MIMIR score is the negation).
    """

    name = "informia"
    label = "InfoRMIA"
    inputs = {"target": ("token_logp",), "references": ("token_logp",)}
    lower_is_member = False
    aggregates = True
    row_local = False
    reads_population = True
    tuning = "tuned on the reference models"
    parameters = {"a": AUTO, "a_grid": GRID}

    def check_params(self) -> None:
        check_ratio_params(self.name, self.params)

    def references_lack(self, count: int, online: bool) -> str | None:
        """`a: auto` is tuned as RMIA's (`rmia.references_lack`)."""
        return references_lack(self.name, self.params, count, online)

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        return self._scores(table)[1]

    def token_statistics(self, table: pd.DataFrame) -> list[np.ndarray]:
        """Per row, s_j(x) in bits for each slot j (see the class docstring): the slot's
        information about membership, log2 Pr(x_j | θ) / Pr(x_j), less the population's mean
        per slot; higher means the target gives that token more than models without the
        sample do. The row's statistic is the mean of these."""
        return self._scores(table)[0]

    def _scores(self, table: pd.DataFrame) -> tuple[list[np.ndarray], np.ndarray]:
        a, grid, _ = check_ratio_params(self.name, self.params)
        role, population = population_rows(table, self.name)
        target = token_lists(table, "target_token_logp", self.name)
        references = reference_token_lists(table, "references_token_logp", self.name, target)
        ids = row_ids(table)
        for sid, (_, inside) in zip(ids, references):
            if inside.all():
                raise UserError(
                    f"attack {self.name}: sample {sid} has no OUT reference (every reference was trained on it)"
                )
        self.tuned = {}
        if a is None:
            a, means, used = self._tune(references, role, population, grid)
            self.tuned = {"a": a}
            log.info(
                "attack %s: a = %s, tuned on %d reference models (mean AUC by a: %s)", self.name, a, used,
                ", ".join(f"{v}: {m:.4f}" for v, m in zip(grid, means)),
            )  # fmt: skip
        bits = []
        for sid, own, (matrix, inside) in zip(ids, target, references):
            out_mean = np.exp(matrix[~inside]).mean(axis=0)
            if not ((1.0 + a) / 2.0 * out_mean + (1.0 - a) / 2.0 > 0).all():
                raise UserError(f"attack {self.name}: sample {sid}: Pr(x_j) underflows to 0 (OUT log p too small)")
            bits.append(log_ratio(own, out_mean, a) / LN2)
        return information(bits, population)

    def _tune(self, references, role, population, grid) -> tuple[float, list[float], int]:
        """`rmia.tune_a` on the references' per-slot energies (rows x slots x references)."""
        counts = sorted({matrix.shape[0] for matrix, _ in references})
        if len(counts) > 1:
            raise UserError(
                f"attack {self.name}: rows list {counts[0]} to {counts[-1]} references; a: auto needs every row to "
                "list the same reference models"
            )
        m, width = counts[0], max(matrix.shape[1] for matrix, _ in references)
        energies = np.full((len(references), width, m), np.nan)
        for i, (matrix, _) in enumerate(references):
            energies[i, : matrix.shape[1], :] = -matrix.T
        inside = np.array([flags for _, flags in references], dtype=bool).reshape(len(references), m)
        audited = np.isin(role, ("member", "nonmember"))
        return tune_a(energies, inside, audited, population, grid, None, self.name, _tuning_score)
