"""An audit card's membership section: the paper's attack and the strongest attack of an attack
table, the strongest chosen on one half of the patients and reported on the other.

Picking the best of many attacks on the data it is then reported on flatters it (the winner's
curse: the maximum of noisy estimates is biased upwards). So each (role, source)'s patients are
split in two halves by a seeded order of their ids (`patient_halves`: the same patient falls in the
same half in every experiment on the sample table); the attack with the highest AUC on the
selection half (`select`: ties go to the paper's attack, then to the order of the candidates) is
measured on the report half, beside the paper's attack (the likelihood ratio, chosen before looking)
and the attacks that read no model (the blind baseline: how far the two sets differ without any
model). Measures (`mlmia.metrics.classification`): AUC and TPR at each FPR, all members against all
non-members of the half (ROC curves do not depend on the class balance), at the sample level and at
the patient level (a patient's statistic is the mean over its samples, as the metrics take it); a
TPR at an FPR below 1 / non-members is not resolvable (`resolvable`) and given as such. Intervals:
the patient bootstrap over the report half (`mlmia.metrics.bootstrap.PatientResampler`, patients
drawn within each role and source), every attack on the same resamples, so the difference between
the strongest and the paper's attack is paired.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import attack_units, scored_parts
from mlmia.core.keys import stable_key
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.classification import resolvable, roc
from mlmia.metrics.intervals import percentile_interval

LEVELS = ("sample", "patient")
#: the roles a membership decision compares
COMPARED = ("member", "nonmember")
SELECTION, REPORT = "selection", "report"


def attack_label(name: str) -> str:
    """How a card names an attack: its label and its registry name."""
    return f"{get_attack(name).label} (`{name}`)"


def patient_halves(frame: pd.DataFrame, seed: int) -> dict[str, str]:
    """Each patient's half (`SELECTION` or `REPORT`): within each (role, source), the patients ordered by
    a hash of (seed, id), the first half (rounded down) to the selection."""
    patients = frame[["role", "source", "group_id"]].astype(str).drop_duplicates("group_id")
    halves = {}
    for _, part in patients.groupby(["role", "source"], sort=True):
        ordered = sorted(part["group_id"], key=lambda g: (stable_key(f"{seed}/{g}"), g))
        cut = len(ordered) // 2
        halves |= {g: SELECTION if i < cut else REPORT for i, g in enumerate(ordered)}
    return halves


def sample_scores(table: pd.DataFrame, name: str, params: dict | None) -> pd.DataFrame:
    """One attack's member score (higher: member) per member and non-member sample, computed on the
    whole table as the metrics compute it (an attack that compares rows sees them all). Columns role,
    source, group_id, sample_id, score, sorted so that every attack's samples come in one order."""
    attack = get_attack(name, params)
    ((part, _),) = scored_parts(table, [attack])
    units = attack_units(part, [attack], "sample", where=f"attack table, attack {name!r}")
    frame = units.frame[["role", "source", "group_id", "sample_id"]].astype(str).assign(score=units.scores[name])
    frame = frame[frame["role"].isin(COMPARED)]
    return frame.sort_values(["role", "source", "group_id", "sample_id"]).reset_index(drop=True)


def patient_scores(samples: pd.DataFrame) -> pd.DataFrame:
    """A patient's statistic: the mean over its samples (`mlmia.attacks.protocols.attack_units`)."""
    return samples.groupby(["role", "source", "group_id"], as_index=False, sort=True)["score"].mean()


def measures(member: np.ndarray, score: np.ndarray, fprs) -> dict[str, float]:
    """AUC and the TPR at each FPR (NaN where not resolvable) of one set of units."""
    fpr, tpr = roc(member, score)
    out = {"auc": float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))}
    negatives = int((~member).sum())
    for level in fprs:
        out[f"tpr@{level:g}"] = float(tpr[fpr <= level + 1e-12].max()) if resolvable(level, negatives) else np.nan
    return out


def select(selection_auc: dict[str, float], paper: str) -> str:
    """The strongest attack: the highest AUC on the selection half; a tie goes to the paper's attack,
    then to the first in the candidates' order."""
    best = max(selection_auc.values())
    tied = [name for name, value in selection_auc.items() if value == best]
    return paper if paper in tied else tied[0]


