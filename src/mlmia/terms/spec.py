"""The tables spec's terms: a cell of a table or finding, the target groups, which
experiments and attacks a figure reads, and a spec without one group's items."""

from __future__ import annotations

from dataclasses import dataclass

#: what a table row or column may pin down of a cell
CELL_KEYS = ("metric", "attack", "threshold", "fpr", "split", "features", "role", "versus")
METRICS = ("auc", "tpr_at_fpr", "precision", "recall")
COUNT_METRICS = ("n_samples", "n_patients")
THRESHOLD_METRICS = ("precision", "recall")
#: the target group of what `snakemake` builds; tables, figures and findings may name another (`snakemake zoo`)
DEFAULT_GROUP = "default"
#: the DP audit's target group (`snakemake dp`): built only when the config has `dp_audit`
DP_GROUP = "dp"


@dataclass(frozen=True)
class Cell:
    """One metric of one experiment: e.g. the likelihood ratio's recall at the population
    threshold, or its TPR at 1% FPR."""

    metric: str
    attack: str | None = None
    threshold: str | None = None
    fpr: float | None = None
    split: str | None = None
    features: str | None = None
    role: str | None = None
    versus: str | None = None  # a second attack: the cell also shows its paired difference to it

    @classmethod
    def pinned(cls, *parts: dict) -> Cell:
        """The cell that a row and a column pin down together (a later part wins)."""
        merged: dict = {}
        for part in parts:
            merged.update({key: part[key] for key in CELL_KEYS if part.get(key) is not None})
        return cls(**merged)

    @property
    def key(self) -> str:
        """The paper-values key: "metric/attack[/threshold][@fpr]" ("recall/loss/heldin_mean")."""
        parts = [self.metric, self.attack or self.features or self.role or ""]
        if self.threshold:
            parts.append(self.threshold)
        text = "/".join(parts)
        return text + (f"@{self.fpr:g}" if self.fpr is not None else "") + (f":{self.split}" if self.split else "")


def without_group(spec: dict, group: str) -> dict:
    """The spec without the tables, figures and findings of target group `group`, and without the
    experiments that only they read."""

    def dropped(item: dict) -> bool:
        return item.get("group", DEFAULT_GROUP) == group

    def read(item: dict) -> set:
        scope = item.get("experiments") if isinstance(item.get("experiments"), list) else []
        names = {c["experiment"] for c in item.get("columns", [])}
        names |= {e for entry in scope for e in ([entry] if isinstance(entry, str) else entry)}
        names |= {item["experiment"]} if isinstance(item.get("experiment"), str) else set()
        return names | {item[s]["experiment"] for s in ("compare", "against") if "experiment" in item.get(s, {})}

    items = list(spec.get("tables", {}).values()) + list(spec.get("figures", {}).values()) + spec.get("findings", [])
    gone, kept = set(), set()
    for item in items:
        (gone if dropped(item) else kept).update(read(item))
    gone -= kept
    return {
        **spec,
        "experiments": {n: e for n, e in spec["experiments"].items() if n not in gone},
        "tables": {n: t for n, t in spec.get("tables", {}).items() if not dropped(t)},
        "figures": {n: f for n, f in spec.get("figures", {}).items() if not dropped(f)},
        "findings": [f for f in spec.get("findings", []) if not dropped(f)],
    }


def figure_experiments(figure: dict) -> list[str]:
    return list(figure["experiments"]) if "experiments" in figure else [figure["experiment"]]


def figure_attacks(figure: dict) -> list[str]:
    """The attacks a figure draws (a histogram also those that pick its marked member)."""
    if figure.get("kind") == "histogram":
        marks = [figure["mark_caught_by"], figure["mark_missed_by"]] if figure["mark"] == "auto" else []
        return list(dict.fromkeys([figure["attack"], *marks]))
    return list(figure["attacks"])
