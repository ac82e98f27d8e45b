"""Attack metrics: AUC, ROC, TPR at low FPR, precision/recall at thresholds.

An *attack table* holds one row per sample with its `role` (member, member_heldin,
nonmember, population), its `group_id` (patient) and the two energies `target` and
`reference`. The loss baseline (A) scores a sample by `target`; the likelihood-ratio
attack (B) by `stat = target - reference`. Lower scores mean "member": a sample is called
a member when its score is strictly below the threshold.

Two protocols subsample the members to the non-member count `draws` times and average:

* ``published``: what the authors' script ran, so that their digits come out. Python
  ``random.seed(seed)``, then per draw ``random.sample`` of the target member scores and,
  independently, of the reference member scores (unmatched pairs); the "population"
  threshold is taken on the non-member set itself (descending sort, element
  ``int(n * (1 - alpha)) + 1``).
* ``corrected``: matched member pairs drawn with a seeded numpy generator, the threshold
  on the disjoint population set (the largest t with at most alpha of the population
  strictly below it), and a bootstrap 95% interval for every metric.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.metrics import precision_score, recall_score, roc_auc_score, roc_curve

from mlmia.errors import UserError
from mlmia.logs import get_logger

from mlmia.roles import ROLES  # noqa: E402,F401  (re-exported)
PROTOCOLS = ("published", "corrected")
LEVELS = ("sample", "patient")
# (metric, method) pairs every metrics table carries; tpr_at_fpr repeats per FPR.
THRESHOLD_FREE = (("auc", "loss"), ("auc", "lr"))
THRESHOLD_METHODS = ("loss_mu", "loss_pop", "lr_pop")
METRIC_COLUMNS = ["metric", "method", "alpha", "fpr", "protocol", "level", "value", "ci_low", "ci_high"]


@dataclass(frozen=True)
class MetricSettings:
    protocols: tuple[str, ...] = PROTOCOLS
    alphas: tuple[float, ...] = (0.1,)
    fprs: tuple[float, ...] = (0.001, 0.01, 0.1)
    draws: int = 10
    seed: int = 2
    bootstrap: int = 200
    level: str = "sample"
    extra: dict = field(default_factory=dict)


@dataclass
class RoleScores:
    """Scores of one role: target energy and likelihood-ratio statistic, aligned."""

    target: np.ndarray
    stat: np.ndarray

    def take(self, idx: np.ndarray) -> RoleScores:
        return RoleScores(self.target[idx], self.stat[idx])

    def __len__(self) -> int:
        return len(self.target)


def aggregate_by_group(table: pd.DataFrame) -> pd.DataFrame:
    """Patient level: one row per (role, group_id) with the mean energies over its samples."""
    grouped = table.groupby(["role", "group_id"], sort=False, observed=True)[["target", "reference"]].mean()
    return grouped.reset_index()


def split_roles(table: pd.DataFrame, level: str = "sample", where: str = "attack table") -> dict[str, RoleScores]:
    """Check an attack table and split it into the four roles (in table order)."""
    missing = [c for c in ("role", "group_id", "target", "reference") if c not in table.columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    if level not in LEVELS:
        raise UserError(f"{where}: unknown level {level!r} (use one of {', '.join(LEVELS)})")
    for column in ("target", "reference"):
        values = table[column].to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            row = table.iloc[int(bad.nonzero()[0][0])]
            label = row.get("sample_id", row.name)
            raise UserError(f"{where}: sample {label}: {column} score is {values[bad][0]} (NaN or inf)")
    if level == "patient":
        table = aggregate_by_group(table)
    roles = {}
    for role in ROLES:
        part = table[table["role"] == role]
        if part.empty:
            raise UserError(f"{where}: role {role!r} has no samples")
        target = part["target"].to_numpy(dtype=float)
        roles[role] = RoleScores(target, target - part["reference"].to_numpy(dtype=float))
    return roles


def published_threshold(nonmember_scores: np.ndarray, alpha: float) -> float:
    """The authors' 'population' threshold: taken on the non-members themselves."""
    ordered = np.sort(nonmember_scores)[::-1]
    index = min(int(len(ordered) * (1 - alpha)) + 1, len(ordered) - 1)
    return float(ordered[index])