def membership(table: pd.DataFrame, settings: dict) -> dict:
    """The card's membership numbers on one attack table (`settings`: the card's, from
    `mlmia.study.plans.cards.card_settings`): per level the selection half's AUC of every candidate,
    the strongest, and the report half's measures of the paper's attack, the strongest and the
    baselines with intervals, and the strongest minus the paper's."""
    return membership_scores(table, settings)[0]


def membership_scores(table: pd.DataFrame, settings: dict) -> tuple[dict, dict[str, dict[str, pd.DataFrame]]]:
    """`membership`'s numbers, and the report half's scores they were measured on: {level: {attack:
    frame of role, source, group_id, score}} of the attacks shown (the card's ROC curves)."""
    halves = patient_halves(table[table["role"].isin(COMPARED)], settings["seed"])
    fprs, params, paper = settings["fprs"], settings["attack_params"], settings["paper_attack"]
    out, shown_scores = {"split": _split_counts(table, halves), "levels": {}}, {}
    by_sample = {
        name: sample_scores(table, name, params.get(name)) for name in [*settings["attacks"], *settings["baselines"]]
    }
    for level in LEVELS:
        scores = {}
        for name, frame in by_sample.items():
            if level == "patient" and not get_attack(name).aggregates:
                continue
            frame = patient_scores(frame) if level == "patient" else frame
            scores[name] = frame.assign(half=frame["group_id"].map(halves))
        candidates = [name for name in settings["attacks"] if name in scores]
        if not candidates:
            continue
        selection_auc = {}
        for name in candidates:
            part = scores[name][scores[name]["half"] == SELECTION]
            selection_auc[name] = measures((part["role"] == "member").to_numpy(), part["score"].to_numpy(), fprs)["auc"]
        strongest = select(selection_auc, paper)
        shown = list(dict.fromkeys([*([paper] if paper in scores else []), strongest,
                                    *(b for b in settings["baselines"] if b in scores)]))  # fmt: skip
        report = {name: scores[name][scores[name]["half"] == REPORT].reset_index(drop=True) for name in shown}
        out["levels"][level] = {
            "selection_auc": selection_auc,
            "strongest": strongest,
            **_reported(report, paper, strongest, fprs, settings["bootstrap"], settings["bootstrap_seed"]),
        }
        shown_scores[level] = report
    return out, shown_scores


def _split_counts(table: pd.DataFrame, halves: dict[str, str]) -> dict:
    """Patients and samples of each compared role in each half."""
    rows = table[table["role"].isin(COMPARED)].assign(half=lambda t: t["group_id"].astype(str).map(halves))
    return {
        half: {role: {"patients": int(part["group_id"].nunique()), "samples": len(part)}
               for role, part in rows[rows["half"] == half].groupby("role")}
        for half in (SELECTION, REPORT)
    }  # fmt: skip


def _reported(frames: dict[str, pd.DataFrame], paper: str, strongest: str, fprs, replicates: int, seed: int) -> dict:
    """Each attack's measures on the report half with their patient-bootstrap intervals, and the
    paired difference strongest minus paper's (when they differ)."""
    first = next(iter(frames.values()))
    strata = list(zip(first["role"], first["source"]))
    universe = {key: sorted(set(first["group_id"][[s == key for s in strata]])) for key in dict.fromkeys(strata)}
    resampler = PatientResampler(strata, first["group_id"].to_numpy(), seed, universe)
    member = (first["role"] == "member").to_numpy()
    draws = [resampler.rows(b) for b in range(replicates)]
    attacks, values = {}, {}
    for name, frame in frames.items():
        score = frame["score"].to_numpy()
        point = measures(member, score, fprs)
        reps = [measures(member[rows], score[rows], fprs) if member[rows].any() and (~member[rows]).any() else None
                for rows in draws]  # fmt: skip
        values[name] = {key: np.array([np.nan if r is None else r[key] for r in reps]) for key in point}
        attacks[name] = {key: {"value": value, "interval": percentile_interval(values[name][key])}
                         for key, value in point.items()}  # fmt: skip
    difference = None
    if strongest != paper and paper in frames:
        difference = {}
        for key in attacks[strongest]:
            value = attacks[strongest][key]["value"] - attacks[paper][key]["value"]
            low, high = percentile_interval(values[strongest][key] - values[paper][key])
            difference[key] = {"value": value, "interval": (low, high),
                               "separated": bool(np.isfinite(low) and (low > 0 or high < 0))}  # fmt: skip
    return {"members": int(member.sum()), "nonmembers": int((~member).sum()), "attacks": attacks,
            "difference": difference}  # fmt: skip
