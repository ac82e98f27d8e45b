"""What more than one attack uses: each row's inputs read from the attack table as checked
arrays (ids for messages, per-token lists, reference energies split by membership), the
statistics they share (the Gaussian fit of reference energies, the mean of the lowest k
share) and the checks of their common parameters. No attack lives here."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id


def check_fraction(attack: str, fraction) -> float:
    """`fraction` as a float in (0, 1], or a UserError naming the config key."""
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise UserError(f"config key attacks.{attack}.fraction: a fraction in (0, 1] is needed, got {fraction!r}")
    return value


def n_lowest(fraction: float, n: int) -> int:
    """How many of n tokens make the lowest fraction k: ``int(k * n)``, k n rounded down in
    floating point as Shi et al.'s and Zhang et al.'s code and MIMIR round it (so 0.2 * 13 is 2),
    but at least one (where k n < 1 theirs is the mean of no token, not a number)."""
    return max(1, int(fraction * n))


def lowest_mean(values: np.ndarray, fraction: float) -> float:
    """The mean of the `n_lowest(fraction, n)` smallest of the n `values`."""
    m = n_lowest(fraction, values.size)
    return float(np.partition(values, m - 1)[:m].mean())


def row_ids(table: pd.DataFrame) -> list:
    """Each row's sample id (the row label where the table has none) as messages show it
    (`mlmia.core.errors.shown_id`: a value that is not id-like is withheld)."""
    ids = table["sample_id"].tolist() if "sample_id" in table.columns else list(table.index)
    return [shown_id(i, quoted=False) for i in ids]


def audited_rows(table: pd.DataFrame) -> np.ndarray:
    """The rows an online attack scores: members and non-members, the only rows an online pool's
    references train on half of (every row of a table without roles). Held-in and population
    rows have no IN reference, so no online statistic."""
    if "role" not in table:
        return np.ones(len(table), bool)
    return table["role"].isin(("member", "nonmember")).to_numpy()


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


#: how σ is estimated: from each sample's own references, or one pooled over all samples
VARIANCES = ("per_sample", "global")


def check_lira_params(attack: str, params: dict) -> tuple[str, float]:
    """(variance, σ floor) of a LiRA attack's parameters, checked."""
    variance = params["variance"]
    if variance not in VARIANCES:
        raise UserError(f"config key attacks.{attack}.variance: use one of {', '.join(VARIANCES)}, got {variance!r}")
    try:
        floor = float(params["min_sigma"])
    except (TypeError, ValueError):
        floor = float("nan")
    if not floor > 0:
        raise UserError(
            f"config key attacks.{attack}.min_sigma: a positive number is needed, got {params['min_sigma']!r}"
        )
    return variance, floor


def lira_references_lack(attack: str, params: dict, count: int, online: bool, sides: tuple[str, ...]) -> str | None:
    """What a pool of `count` references (online or not) lacks for a LiRA attack fitting Gaussians
    to the reference energies of `sides` ("IN", "OUT") with its `variance`: each audited sample is IN
    for ⌊M/2⌋ or ⌈M/2⌉ references online (OUT for the rest), for none offline, and a population
    sample for none. Per sample, σ needs two references of each side for every row; a global σ
    needs some row with two (the population's OUT rows have all M)."""
    variance, _ = check_lira_params(attack, params)
    if "IN" in sides and not online:
        return "reference models trained on half of the audited patients (references.online: true)"
    least = 2
    if variance == "per_sample" and online:
        least = 4  # ⌊M/2⌋ >= 2 references on each side of every audited sample
    elif "IN" in sides:
        least = 3  # a sample IN for two of them
    if count < least:
        return f"at least {least} reference models with variance {variance} (references.count is {count})"
    return None


def _reference_rows(table: pd.DataFrame, attack: str):
    """Each row's (id, reference energies, IN flags), checked: as many flags as energies, finite energies."""
    for sid, energies, member in zip(
        row_ids(table), table["references_energy"].tolist(), table["references_in"].tolist()
    ):
        energies = np.asarray(energies if energies is not None else [], dtype=float).reshape(-1)
        member = np.asarray(member if member is not None else [], dtype=bool).reshape(-1)
        if energies.size != member.size:
            raise UserError(f"attack {attack}: sample {sid}: references_energy and references_in differ in length")
        if not np.isfinite(energies).all():
            raise UserError(f"attack {attack}: sample {sid}: a reference energy is not a finite number")
        yield sid, energies, member


