"""The canaries' sentences as a membership-inference test set: members are the inserted canaries,
non-members the never-inserted ones, and a population of further never-inserted canaries sets the
thresholds (Mireshghallah et al., EMNLP 2022); the loss and likelihood-ratio attacks on them, all
inserted canaries and each repetition count, beside the canaries' exposure
(`mlmia.memorization.canaries`). Tables name canary ids, never secrets."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.report.markdown import markdown_table

MEMBERSHIP_ATTACKS = ("loss", "likelihood_ratio")


def membership_settings(alpha: float, metrics: Mapping, attacks: Mapping | None = None) -> dict:
    """The `MetricSettings` fields (as a plain dict: a rule's params) of the canaries'
    membership test: the loss and likelihood-ratio attacks, the corrected protocol, the
    population threshold at `alpha`, and the draws, seed and bootstrap of the config's
    `metrics`; `attacks` holds the config's attack parameters."""
    return {
        "protocols": ["corrected"],
        "attacks": list(MEMBERSHIP_ATTACKS),
        "alphas": [float(alpha)],
        "thresholds": ["population"],
        "fprs": [],
        "draws": int(metrics["draws"]),
        "seed": int(metrics["seed"]),
        "bootstrap": int(metrics["bootstrap"]),
        "level": "sample",
        "attack_params": {name: dict((attacks or {}).get(name, {})) for name in MEMBERSHIP_ATTACKS},
    }


def membership_table(canaries: pd.DataFrame, target: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """The attack table of the canaries' sentences: one row per canary with its role (member:
    inserted; nonmember and population: never inserted), group_id (the canary: each its own
    unit), source "canary", repetitions, and target_energy / reference_energy from two score
    tables of the project's scorer (`score_samples`, sample_id = canary_id)."""
    table = canaries[["canary_id", "role", "repetitions"]].rename(columns={"canary_id": "sample_id"})
    table = table.assign(group_id=table["sample_id"], source="canary")
    for name, scores in (("target", target), ("reference", reference)):
        energy = scores.set_index(scores["sample_id"].astype(str))["energy"]
        missing = sorted(set(table["sample_id"]) - set(energy.index))
        if missing:
            raise UserError(f"canaries: the {name} scores lack canary {missing[0]}")
        table[f"{name}_energy"] = energy.loc[table["sample_id"]].to_numpy(dtype=float)
    return table.reset_index(drop=True)


def membership_metrics(table: pd.DataFrame, settings) -> pd.DataFrame:
    """`mlmia.attacks.protocols.attack_metrics` on all inserted canaries and on those of each
    repetition count (members of that count against every non-member; the population sets the
    threshold), the subset in column `canaries` ("all" or the count)."""
    from mlmia.attacks.protocols import attack_metrics

    parts = [("all", table)]
    for reps in sorted(table.loc[table["role"] == "member", "repetitions"].unique()):
        keep = (table["role"] != "member") | (table["repetitions"] == reps)
        parts.append((str(int(reps)), table[keep]))
    frames = []
    for name, part in parts:
        metrics = attack_metrics(part.reset_index(drop=True), settings, where=f"canaries ({name})")
        frames.append(metrics.assign(canaries=name))
    return pd.concat(frames, ignore_index=True)


def _interval(row) -> str:
    if pd.isna(row["value"]):
        return "n.r."
    text = f"{row['value']:.3f}" if row["metric"] == "auc" else f"{row['value']:.1f}"
    if pd.notna(row["ci_low"]) and pd.notna(row["ci_high"]):
        fmt = "{:.3f}" if row["metric"] == "auc" else "{:.1f}"
        text += f" [{fmt.format(row['ci_low'])}, {fmt.format(row['ci_high'])}]"
    return text


def membership_markdown(
    metrics: pd.DataFrame,
    exposures: pd.DataFrame,
    *,
    epoch: int,
    reference: str,
    energy: str,
    alpha: float,
) -> str:
    """One short Markdown table: per subset of inserted canaries (all, each repetition count),
    the members, their mean exact exposure at `epoch`, and the AUC of the loss and likelihood
    ratio attacks (95% bootstrap interval) with the ratio's recall at the population threshold."""
    point = metrics[metrics["replicate"].isna() & (metrics["protocol"] == "corrected")]
    final = exposures[exposures["epoch"] == epoch]
    n_non = int((final["role"] == "nonmember").sum())
    n_pop = int((final["role"] == "population").sum())
    lines = [
        "# Membership inference on the canary sentences",
        "",
        f"Target: the canary target after {epoch} epochs; reference: {reference}; energy: {energy}. Members: "
        f"the inserted canaries; non-members: {n_non} never-inserted canaries; the threshold (recall at "
        f"alpha = {alpha:g}) is set on {n_pop} further never-inserted canaries. Corrected protocol: members "
        "subsampled to the non-member count and averaged; 95% intervals from the bootstrap over canaries. "
        "Mean exposure: the exact exposure of the subset's members at the same epoch.",
        "",
    ]
    header = ["inserted canaries", "members", "mean exposure", "AUC (A) loss", "AUC (B) likelihood ratio",
              f"recall (B) at alpha {alpha:g} (%)"]  # fmt: skip

    def cell(subset: str, metric: str, attack: str) -> str:
        rows = point[(point["canaries"] == subset) & (point["metric"] == metric) & (point["attack"] == attack)]
        if metric == "recall":
            rows = rows[(rows["threshold"] == "population") & np.isclose(rows["alpha"], alpha)]
        return _interval(rows.iloc[0]) if len(rows) else "-"

    body = []
    for subset in dict.fromkeys(point["canaries"]):
        members = final[final["role"] == "member"]
        if subset != "all":
            members = members[members["repetitions"] == int(subset)]
        label = "all" if subset == "all" else f"x{subset}"
        body.append(
            [label, len(members), f"{members['exact_exposure'].mean():.2f}", cell(subset, "auc", "loss"),
             cell(subset, "auc", "likelihood_ratio"), cell(subset, "recall", "likelihood_ratio")]
        )  # fmt: skip
    never = final[final["role"] != "member"]
    body.append(["never inserted", 0, f"{never['exact_exposure'].mean():.2f}", "-", "-", "-"])
    lines.append(markdown_table(header, body))
    return "\n".join(lines) + "\n"
