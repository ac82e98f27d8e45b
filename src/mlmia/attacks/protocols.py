"""Attack metrics of one experiment under the two protocols.

An *attack table* holds one row per sample: its `role` (member, member_heldin, nonmember,
population), `source`, `group_id` (patient) and the model columns the attacks read
(`target_energy`, `reference_energy`, ...). Each attack (`mlmia.attacks`) turns a row into a
member score (higher = member); at patient level a patient's score is the mean over its
samples. Metrics (`mlmia.metrics.classification`): AUC, TPR at low FPR, and precision and
recall of "member" at a threshold: `population` (at most alpha of the population called a
member) or `heldin_mean` (the mean over known training samples, the loss baseline's mu).

Both protocols subsample the members to the non-member count `draws` times and average:

* ``published``: what the authors' script ran, so that their digits come out. Python
  ``random.seed(seed)``, then per draw ``random.sample`` of the member rows for the target's
  columns and, independently, for the reference's (unmatched pairs); the "population"
  threshold is taken on the non-member set itself (`published_threshold`). No intervals.
* ``corrected``: matched member rows drawn with a seeded numpy generator, the threshold on
  the disjoint population set, and a 95% interval from the patient bootstrap
  (`mlmia.metrics.bootstrap`): each replicate resamples patients within each stratum and
  repeats the member subsampling that the point estimate averages over. The replicate
  values are kept, so that findings can compare two experiments on the same resamples.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack, get_attack
from mlmia.core.errors import UserError, shown_id
from mlmia.core.logs import get_logger
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.classification import (
    heldin_mean_threshold,
    population_threshold,
    precision_recall,
    published_threshold,
    resolvable,
    roc,
)
from mlmia.metrics.intervals import percentile_interval
from mlmia.terms.manifest import ROLES
from mlmia.terms.scores import PATTERN_SIZES, TOKEN_COLUMNS

PROTOCOLS = ("published", "corrected")
LEVELS = ("sample", "patient")
THRESHOLDS = ("population", "heldin_mean")
METRIC_COLUMNS = [
    "metric", "attack", "threshold", "alpha", "fpr", "protocol", "level", "value", "ci_low", "ci_high",
    "resolvable", "replicate", "role", "parameter",
]  # fmt: skip
#: how many samples and patients each role holds (rows `metric` n_samples / n_patients, by `role`)
COUNT_METRICS = ("n_samples", "n_patients")
#: a parameter an attack chose from the attack table (`Attack.tuned`): its name in `parameter`
PARAMETER_METRIC = "parameter"
#: the model roles whose columns the published protocol draws independently, in its order
_PUBLISHED_DRAW_ORDER = ("target", "reference")
log = get_logger(__name__)


@dataclass(frozen=True)
class MetricSettings:
    """What to compute for one experiment (the study fills it from the config)."""

    protocols: tuple[str, ...]
    attacks: tuple[str, ...]
    alphas: tuple[float, ...]
    thresholds: tuple[str, ...]
    fprs: tuple[float, ...]
    draws: int
    seed: int
    bootstrap: int
    level: str
    attack_params: dict = field(default_factory=dict)  # {attack: {parameter: value}}

    @classmethod
    def from_params(cls, params: dict) -> MetricSettings:
        """From a rule's params (lists become tuples)."""
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in params.items()})


@dataclass
class Units:
    """The units of an experiment (samples, or patients at patient level), with each
    attack's member score."""

    frame: pd.DataFrame  # role, source, group_id (+ model columns for the published protocol)
    scores: dict[str, np.ndarray]


def check_attack_table(table: pd.DataFrame, attacks: list[Attack], where: str) -> None:
    """The columns every attack reads are there and finite."""
    needed = ["role", "source", "group_id"] + [c for a in attacks for c in a.columns()]
    missing = [c for c in dict.fromkeys(needed) if c not in table.columns]
    if missing:
        raise UserError(f"{where}: the attack table lacks column(s) {', '.join(missing)}")
    for column in dict.fromkeys(c for a in attacks for c in a.columns()):
        if table[column].map(lambda v: isinstance(v, (list, tuple, np.ndarray))).any():
            continue  # per-token or per-reference lists: the attack reads them as they are
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            row = table.iloc[int(bad.nonzero()[0][0])]
            label = row.get("sample_id", row.name)
            raise UserError(f"{where}: sample {shown_id(label, quoted=False)}: {column} is not a finite number")