def reference_sides(table: pd.DataFrame, attack: str, need_in: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each row's reference energies split by membership: (OUT lists, IN lists). A row with no
    OUT reference (with `need_in`, no IN reference) is a UserError naming the sample."""
    outs, ins = [], []
    for sid, energies, member in _reference_rows(table, attack):
        out, inside = energies[~member], energies[member]
        if out.size == 0:
            raise UserError(f"attack {attack}: sample {sid} has no OUT reference (every reference was trained on it)")
        if need_in and inside.size == 0:
            raise UserError(f"attack {attack}: sample {sid} has no IN reference (no reference was trained on it)")
        outs.append(out)
        ins.append(inside)
    return outs, ins


def reference_matrix(table: pd.DataFrame, attack: str, purpose: str) -> tuple[np.ndarray, np.ndarray]:
    """(energies, IN flags), each rows x references: reference j is the j-th entry of every
    row's lists (the experiment's reference order). Rows that list different numbers of
    references are a UserError (`purpose` says what needs them aligned)."""
    rows = list(_reference_rows(table, attack))
    sizes = sorted({energies.size for _, energies, _ in rows})
    if len(sizes) > 1:
        raise UserError(
            f"attack {attack}: rows list {sizes[0]} to {sizes[-1]} reference energies; {purpose} needs every row "
            "to list the same reference models"
        )
    m = sizes[0] if sizes else 0
    energies = np.array([e for _, e, _ in rows], dtype=float).reshape(len(rows), m)
    inside = np.array([f for _, _, f in rows], dtype=bool).reshape(len(rows), m)
    return energies, inside


def reference_token_lists(
    table: pd.DataFrame, column: str, attack: str, target: list[np.ndarray]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each row's references' per-token lists of `column` (``references_token_logp``) as one
    references x slots matrix, with the references' IN flags (``references_in``): slot j of
    every reference is slot j of the row's `target` list (masking patterns are a function of
    the sample, so models of one tokenizer score the same positions in the same order). A
    reference whose list differs in length from the target's does not tokenize as the target:
    a UserError naming the sample and both lengths; so are non-finite values and flags that do
    not match the lists."""
    out = []
    for sid, own, lists, member in zip(row_ids(table), target, table[column].tolist(), table["references_in"].tolist()):
        lists = [] if lists is None else list(lists)
        member = np.asarray(member if member is not None else [], dtype=bool).reshape(-1)
        if len(lists) != member.size:
            raise UserError(f"attack {attack}: sample {sid}: {column} and references_in differ in length")
        matrix = np.empty((len(lists), own.size), dtype=float)
        for k, values in enumerate(lists):
            values = np.asarray(values if values is not None else [], dtype=float).reshape(-1)
            if values.size != own.size:
                raise UserError(
                    f"attack {attack}: sample {sid}: reference {k + 1} of {len(lists)} lists {values.size} values and "
                    f"the target {own.size} ({column}): it does not tokenize the sample as the target does"
                )
            matrix[k] = values
        if not np.isfinite(matrix).all():
            raise UserError(f"attack {attack}: sample {sid}: {column} holds a value that is not a finite number")
        out.append((matrix, member))
    return out


def gaussian_fit(
    groups: list[np.ndarray], variance: str, floor: float, attack: str, side: str, ids: list
) -> tuple[np.ndarray, np.ndarray]:
    """(μ, σ) per row of one side's reference energies, as tensorflow_privacy's
    `compute_score_lira` (``median_or_mean="mean"``) fits them: μ the row's mean; σ the row's
    standard deviation (``per_sample``, numpy's default ddof 0; at least two references
    needed) or the standard deviation of every row's energies around its own mean, all rows
    together (``global``, its ``fix_variance``: sqrt(Σ_rows Σ (e − μ_row)² / Σ_rows n_row);
    at least one row with two references); σ at least `floor`."""
    mu = np.array([g.mean() for g in groups], dtype=float)
    if variance == "per_sample":
        for sid, g in zip(ids, groups):
            if g.size < 2:
                raise UserError(
                    f"attack {attack}: sample {sid} has {g.size} {side} reference; variance per_sample needs "
                    "at least 2 (use variance: global)"
                )
        sigma = np.array([g.std() for g in groups], dtype=float)
    else:
        if not any(g.size > 1 for g in groups):
            raise UserError(
                f"attack {attack}: no sample has two {side} references, so the global variance cannot be estimated "
                "(it needs more reference models)"
            )
        residuals = sum(float(np.square(g - g.mean()).sum()) for g in groups)
        pooled = float(np.sqrt(residuals / sum(g.size for g in groups)))
        sigma = np.full(len(groups), pooled)
    return mu, np.maximum(sigma, floor)