def population_threshold(population_scores: np.ndarray, alpha: float) -> float:
    """Largest threshold with at most alpha of the population strictly below it."""
    ordered = np.sort(population_scores)
    return float(ordered[min(int(math.floor(alpha * len(ordered))), len(ordered) - 1)])


def tpr_at_fpr(y_true: np.ndarray, member_score: np.ndarray, fpr_max: float) -> float:
    """Highest true-positive rate with false-positive rate <= fpr_max (score: higher = member)."""
    fpr, tpr, _ = roc_curve(y_true, member_score)
    return float(tpr[fpr <= fpr_max].max())


def _draw_metrics(
    members_target: np.ndarray,
    members_stat: np.ndarray,
    nonmembers: RoleScores,
    thresholds: dict[tuple[str, float], float],
    fprs: tuple[float, ...],
) -> dict[tuple[str, str, float, float], float]:
    """Every metric for one balanced draw (members already subsampled)."""
    y = np.r_[np.ones(len(members_target)), np.zeros(len(nonmembers))]
    scores = {
        "loss": np.r_[members_target, nonmembers.target],
        "lr": np.r_[members_stat, nonmembers.stat],
    }
    out: dict[tuple[str, str, float, float], float] = {}
    for method, score in scores.items():
        out[("auc", method, np.nan, np.nan)] = float(roc_auc_score(y, -score))
        for fpr in fprs:
            out[("tpr_at_fpr", method, np.nan, fpr)] = 100.0 * tpr_at_fpr(y, -score, fpr)
    for (method, alpha), threshold in thresholds.items():
        predicted = scores["lr" if method.startswith("lr") else "loss"] < threshold
        out[("precision", method, alpha, np.nan)] = 100.0 * precision_score(y, predicted, zero_division=0)
        out[("recall", method, alpha, np.nan)] = 100.0 * recall_score(y, predicted, zero_division=0)
    return out


def _thresholds(roles: dict[str, RoleScores], alphas, protocol: str) -> dict[tuple[str, float], float]:
    mu = float(roles["member_heldin"].target.mean())
    thresholds: dict[tuple[str, float], float] = {}
    for alpha in alphas:
        if protocol == "published":
            thresholds[("loss_pop", alpha)] = published_threshold(roles["nonmember"].target, alpha)
            thresholds[("lr_pop", alpha)] = published_threshold(roles["nonmember"].stat, alpha)
        else:
            thresholds[("loss_pop", alpha)] = population_threshold(roles["population"].target, alpha)
            thresholds[("lr_pop", alpha)] = population_threshold(roles["population"].stat, alpha)
        # mu does not depend on alpha; it is repeated per alpha so each table column is complete.
        thresholds[("loss_mu", alpha)] = mu
    return thresholds


def _mean_over(draws: list[dict]) -> dict:
    return {key: float(np.mean([d[key] for d in draws])) for key in draws[0]}


def published_metrics(roles: dict[str, RoleScores], settings: MetricSettings) -> dict:
    """The authors' protocol: unmatched member draws from Python's `random`, averaged."""
    members, nonmembers = roles["member"], roles["nonmember"]
    n_out = min(len(nonmembers), len(members))
    thresholds = _thresholds(roles, settings.alphas, "published")
    rng = random.Random(settings.seed)
    draws = []
    indices = range(len(members))
    for _ in range(settings.draws):
        # random.sample picks by index only, so sampling indices reproduces sampling the lists.
        target_idx = rng.sample(indices, n_out)
        reference_idx = rng.sample(indices, n_out)
        members_target = members.target[target_idx]
        members_reference = members.target[reference_idx] - members.stat[reference_idx]
        draws.append(
            _draw_metrics(members_target, members_target - members_reference, nonmembers, thresholds, settings.fprs)
        )
    return _mean_over(draws)