#: the role each threshold is taken on (corrected protocol)
THRESHOLD_ROLES = {"population": "population", "heldin_mean": "member_heldin"}


def scored_parts(table: pd.DataFrame, attacks: list[Attack]) -> list[tuple[pd.DataFrame, list[Attack]]]:
    """The attack table split by the rows the attacks score (`Attack.scored`: their
    `scored_roles`, narrowed by an attack whose inputs some rows lack): one part per distinct
    (roles, rows), its rows in table order, with the attacks that score them. Rows an attack
    does not score (LiRA online's held-in and population rows; the neighbourhood attack's
    samples outside `neighbours.subsample`) are dropped here, before any metric, so that an
    undefined statistic never reaches one."""
    parts: dict[tuple, tuple[np.ndarray | None, list[Attack]]] = {}
    for attack in attacks:
        rows = attack.scored(table)
        key = (attack.scored_roles, None if rows is None else np.asarray(rows, dtype=bool).tobytes())
        parts.setdefault(key, (rows, []))[1].append(attack)
    return [
        (table if rows is None else table[np.asarray(rows, dtype=bool)].reset_index(drop=True), chosen)
        for rows, chosen in parts.values()
    ]


def attack_units(table: pd.DataFrame, attacks: list[Attack], level: str, where: str = "attack table") -> Units:
    """Each attack's member score per sample, or per patient (the mean over its samples). A
    statistic that is not a finite number is an error naming the attack and the sample."""
    if level not in LEVELS:
        raise UserError(f"{where}: unknown level {level!r} (use one of {', '.join(LEVELS)})")
    check_attack_table(table, attacks, where)
    table = table.reset_index(drop=True)
    scores = {attack.name: attack.member_score(table) for attack in attacks}
    for name, score in scores.items():
        bad = ~np.isfinite(np.asarray(score, dtype=float))
        if bad.any():
            row = table.iloc[int(bad.nonzero()[0][0])]
            raise UserError(
                f"{where}: attack {name!r}: sample {shown_id(row.get('sample_id', row.name), quoted=False)} (role {row['role']}): the "
                f"statistic is not a finite number ({int(bad.sum())} rows)"
            )
    if level == "sample":
        return Units(table, scores)
    for attack in attacks:
        if not attack.aggregates:
            raise UserError(f"{where}: attack {attack.name!r} does not aggregate to patients (patient level)")
    keys = ["role", "source", "group_id"]
    scalar = [
        c for c in dict.fromkeys(c for a in attacks for c in a.columns()) if pd.api.types.is_numeric_dtype(table[c])
    ]
    model_columns = scalar  # the published protocol's unmatched draws average scalar columns only
    grouped = table.groupby(keys, sort=False, observed=True)
    frame = grouped[model_columns].mean().reset_index() if model_columns else grouped.size().reset_index()[keys]
    codes = grouped.ngroup().to_numpy()
    counts = np.bincount(codes, minlength=len(frame))
    patient_scores = {name: np.bincount(codes, weights=s, minlength=len(frame)) / counts for name, s in scores.items()}
    return Units(frame, patient_scores)


def _role_rows(frame: pd.DataFrame, settings: MetricSettings, where: str) -> dict[str, np.ndarray]:
    roles = frame["role"].to_numpy()
    unknown = sorted(set(map(str, roles)) - set(ROLES))
    if unknown:
        raise UserError(f"{where}: unknown role(s) {', '.join(unknown)} (use {', '.join(ROLES)})")
    needed = {"member", "nonmember"}
    if "population" in settings.thresholds:
        needed.add("population")
    if "heldin_mean" in settings.thresholds:
        needed.add("member_heldin")
    rows = {role: np.nonzero(roles == role)[0] for role in ROLES}
    for role in ROLES:
        if role in needed and len(rows[role]) == 0:
            raise UserError(f"{where}: role {role!r} has no {settings.level}s")
    return rows


