"""Hisamoto, Post and Duh's findings (TACL 2020, Sections 5-6), checked cell by cell on the shadow
study's tables (`mlmia.shadow.report.shadow_tables`) and returned as `Finding` records for the
project's one findings renderer (`mlmia.report.finding`).

Every check compares a cell's accuracy (or AUC) with chance, 0.5, margin 0; the difference's
interval is the cell's group-bootstrap interval less 0.5:

- near_chance (Tables 2 and 3, Alice's probes; accuracy and AUC): *holds* when |value - 0.5| <=
  margin or the interval holds 0.5 (`near_chance`); its verdict *not separated* agrees,
  *separated* or *reversed* not;
- ood_above_chance (Table 4, every OOD subcorpus; accuracy: the share called out);
- oov_above_chance (Table 5, Bob:test's OOV pairs, the paper's subset, and Alice's OOV probes);
- group_above_chance (Table 6, Alice's pure groups, raw and adjusted; accuracy and group AUC);
- bob_group_above_chance (Table 6, Bob:valid and Bob:test: Bob's own held-out groups, the
  paper's positive evidence);

the last four *hold* when the value is above 0.5, *separated* when its interval is.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from mlmia.report.finding import Finding, interval_verdict

#: margin around 0.5 within which an accuracy or AUC counts as near chance (besides an interval holding 0.5)
NEAR_CHANCE_MARGIN = 0.05
CHANCE = 0.5
CHECKS = {
    "near_chance": "sample-level accuracy and AUC on Alice's probes are near 50%",
    "ood_above_chance": "accuracy on out-of-domain probes is above chance",
    "oov_above_chance": "accuracy on out-of-vocabulary sentences is above chance",
    "group_above_chance": "group-level accuracy and AUC on Alice's probe groups are above chance",
    "bob_group_above_chance": "group-level accuracy and AUC on Bob's own held-out groups are above chance",
}
FINDINGS_TITLE = "Findings of Hisamoto et al. (TACL 2020), checked on this run"
MEASURES = {"accuracy": ("accuracy", "ci_low", "ci_high", ".1%"), "AUC": ("auc", "auc_ci_low", "auc_ci_high", ".3f")}


def near_chance(value: float, low: float, high: float, margin: float = NEAR_CHANCE_MARGIN) -> bool:
    """Near 50%: the interval holds 0.5, or the value is within `margin` of it."""
    return bool((low <= 0.5 <= high) or abs(value - 0.5) <= margin)


def findings(
    tables: Mapping[str, pd.DataFrame], margin: float = NEAR_CHANCE_MARGIN, *, n_bootstrap: int
) -> list[Finding]:
    """The paper's findings checked cell by cell (see the module docstring)."""
    out = []

    def add(check: str, table: str, r, measure: str) -> None:
        column, low_column, high_column, fmt = MEASURES[measure]
        value, ci_low, ci_high = (
            float(getattr(r, column)),
            float(getattr(r, low_column)),
            float(getattr(r, high_column)),
        )
        if value != value:  # NaN: an empty set, or an AUC of one class
            return
        low, high = ci_low - CHANCE, ci_high - CHANCE
        verdict = interval_verdict(low, high, 0.0)
        holds = near_chance(value, ci_low, ci_high, margin) if check == "near_chance" else value > CHANCE
        label = (
            f"{measure}; near 50%: within {100 * margin:g} points of it, or its interval holds it"
            if check == "near_chance"
            else measure
        )
        out.append(
            Finding(
                finding=check, claim=CHECKS[check], kind="finding", scope=table, measure=label,
                first=f"{r.classifier} on {r.evaluation}", first_value=value, first_ci_low=ci_low,
                first_ci_high=ci_high, second="chance", second_value=CHANCE, difference=value - CHANCE,
                difference_ci_low=low, difference_ci_high=high,
                interval="group bootstrap, 95% percentile interval (the value's, less 0.5)",
                n=int(n_bootstrap) if verdict != "not resolvable" else 0, margin=0.0, holds=bool(holds),
                verdict=verdict, note="no interval (too few resamplable units)" if verdict == "not resolvable" else "",
                number_format=fmt,
            )
        )  # fmt: skip

    for key in ("table2", "table3"):
        if key in tables:
            for r in tables[key][tables[key]["evaluation"] == "Alice"].itertuples():
                add("near_chance", key, r, "accuracy")
                add("near_chance", key, r, "AUC")
    if "table4" in tables:
        for r in tables["table4"].itertuples():
            add("ood_above_chance", "table4", r, "accuracy")
    if "table5" in tables:
        t5 = tables["table5"]
        for r in t5[t5["evaluation"].isin(["Bob:test OOV", "Alice OOV"])].itertuples():
            add("oov_above_chance", "table5", r, "accuracy")
            add("oov_above_chance", "table5", r, "AUC")
    if "table6" in tables:
        t6 = tables["table6"]
        for check, sets in (("group_above_chance", ["Alice (raw)", "Alice (adjusted)"]),
                            ("bob_group_above_chance", ["Bob:valid", "Bob:test"])):  # fmt: skip
            for r in t6[t6["evaluation"].isin(sets)].itertuples():
                add(check, "table6", r, "accuracy")
                add(check, "table6", r, "AUC")
    return out


def findings_method(n_bootstrap: int) -> str:
    """The method paragraph of the shadow study's findings file."""
    return (
        "Each attack classifier's accuracy (and threshold-free AUC, where the set holds in and out) on a set of probes "
        f"against chance (50%). In brackets: 95% percentile intervals of the document bootstrap ({int(n_bootstrap)} "
        "resamples; for groups, the groups rebuilt from the drawn documents; n: the resamples); the difference's "
        "interval is the value's less 50%. *Above chance* holds when the value is above 50%. *Near 50%* is a claim "
        "that the difference is small: it holds when the value is within the band of the measure or its interval "
        "holds 50% (*not separated*, the verdict that agrees with it)."
    )