def _corrected_point(roles: dict[str, RoleScores], settings: MetricSettings, rng: np.random.Generator) -> dict:
    members, nonmembers = roles["member"], roles["nonmember"]
    n_out = min(len(nonmembers), len(members))
    thresholds = _thresholds(roles, settings.alphas, "corrected")
    draws = []
    for _ in range(settings.draws):
        idx = rng.choice(len(members), n_out, replace=False)
        draws.append(_draw_metrics(members.target[idx], members.stat[idx], nonmembers, thresholds, settings.fprs))
    return _mean_over(draws)


def corrected_metrics(roles: dict[str, RoleScores], settings: MetricSettings) -> tuple[dict, dict]:
    """Matched pairs, population threshold; returns (point estimates, (low, high) per metric)."""
    rng = np.random.default_rng(settings.seed)
    point = _corrected_point(roles, settings, rng)
    if settings.bootstrap <= 0:
        return point, {key: (np.nan, np.nan) for key in point}
    replicates = []
    one_draw = MetricSettings(**{**settings.__dict__, "draws": 1})
    for _ in range(settings.bootstrap):
        resampled = {role: scores.take(rng.integers(0, len(scores), len(scores))) for role, scores in roles.items()}
        replicates.append(_corrected_point(resampled, one_draw, rng))
    intervals = {
        key: tuple(float(q) for q in np.percentile([r[key] for r in replicates], [2.5, 97.5])) for key in point
    }
    return point, intervals


def attack_metrics(table: pd.DataFrame, settings: MetricSettings, where: str = "attack table") -> pd.DataFrame:
    """All metrics of one experiment under every protocol in `settings`, in tidy form."""
    roles = split_roles(table, settings.level, where)
    get_logger("metrics").info(
        "%s: %s-level units per role: %s; protocols %s, alphas %s, %d draws, %d bootstrap replicates",
        where, settings.level, {role: len(scores) for role, scores in roles.items()},
        ",".join(settings.protocols), ",".join(map(str, settings.alphas)), settings.draws, settings.bootstrap,
    )  # fmt: skip
    rows = []
    for protocol in settings.protocols:
        if protocol == "published":
            point, intervals = published_metrics(roles, settings), {}
        elif protocol == "corrected":
            point, intervals = corrected_metrics(roles, settings)
        else:
            raise UserError(f"{where}: unknown protocol {protocol!r} (use one of {', '.join(PROTOCOLS)})")
        for (metric, method, alpha, fpr), value in point.items():
            low, high = intervals.get((metric, method, alpha, fpr), (np.nan, np.nan))
            rows.append((metric, method, alpha, fpr, protocol, settings.level, value, low, high))
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def roc_points(table: pd.DataFrame, level: str = "sample", max_points: int = 2000) -> pd.DataFrame:
    """ROC curves of (A) and (B) over all members vs all non-members (matched pairs).

    ROC curves do not depend on the class balance, so no subsampling is needed.
    """
    roles = split_roles(table, level)
    members, nonmembers = roles["member"], roles["nonmember"]
    y = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    frames = []
    for method, member_score in (
        ("loss", -np.r_[members.target, nonmembers.target]),
        ("lr", -np.r_[members.stat, nonmembers.stat]),
    ):
        fpr, tpr, _ = roc_curve(y, member_score)
        if len(fpr) > max_points:
            keep = np.unique(np.r_[np.linspace(0, len(fpr) - 1, max_points).astype(int), np.nonzero(fpr <= 0.01)[0]])
            fpr, tpr = fpr[keep], tpr[keep]
        frames.append(pd.DataFrame({"method": method, "fpr": fpr, "tpr": tpr}))
    return pd.DataFrame(pd.concat(frames, ignore_index=True)).assign(level=level)