def _thresholds(scores, rows, settings: MetricSettings, published: bool) -> dict[tuple[str, str, float], float]:
    """(attack, threshold, alpha) -> threshold in member-score space."""
    out = {}
    for name, score in scores.items():
        for alpha in settings.alphas:
            if "population" in settings.thresholds:
                if published:
                    out[(name, "population", alpha)] = published_threshold(score[rows["nonmember"]], alpha)
                else:
                    out[(name, "population", alpha)] = population_threshold(score[rows["population"]], alpha)
            if "heldin_mean" in settings.thresholds:
                # mu does not depend on alpha; repeated per alpha so each table column is complete
                out[(name, "heldin_mean", alpha)] = heldin_mean_threshold(score[rows["member_heldin"]])
    return out


def _draw_metrics(member_scores, nonmember_scores, thresholds, settings: MetricSettings) -> dict[tuple, float]:
    """Every metric of one balanced draw (members already subsampled)."""
    n_members, n_nonmembers = len(next(iter(member_scores.values()))), len(next(iter(nonmember_scores.values())))
    y = np.r_[np.ones(n_members, dtype=bool), np.zeros(n_nonmembers, dtype=bool)]
    out: dict[tuple, float] = {}
    for name in member_scores:
        score = np.r_[member_scores[name], nonmember_scores[name]]
        fpr, tpr = roc(y, score)
        out[("auc", name, None, np.nan, np.nan)] = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))
        for fpr_max in settings.fprs:
            value = float(tpr[fpr <= fpr_max + 1e-12].max()) if resolvable(fpr_max, n_nonmembers) else np.nan
            out[("tpr_at_fpr", name, None, np.nan, fpr_max)] = 100.0 * value
    for (name, threshold, alpha), t in thresholds.items():
        score = np.r_[member_scores[name], nonmember_scores[name]]
        precision, recall = precision_recall(y, score > t)
        out[("precision", name, threshold, alpha, np.nan)] = 100.0 * precision
        out[("recall", name, threshold, alpha, np.nan)] = 100.0 * recall
    return out


def _mean_over(draws: list[dict]) -> dict:
    return {key: float(np.mean([d[key] for d in draws])) for key in draws[0]}


def _corrected_estimate(scores, rows, settings: MetricSettings, rng: np.random.Generator) -> dict:
    """Matched member draws of size min(#non-members, #members), averaged."""
    members, nonmembers = rows["member"], rows["nonmember"]
    n_out = min(len(nonmembers), len(members))
    thresholds = _thresholds(scores, rows, settings, published=False)
    nonmember_scores = {name: s[nonmembers] for name, s in scores.items()}
    draws = []
    for _ in range(settings.draws):
        idx = members[rng.choice(len(members), n_out, replace=False)]
        draws.append(
            _draw_metrics({name: s[idx] for name, s in scores.items()}, nonmember_scores, thresholds, settings)
        )
    return _mean_over(draws)


def _published_estimate(units: Units, attacks: list[Attack], rows, settings: MetricSettings) -> dict:
    """The authors' protocol: per draw, the target's and the reference's member rows drawn
    independently with Python's `random` (unmatched pairs), averaged."""
    frame, scores = units.frame, units.scores
    members, nonmembers = rows["member"], rows["nonmember"]
    n_out = min(len(nonmembers), len(members))
    thresholds = _thresholds(scores, rows, settings, published=True)
    nonmember_scores = {name: s[nonmembers] for name, s in scores.items()}
    member_frame = frame.iloc[members].reset_index(drop=True)
    # The unmatched pairing re-scores the drawn rows; an attack that compares rows (its
    # comparison set would change with the draw) or reads per-row lists keeps its scores
    # on the whole table, matched (so does one that reads the reference's per-token evidence:
    # one sample's tokens against another's are no pair at all).
    redrawn = [
        a
        for a in attacks
        if not a.reads_other_rows()
        and all(c in member_frame.columns for c in a.columns())
        and not any(c.split("@")[0] in (*TOKEN_COLUMNS, PATTERN_SIZES) for c in a.inputs.get("reference", ()))
    ]
    rng = random.Random(settings.seed)
    indices = range(len(members))
    draws = []
    for _ in range(settings.draws):
        # random.sample picks by index only, so sampling indices reproduces sampling the lists
        picked = {role: rng.sample(indices, n_out) for role in _PUBLISHED_DRAW_ORDER}
        drawn = member_frame.iloc[picked["target"]].reset_index(drop=True)
        for column in drawn.columns:
            for role in _PUBLISHED_DRAW_ORDER[1:]:
                if column.startswith(f"{role}_"):
                    drawn[column] = member_frame[column].to_numpy()[picked[role]]
        member_scores = {
            attack.name: attack.member_score(drawn) if attack in redrawn else scores[attack.name][members][picked["target"]]
            for attack in attacks
        }  # fmt: skip
        draws.append(_draw_metrics(member_scores, nonmember_scores, thresholds, settings))
    return _mean_over(draws)


