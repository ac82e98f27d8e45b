"""RMIA (offline): the target's likelihood ratio of a sample compared with the population's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import reference_matrix, reference_sides, row_ids
from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.metrics.classification import auc

log = get_logger(__name__)

#: `a: auto`: chosen per attack table by attacking each reference model with the others
AUTO = "auto"
#: the values of `a` tried (Privacy Meter's np.arange(0, 1.1, 0.1))
GRID = tuple(round(0.1 * i, 1) for i in range(11))
#: two mean AUCs closer than this are equal (the smaller `a` wins)
_AUC_TIE = 1e-12


def _number(attack: str, key: str, value, ok, need: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not ok(number):
        raise UserError(f"config key attacks.{attack}.{key}: {need} is needed, got {value!r}")
    return number


def _in_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0


def check_ratio_params(attack: str, params: dict) -> tuple[float | None, tuple[float, ...], float | None]:
    """(a, or None for auto; the grid, ascending; gamma, or None for an attack without it), checked."""
    a = params["a"]
    a = None if a == AUTO else _number(attack, "a", a, _in_unit, f"{AUTO!r} or a number in [0, 1]")
    grid = params["a_grid"]
    if not isinstance(grid, (list, tuple)) or not grid:
        raise UserError(f"config key attacks.{attack}.a_grid: a non-empty list of numbers in [0, 1] is needed")
    grid = tuple(sorted({_number(attack, "a_grid", v, _in_unit, "numbers in [0, 1]") for v in grid}))
    gamma = None
    if "gamma" in params:
        gamma = _number(attack, "gamma", params["gamma"], lambda v: 0.0 < v < np.inf, "a positive number")
    return a, grid, gamma


def references_lack(attack: str, params: dict, count: int, online: bool) -> str | None:
    """What a pool lacks for `a: auto` (`tune_a` attacks each reference with the others): references
    trained on some of the audited samples and not on others, and three of them (with two, the
    other reference is OUT exactly where the attacked one is IN). A fixed `a` lacks nothing."""
    a, _, _ = check_ratio_params(attack, params)
    if a is None and (not online or count < 3):
        return (
            "at least 3 reference models trained on half of the audited patients to tune a: auto "
            f"(references.online: true, references.count >= 3; here online is {str(online).lower()}, count {count}), "
            f"or a fixed attacks.{attack}.a"
        )
    return None


def log_ratio(log_target: np.ndarray, out_mean: np.ndarray, a: float) -> np.ndarray:
    """log LR(x) = log Pr(x | θ) − log Pr(x), Pr(x) = (1 + a)/2 · (mean OUT probability) + (1 − a)/2."""
    with np.errstate(divide="ignore"):
        return log_target - np.log((1.0 + a) / 2.0 * out_mean + (1.0 - a) / 2.0)


def population_score(log_lr: np.ndarray, population: np.ndarray, gamma: float) -> np.ndarray:
    """RMIA's score of each row from its log LR: the share of population rows z with
    LR(x) / LR(z) ≥ γ (a population row against the others only), plus a tie-break.

    The share takes the values k / |Z| (k / (|Z| − 1) on population rows), so two rows of
    different share differ by at least 1 / (|Z| (|Z| − 1)). The tie-break adds (number of
    rows with a smaller log LR) / (number of rows) / (2 |Z| (|Z| − 1)), less than half that:
    rows of equal share (e.g. every member that beats the whole population) are ordered by
    their log LR, rows of different share keep their order, and rows of equal log LR stay tied."""
    reference = np.sort(log_lr[population])
    n_z = len(reference)
    # LR(x) / LR(z) >= gamma  <=>  log LR(z) <= log LR(x) - log gamma
    counts = np.searchsorted(reference, log_lr - np.log(gamma), side="right").astype(float)
    share = counts / n_z
    self_counted = 0.0 >= np.log(gamma)  # a population row always meets itself with ratio 1
    share[population] = (counts[population] - float(self_counted)) / (n_z - 1)
    below = np.searchsorted(np.sort(log_lr), log_lr, side="left")
    return share + below / len(log_lr) / (2.0 * n_z * (n_z - 1))


def population_rows(table: pd.DataFrame, attack: str) -> tuple[np.ndarray, np.ndarray]:
    """(each row's role, which rows are population rows): at least two are needed (a population
    row is compared with the others)."""
    if "role" not in table.columns:
        raise UserError(f"attack {attack}: the attack table has no role column (population rows are needed)")
    role = table["role"].to_numpy()
    population = role == "population"
    if population.sum() < 2:
        raise UserError(
            f"attack {attack}: the attack table has {int(population.sum())} population rows; at least 2 are needed"
        )
    return role, population


def tune_a(
    energies: np.ndarray,
    inside: np.ndarray,
    audited: np.ndarray,
    population: np.ndarray,
    grid: tuple[float, ...],
    gamma: float | None,
    attack: str = "rmia",
    score=None,
) -> tuple[float, list[float], int]:
    """(a, mean AUC at each value of `grid`, references used): RMIA's `a` chosen by attacking
    each reference model with the others.

    `energies` and `inside` (rows x references) are the references' energies and training
    memberships; `audited` marks the rows whose membership in a reference is known both ways
    (the audited members and non-members, half of whose patients each reference trained
    on), `population` the population rows. Reference r plays the target: its IN rows among
    the audited ones are the members, its OUT rows the non-members, its own energies give
    Pr(x | θ_r), the other references' OUT energies Pr(x), and the population rows it did
    not train on are Z. A row with no OUT reference besides r is left out of r's attack; a
    reference with fewer than 2 population rows or without both IN and OUT audited rows is
    left out. The score is `population_score` itself (the statistic as reported); its AUC
    on r's memberships is averaged over the references (each reference one vote: a pooled
    AUC would also rank one model's scores against another's, which no attack on one
    target does). The largest mean AUC wins; ties (within 1e-12) go to the smallest a.

    Another attack of the same Pr(x) tunes its `a` the same way with its own statistic:
    `energies` may then be rows x slots x references, one energy (−log p) per scored slot,
    NaN past a row's last slot, and `score(log_target, out_mean, is_z, a)` is its statistic
    of one reference's rows from their rows x slots log Pr(x | θ_r) and OUT means (`attack`
    names it in messages)."""
    slots = energies if energies.ndim == 3 else energies[:, None, :]
    if score is None:

        def score(log_target, out_mean, is_z, a):
            return population_score(log_ratio(log_target[:, 0], out_mean[:, 0], a), is_z, gamma)

    probability = np.exp(-slots)
    cases = []
    for r in range(slots.shape[2]):
        others = ~inside
        others[:, r] = False
        count = others.sum(axis=1)
        x = audited & (count > 0)
        z = population & (count > 0) & ~inside[:, r]
        y = inside[x, r]
        if z.sum() < 2 or y.all() or not y.any():
            continue
        rows = x | z
        out_mean = (probability[rows] * others[rows][:, None, :]).sum(axis=2) / count[rows][:, None]
        cases.append((z[rows], inside[rows, r], -slots[rows, :, r], out_mean))
    if not cases:
        raise UserError(
            f"attack {attack}: a: auto needs reference models trained on some of the audited samples and not on "
            "others (references.online: true, at least 3 references) and 2 population rows; or set "
            f"attacks.{attack}.a"
        )
    means = []
    for a in grid:
        aucs = []
        for is_z, y, log_target, out_mean in cases:
            statistic = score(log_target, out_mean, is_z, a)
            aucs.append(auc(y[~is_z], statistic[~is_z]))
        means.append(float(np.mean(aucs)))
    best = 0
    for i in range(1, len(grid)):
        if means[i] > means[best] + _AUC_TIE:
            best = i
    return grid[best], means, len(cases)


class Rmia(Attack):
    """The share of population samples z with LR(x) / LR(z) ≥ γ, where LR(x) = Pr(x | θ) /
    Pr(x) is the target's likelihood of x over its probability under models not trained on it.

    Zarifzadeh, Liu and Shokri, "Low-Cost High-Power Membership Inference Attacks", ICML 2024
    (RMIA), offline form; the reference-definition test follows the paper and ML Privacy
    Meter's `run_rmia` and `tune_offline_a` (privacytrustlab/ml_privacy_meter):

    - Pr(x | θ) := exp(−E(x; θ)), the geometric-mean probability per masked token of the text
      under the target (E: the energy, mean cross-entropy per masked token);
    - Pr(x) := ((1 + a) / 2) · mean_OUT exp(−E(x; θ_ref)) + (1 − a) / 2, the paper's linear
      approximation of the average over IN and OUT models from the OUT references only
      (``references_in`` False; a sample with none is an error). With a = 1, Pr(x) is the
      OUT models' mean;
    - `a` (default ``auto``): chosen per attack table as the authors do (Privacy Meter's audit
      always tunes it; its 0.3 is a function default): each reference model in turn plays the
      target, with the other references as its references and its own ``references_in`` as
      the memberships, and the value of the grid ``a_grid`` (default 0.0, 0.1, ..., 1.0) with
      the best mean AUC wins (`tune_a`). Only the references' energies and memberships enter:
      the target's energies and the member / non-member labels of the audited rows never do.
      The chosen value is in `tuned` (the metrics write it, the tables print it). A number
      fixes `a`;
    - the population samples z are the attack table's rows of role ``population`` (each
      with its own LR(z) from its own OUT references); statistic(x) = |{z : LR(x) / LR(z) ≥
      γ}| / |Z|, computed on log LR. A population row is compared with the other population
      rows only (leave one out), so that its statistic is distributed as a fresh
      non-member's; this needs at least two population rows. Parameter `gamma` (γ, default 1);
    - ties of the share (every member that beats the whole population scores 1) are broken
      by log LR, never reordering rows of different share (`population_score`): the
      ranking of the audited rows is then that of LR(x) itself, and a TPR at low FPR is not
      lost to a block of tied top scores.

    The comparison set Z is the attack table's population rows as they are (the experiment's
    population source, printed under the tables): the patient bootstrap resamples the
    statistics computed once on the whole table, not Z, and `a` is not tuned again per
    replicate. Higher means "member"."""

    name = "rmia"
    label = "RMIA (offline)"
    inputs = {"target": ("energy",), "references": ("energy",)}
    lower_is_member = False
    aggregates = True
    row_local = False
    reads_population = True
    tuning = "tuned on the reference models"
    parameters = {"a": AUTO, "a_grid": GRID, "gamma": 1.0}

    def check_params(self) -> None:
        check_ratio_params(self.name, self.params)

    def references_lack(self, count: int, online: bool) -> str | None:
        """`a: auto` is tuned by attacking each reference with the others (`tune_a`; module
        function `references_lack`)."""
        return references_lack(self.name, self.params, count, online)

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        a, grid, gamma = check_ratio_params(self.name, self.params)
        role, population = population_rows(table, self.name)
        outs, _ = reference_sides(table, self.name, need_in=False)
        self.tuned = {}
        if a is None:
            energies, inside = reference_matrix(table, self.name, "a: auto")
            audited = np.isin(role, ("member", "nonmember"))
            a, means, used = tune_a(energies, inside, audited, population, grid, gamma, self.name)
            self.tuned = {"a": a}
            log.info(
                "attack %s: a = %s, tuned on %d reference models (mean AUC by a: %s)", self.name, a, used,
                ", ".join(f"{v}: {m:.4f}" for v, m in zip(grid, means)),
            )  # fmt: skip
        out_mean = np.array([np.exp(-g).mean() for g in outs], dtype=float)
        marginal = (1.0 + a) / 2.0 * out_mean + (1.0 - a) / 2.0
        if not (marginal > 0).all():  # a = 1 and every OUT energy so large that exp underflows
            sid = row_ids(table)[int(np.flatnonzero(~(marginal > 0))[0])]
            raise UserError(f"attack {self.name}: sample {sid}: Pr(x) underflows to 0 (OUT energies too large)")
        log_lr = log_ratio(-table["target_energy"].to_numpy(dtype=float), out_mean, a)
        return population_score(log_lr, population, gamma)