def _rows(point: dict, protocol: str, level: str, intervals: dict | None = None, replicate=None) -> list[tuple]:
    out = []
    for (metric, attack, threshold, alpha, fpr), value in point.items():
        low, high = (intervals or {}).get((metric, attack, threshold, alpha, fpr), (np.nan, np.nan))
        ok = not (metric == "tpr_at_fpr" and np.isnan(value))
        out.append(
            (metric, attack, threshold, alpha, fpr, protocol, level, value, low, high, ok, replicate, None, None)
        )
    return out


def attack_metrics(
    table: pd.DataFrame,
    settings: MetricSettings,
    where: str = "attack table",
    universe: dict[tuple[str, str], list[str]] | None = None,
) -> pd.DataFrame:
    """Every metric of one experiment under every protocol in `settings`, in tidy form.

    Rows with `replicate` NA are the estimates (with their interval under the corrected
    protocol); rows with a replicate number are the corrected protocol's bootstrap
    replicates; rows of metric ``parameter`` hold what an attack chose from the table
    (`Attack.tuned`, e.g. RMIA's `a`), named in column `parameter`. `universe` maps each (role, source) to its patients in the whole sample
    table (`sample_universe`), so that every experiment on that table draws the same
    patients in the same replicate; without it, the table's own patients.
    """
    attacks = [get_attack(name, settings.attack_params.get(name)) for name in settings.attacks]
    parts = []
    for part, chosen in scored_parts(table, attacks):
        scored = set(chosen[0].scored_roles or ROLES)
        part_settings = replace(
            settings,
            attacks=tuple(a.name for a in chosen),
            thresholds=tuple(t for t in settings.thresholds if THRESHOLD_ROLES[t] in scored),
        )
        units = attack_units(part, chosen, settings.level, where)
        rows = _role_rows(units.frame, part_settings, where)
        log.info(
            "%s: %s-level units per role: %s; attacks %s; protocols %s, alphas %s, %d draws, %d bootstrap replicates",
            where, settings.level, {role: len(r) for role, r in rows.items()}, ",".join(part_settings.attacks),
            ",".join(settings.protocols), ",".join(map(str, settings.alphas)), settings.draws, settings.bootstrap,
        )  # fmt: skip
        parts.append((units, chosen, rows, part_settings))
    out = []
    for protocol in settings.protocols:
        if protocol not in PROTOCOLS:
            raise UserError(f"{where}: unknown protocol {protocol!r} (use one of {', '.join(PROTOCOLS)})")
        out += _counts(table, protocol, settings.level)
        for units, chosen, rows, part_settings in parts:
            out += _protocol_rows(units, chosen, rows, part_settings, protocol, universe)
        out += _tuned(attacks, protocol, settings.level)
    metrics = pd.DataFrame(out, columns=METRIC_COLUMNS)
    metrics["replicate"] = metrics["replicate"].astype("Int64")
    return metrics


def _protocol_rows(units: Units, attacks: list[Attack], rows, settings: MetricSettings, protocol: str, universe):
    """The metric rows of one protocol for the attacks of one part of the table."""
    if protocol == "published":
        return _rows(_published_estimate(units, attacks, rows, settings), protocol, settings.level)
    point = _corrected_estimate(units.scores, rows, settings, np.random.default_rng(settings.seed))
    replicates = _bootstrap(units, rows, settings, universe)
    intervals = {key: percentile_interval([r[key] for r in replicates.values()]) for key in point} if replicates else {}
    out = _rows(point, protocol, settings.level, intervals)
    for b, replicate in replicates.items():
        out += _rows(replicate, protocol, settings.level, replicate=b)
    return out


def _tuned(attacks: list[Attack], protocol: str, level: str) -> list[tuple]:
    """The parameters each attack chose from the whole attack table (`Attack.tuned`), one row
    each: chosen once, before any draw or bootstrap replicate, so the same under every protocol."""
    return [
        (PARAMETER_METRIC, attack.name, None, np.nan, np.nan, protocol, level, float(value), np.nan, np.nan, True,
         None, None, parameter)
        for attack in attacks
        for parameter, value in attack.tuned.items()
    ]  # fmt: skip


def _counts(table: pd.DataFrame, protocol: str, level: str) -> list[tuple]:
    """Samples and patients per role (what every number of the experiment rests on)."""
    out = []
    for role in ROLES:
        part = table[table["role"] == role]
        for metric, n in (("n_samples", len(part)), ("n_patients", part["group_id"].nunique())):
            out.append(
                (metric, None, None, np.nan, np.nan, protocol, level, float(n), np.nan, np.nan, True, None, role, None)
            )
    return out


def _bootstrap(units: Units, rows, settings: MetricSettings, universe) -> dict[int, dict]:
    """The corrected estimate on each patient-bootstrap replicate (its own member draws), by
    replicate number. A replicate in which a role the estimate needs drew no patient with
    samples here has no estimate; the others keep their numbers, which pair them with the
    same replicate of every other experiment on the sample table."""
    if settings.bootstrap <= 0:
        return {}
    frame = units.frame
    strata = list(zip(frame["role"].astype(str), frame["source"].astype(str)))
    resampler = PatientResampler(strata, frame["group_id"].to_numpy(), settings.seed, universe)
    role = frame["role"].to_numpy()
    needed = ("member", "nonmember", *(THRESHOLD_ROLES[t] for t in settings.thresholds))
    replicates = {}
    for b in range(settings.bootstrap):
        drawn = resampler.rows(b)
        scores = {name: s[drawn] for name, s in units.scores.items()}
        drawn_rows = {r: np.nonzero(role[drawn] == r)[0] for r in ROLES}
        if any(len(drawn_rows[r]) == 0 for r in needed):
            continue
        rng = np.random.default_rng([settings.seed, 1, b])
        replicates[b] = _corrected_estimate(scores, drawn_rows, settings, rng)
    return replicates


def sample_universe(manifest: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """Every (role, source) of a sample table with its patients, sorted: the bootstrap's
    strata, shared by all experiments on that table."""
    pairs = manifest[["role", "source", "group_id"]].astype(str).drop_duplicates()
    return {key: sorted(part["group_id"]) for key, part in pairs.groupby(["role", "source"], sort=True)}


def point_estimates(metrics: pd.DataFrame) -> pd.DataFrame:
    """The estimate rows of a metrics table (not its bootstrap replicates)."""
    return metrics[metrics["replicate"].isna()]


def roc_points(
    table: pd.DataFrame,
    attacks: list[str],
    level: str = "sample",  # a tables spec experiment's default (pinned by tests/test_study.py)
    max_points: int = 2000,
    attack_params: dict | None = None,
) -> pd.DataFrame:
    """ROC curves of each attack over all members vs all non-members (matched pairs).

    ROC curves do not depend on the class balance, so no subsampling is needed."""
    chosen = [get_attack(name, (attack_params or {}).get(name)) for name in attacks]
    frames = []
    for part, part_attacks in scored_parts(table, chosen):
        units = attack_units(part, part_attacks, level)
        role = units.frame["role"].to_numpy()
        members, nonmembers = np.nonzero(role == "member")[0], np.nonzero(role == "nonmember")[0]
        y = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
        for name, score in units.scores.items():
            fpr, tpr = roc(y, np.r_[score[members], score[nonmembers]])
            if len(fpr) > max_points:
                keep = np.unique(
                    np.r_[np.linspace(0, len(fpr) - 1, max_points).astype(int), np.nonzero(fpr <= 0.01)[0]]
                )
                fpr, tpr = fpr[keep], tpr[keep]
            frames.append((name, pd.DataFrame({"attack": name, "fpr": fpr, "tpr": tpr})))
    order = {name: i for i, name in enumerate(attacks)}  # the curves in the order asked for
    frames = [frame for _, frame in sorted(frames, key=lambda item: order[item[0]])]
    return pd.DataFrame(pd.concat(frames, ignore_index=True)).assign(level=level)
