"""The paper's tables and Figure 7 for the shadow-model attack on MLMs (Hisamoto, Post and Duh, TACL 2020,
Tables 2-6 and Figure 7), as tidy DataFrames, Markdown and a plot, and the findings read off them.

Inputs are two feature tables, never text:

- Bob's labelled pairs (`bob_feature_table`): one row per (sentence of Bob, shadow model)
  with `sample_id`, `group_id`, `shadow`, `member`, `split` (train/valid/test) and the
  shadow model's fill-in features of the sentence (`mlmia.shadow.features`);
- the probes (`probe_feature_table`): Carol's probes with `member` (True for in-probes),
  `probe_set` ("alice" for in- and out-probes, "ood"), `subcorpus`, `group_id`, `oov` and
  Alice's model's fill-in features.

Tables (tidy columns `TIDY_COLUMNS`; accuracy as a fraction, intervals from the group
bootstrap of `mlmia.shadow.classify`):

- Table 2: the five classifiers on BLEU and top-1 accuracy, trained on Bob:train,
  evaluated on Bob:train, Bob:valid, Bob:test and on Alice's probes (the real attack).
- Table 3: the same with the model score (fill-in energy) added.
- Table 4: Table 2's classifiers on each OOD subcorpus's probes, all "out": accuracy is the
  fraction called out.
- Table 5: Table 2's classifiers on the out-of-vocabulary subsets: probes holding a word
  absent from Bob's text (`mlmia.shadow.features.oov_flags`): all of Alice's such probes,
  its in- and out-probes apart, and the OOD probes.
- Table 6: group classifiers (`mlmia.shadow.groups`) trained on Bob's groups of n
  sentences, on Bob's groups and Alice's probe groups with raw and adjusted features. Here
  the bootstrap resamples the probe groups (sets of sentences), not documents: a group's
  prediction depends on all its sentences. With one probe per document (the default of
  `carol_split`) no document is in two of Alice's probe groups.
- Figure 7: the group classifiers on groups mixing in- and out-probes.

`selected` marks the classifier Bob would pick, the best on Bob:valid (ties: the paper's
order). The Markdown renderer prints accuracy in percent, names and counts only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import atomic_path, require_columns
from mlmia.metrics.intervals import group_bootstrap
from mlmia.report.finding import Finding, interval_verdict, render_findings
from mlmia.report.markdown import markdown_table
from mlmia.shadow.classify import (
    ACCURACY_COLUMNS,
    FEATURES,
    MODEL_SCORE_FEATURES,
    N_BOOTSTRAP,
    accuracy_table,
    fit_classifiers,
    predict,
)
from mlmia.shadow.features import oov_flags
from mlmia.shadow.groups import (
    BLEU_EDGES,
    IN_PERCENTAGES,
    adjust,
    adjustment_shift,
    group_feature_columns,
    group_features,
    mixed_groups,
    sentence_groups,
)
from mlmia.shadow.split import probe_table

TIDY_COLUMNS = ["table", "features", *ACCURACY_COLUMNS, "selected"]
FIGURE_COLUMNS = ["classifier", "features", "in_percentage", "accuracy", "ci_low", "ci_high", "called_in", "n_groups"]
BOB_SETS = ("Bob:train", "Bob:valid", "Bob:test")
TITLES = {
    "table2": "Table 2: sample-level attack (features: sentence BLEU, top-1 accuracy)",
    "table3": "Table 3: sample-level attack with the model score (features: BLEU, top-1 accuracy, energy)",
    "table4": "Table 4: out-of-domain probes (all out; accuracy = fraction called out)",
    "table5": "Table 5: out-of-vocabulary subsets (probes holding a word absent from Bob's text)",
    "table6": "Table 6: group-level attack (BLEU histogram and corpus BLEU of groups of sentences)",
}
#: margin around 0.5 within which an accuracy counts as near chance (besides an interval holding 0.5)
NEAR_CHANCE_MARGIN = 0.05


# --------------------------------------------------------------------------- assembling the inputs


def bob_feature_table(pairs: pd.DataFrame, features_by_shadow: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Bob's labelled pairs (`shadow_splits`) with each shadow model's fill-in features of the
    sentence (`features_by_shadow[s]`: `fill_in_features` of shadow model s on Bob's data)."""
    require_columns(pairs, ["sample_id", "group_id", "shadow", "member", "split"], "Bob's pairs")
    frames = []
    for shadow in sorted(pairs["shadow"].unique()):
        if int(shadow) not in features_by_shadow:
            raise UserError(f"Bob's features: none for shadow model {int(shadow)}")
        rows = pairs[pairs["shadow"] == shadow]
        feats = features_by_shadow[int(shadow)].drop(columns=["text"], errors="ignore")
        merged = rows.merge(feats.assign(sample_id=feats["sample_id"].astype(str)), on="sample_id", how="left")
        missing = int(merged["bleu"].isna().sum())
        if missing:
            raise UserError(f"Bob's features: {missing} of shadow model {int(shadow)}'s sentences have no features")
        frames.append(merged)
    return pd.concat(frames, ignore_index=True)


def probe_feature_table(split: pd.DataFrame, alice_features: pd.DataFrame) -> pd.DataFrame:
    """Carol's probes (`probe_table` of a `carol_split` table) with Alice's model's fill-in
    features and the `oov` flag against Bob's text (the split's `bob` rows); no text column."""
    probes = probe_table(split)
    probes["oov"] = oov_flags(probes["text"], split.loc[split["bob"].astype(bool), "text"])
    feats = alice_features.drop(columns=["text"], errors="ignore")
    merged = probes.drop(columns=["text"]).merge(
        feats.assign(sample_id=feats["sample_id"].astype(str)), on="sample_id", how="left"
    )
    missing = int(merged["bleu"].isna().sum())
    if missing:
        raise UserError(f"probe features: {missing} of {len(merged)} probes have no features from Alice's model")
    return merged


# --------------------------------------------------------------------------- tables


def _tidy(table: str, features: str, accuracy: pd.DataFrame) -> pd.DataFrame:
    out = accuracy.copy()
    out.insert(0, "features", features)
    out.insert(0, "table", table)
    valid = out[out["evaluation"] == "Bob:valid"]
    best = (
        valid.loc[valid["accuracy"].idxmax(), "classifier"] if len(valid) and valid["accuracy"].notna().any() else None
    )
    out["selected"] = out["classifier"] == best
    return out[TIDY_COLUMNS]


def _bob_sets(bob: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {f"Bob:{s}": bob[bob["split"] == s] for s in ("train", "valid", "test")}


def sample_table(
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    features: Sequence[str],
    seed: int,
    n_bootstrap: int = N_BOOTSTRAP,
    table: str = "table2",
) -> tuple[pd.DataFrame, dict]:
    """Table 2 (features `FEATURES`) or Table 3 (`MODEL_SCORE_FEATURES`): (tidy, classifiers)."""
    sets = _bob_sets(bob)
    classifiers = fit_classifiers(sets["Bob:train"], features, seed)
    sets["Alice"] = probes[probes["probe_set"] == "alice"]
    accuracy = accuracy_table(classifiers, sets, features, seed, n_bootstrap)
    return _tidy(table, " + ".join(features), accuracy), classifiers


def ood_table(
    classifiers: dict, probes: pd.DataFrame, features: Sequence[str], seed: int, n_bootstrap: int = N_BOOTSTRAP
) -> pd.DataFrame:
    """Table 4: accuracy on each OOD subcorpus (its probes are all out)."""
    ood = probes[probes["probe_set"] == "ood"]
    sets = {str(name): rows for name, rows in ood.groupby("subcorpus", sort=True)}
    if not sets:
        raise UserError("Table 4: no OOD probes")
    return _tidy("table4", " + ".join(features), accuracy_table(classifiers, sets, features, seed, n_bootstrap))


def oov_table(
    classifiers: dict, probes: pd.DataFrame, features: Sequence[str], seed: int, n_bootstrap: int = N_BOOTSTRAP
) -> pd.DataFrame:
    """Table 5: accuracy on the OOV subsets (an empty subset gives NaN)."""
    oov = probes[probes["oov"].astype(bool)]
    alice = oov[oov["probe_set"] == "alice"]
    sets = {
        "Alice OOV": alice,
        "Alice OOV in": alice[alice["member"].astype(bool)],
        "Alice OOV out": alice[~alice["member"].astype(bool)],
        "OOD OOV": oov[oov["probe_set"] == "ood"],
    }
    return _tidy("table5", " + ".join(features), accuracy_table(classifiers, sets, features, seed, n_bootstrap))


def _group_sets(bob: pd.DataFrame, probes: pd.DataFrame, size: int, seed: int, edges) -> tuple[dict, pd.DataFrame]:
    bob_groups = group_features(
        sentence_groups(bob, size, seed, ["split", "shadow", "member"]), edges, keep=["split", "member"]
    )
    alice = probes[probes["probe_set"] == "alice"]
    alice_groups = group_features(sentence_groups(alice, size, seed, ["member"]), edges, keep=["member"])
    sets = {f"Bob:{s}": bob_groups[bob_groups["split"] == s] for s in ("train", "valid", "test")}
    for name, frame in [*sets.items(), ("Alice", alice_groups)]:
        if frame["member"].nunique() < 2:
            raise UserError(
                f"Table 6: {name} has {len(frame)} complete groups of {size}, not both in and out; give more "
                "probes or a smaller group size"
            )
    return sets, alice_groups


def group_table(
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    seed: int,
    n_bootstrap: int = N_BOOTSTRAP,
    size: int = 10,
    edges: Sequence[float] = BLEU_EDGES,
) -> tuple[pd.DataFrame, dict, pd.Series]:
    """Table 6: (tidy, group classifiers, adjustment shift). The classifiers are trained on
    Bob:train's groups (raw features) and evaluated on Bob's groups, on Alice's probe groups
    with raw features ("Alice (raw)") and with adjusted ones ("Alice (adjusted)")."""
    columns = group_feature_columns(edges)
    sets, alice_groups = _group_sets(bob, probes, size, seed, edges)
    classifiers = fit_classifiers(sets["Bob:train"], columns, seed)
    shift = adjustment_shift(alice_groups, sets["Bob:train"], columns)
    raw = accuracy_table(
        classifiers, {**sets, "Alice (raw)": alice_groups}, columns, seed, n_bootstrap, group="probe_group"
    )
    adjusted = accuracy_table(
        classifiers, {"Alice (adjusted)": adjust(alice_groups, shift)}, columns, seed, n_bootstrap, group="probe_group"
    )
    tidy = _tidy("table6", f"groups of {int(size)}", pd.concat([raw, adjusted], ignore_index=True))
    order = {c: i for i, c in enumerate(classifiers)}
    tidy = tidy.sort_values("classifier", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return tidy, classifiers, shift


def mixed_table(
    classifiers: dict,
    probes: pd.DataFrame,
    seed: int,
    n_bootstrap: int = N_BOOTSTRAP,
    size: int = 10,
    edges: Sequence[float] = BLEU_EDGES,
    shift: pd.Series | None = None,
    percentages: Sequence[int] = IN_PERCENTAGES,
    max_groups: int = 100,
    in_threshold: float = 0.5,
) -> pd.DataFrame:
    """Figure 7's numbers: for each in-percentage, the group classifiers' accuracy on mixed
    groups of Alice's probes (truth "in" when the in-share is >= `in_threshold`), its
    interval (bootstrap over the mixed groups) and `called_in`, the fraction called in.
    With `shift` the features are adjusted (`mlmia.shadow.groups.adjust`)."""
    columns = group_feature_columns(edges)
    alice = probes[probes["probe_set"] == "alice"]
    mixed = mixed_groups(
        alice[alice["member"].astype(bool)], alice[~alice["member"].astype(bool)], size, seed, percentages, max_groups
    )
    groups = group_features(mixed, edges, keep=["in_percentage", "in_fraction"])
    if shift is not None:
        groups = adjust(groups, shift)
    rows = []
    for p, frame in groups.groupby("in_percentage", sort=True):
        pred = predict(classifiers, frame, columns)
        truth = frame["in_fraction"].to_numpy(dtype=float) >= float(in_threshold) - 1e-12
        correct = np.column_stack([pred[c].to_numpy() == truth for c in classifiers])
        point, low, high = group_bootstrap(correct, frame["probe_group"], None, seed, n_bootstrap, stratum=f"mixed/{p}")
        for c, name in enumerate(classifiers):
            rows.append(
                {
                    "classifier": name,
                    "features": "raw" if shift is None else "adjusted",
                    "in_percentage": int(p),
                    "accuracy": float(point[c]),
                    "ci_low": float(low[c]),
                    "ci_high": float(high[c]),
                    "called_in": float(pred[name].mean()),
                    "n_groups": len(frame),
                }
            )
    return pd.DataFrame(rows, columns=FIGURE_COLUMNS)


def plot_mixed(figure: pd.DataFrame, path: str | os.PathLike, title: str = "Figure 7: mixed groups") -> None:
    """Plot Figure 7 to `path` (format from its suffix: png, pdf, svg), written atomically:
    left, accuracy with its interval against the percentage of in-sentences, one line per
    classifier; right, the fraction of groups called in."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suffix = os.path.splitext(str(path))[1].lstrip(".").lower() or "png"
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, rows in figure.groupby("classifier", sort=False):
        rows = rows.sort_values("in_percentage")
        x = rows["in_percentage"].to_numpy()
        (line,) = left.plot(x, 100 * rows["accuracy"], marker="o", ms=3, lw=1.2, label=name)
        left.fill_between(x, 100 * rows["ci_low"], 100 * rows["ci_high"], color=line.get_color(), alpha=0.15, lw=0)
        right.plot(x, 100 * rows["called_in"], marker="o", ms=3, lw=1.2, label=name)
    for ax, label in ((left, "accuracy (%)"), (right, "groups called in (%)")):
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("in-sentences in the group (%)")
        ax.set_ylabel(label)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    left.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=suffix, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- everything at once


def shadow_tables(
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    seed: int,
    *,
    n_bootstrap: int = N_BOOTSTRAP,
    group_size: int = 10,
    edges: Sequence[float] = BLEU_EDGES,
    percentages: Sequence[int] = IN_PERCENTAGES,
    max_mixed_groups: int = 100,
    in_threshold: float = 0.5,
    figure_features: str = "raw",
    margin: float = NEAR_CHANCE_MARGIN,
) -> dict[str, pd.DataFrame | list[Finding]]:
    """Tables 2-6 and Figure 7's numbers ("figure7"; features "raw" or "adjusted") as tidy
    DataFrames keyed table2 ... table6, figure7, and the findings (`Finding` records, "findings")."""
    if figure_features not in ("raw", "adjusted"):
        raise UserError(f"figure features must be raw or adjusted, got {figure_features!r}")
    table2, classifiers = sample_table(bob, probes, FEATURES, seed, n_bootstrap, "table2")
    table3, _ = sample_table(bob, probes, MODEL_SCORE_FEATURES, seed, n_bootstrap, "table3")
    table4 = ood_table(classifiers, probes, FEATURES, seed, n_bootstrap)
    table5 = oov_table(classifiers, probes, FEATURES, seed, n_bootstrap)
    table6, group_classifiers, shift = group_table(bob, probes, seed, n_bootstrap, group_size, edges)
    figure7 = mixed_table(
        group_classifiers,
        probes,
        seed,
        n_bootstrap,
        group_size,
        edges,
        shift if figure_features == "adjusted" else None,
        percentages,
        max_mixed_groups,
        in_threshold,
    )
    tables = {"table2": table2, "table3": table3, "table4": table4, "table5": table5, "table6": table6}
    tables["figure7"] = figure7
    tables["findings"] = findings(tables, margin, n_bootstrap)
    return tables


# --------------------------------------------------------------------------- Markdown


def _percent(value: float) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{100 * value:.1f}"


def render_markdown(tidy: pd.DataFrame, title: str, n_bootstrap: int = N_BOOTSTRAP) -> str:
    """A tidy table as Markdown: one row per classifier (the one Bob selects marked *), one
    column per evaluation set, cells "accuracy [interval]" in percent, a last row with the
    number of rows and of bootstrap units of each set; one line of notes above."""
    unit = "probe groups" if (tidy["table"] == "table6").any() else "documents/patients"
    note = f"Accuracy (%) [brackets: 95% percentile bootstrap interval, {int(n_bootstrap)} resamples of {unit}]"
    if tidy["selected"].any():
        note += "; * the classifier Bob selects (best on Bob:valid)"
    if tidy["accuracy"].isna().any():
        note += "; – no probe in that set"
    lines = [f"# {title}", "", note + "; last row: n (bootstrap units).", ""]
    headers = list(dict.fromkeys(tidy["evaluation"]))
    body = []
    for name in dict.fromkeys(tidy["classifier"]):
        rows = tidy[tidy["classifier"] == name].set_index("evaluation")
        cells = []
        for h in headers:
            if h not in rows.index:
                cells.append("")
                continue
            r = rows.loc[h]
            text = _percent(r["accuracy"])
            if np.isfinite(r["ci_low"]):
                text += f" [{_percent(r['ci_low'])}, {_percent(r['ci_high'])}]"
            cells.append(text)
        mark = " *" if bool(rows["selected"].any()) else ""
        body.append([f"{name}{mark}", *cells])
    counts = tidy.drop_duplicates("evaluation").set_index("evaluation")
    body.append(["n", *(f"{int(counts.loc[h, 'n'])} ({int(counts.loc[h, 'n_groups'])})" for h in headers)])
    lines += [markdown_table(["classifier", *headers], body), ""]
    return "\n".join(lines)


def render_figure_markdown(figure: pd.DataFrame, n_bootstrap: int = N_BOOTSTRAP) -> str:
    """Figure 7's numbers as a Markdown table: rows classifiers, columns in-percentages."""
    lines = [
        "# Figure 7: group-level attack on groups mixing in- and out-probes",
        "",
        f"Accuracy (%) [brackets: 95% percentile bootstrap interval, {int(n_bootstrap)} resamples of mixed groups] "
        "against the percentage of in-sentences; (called in: % of groups called in).",
        "",
    ]
    headers = [f"{int(p)}%" for p in sorted(figure["in_percentage"].unique())]
    body = []
    for name, rows in figure.groupby("classifier", sort=False):
        rows = rows.sort_values("in_percentage")
        cells = [
            f"{_percent(r.accuracy)} [{_percent(r.ci_low)}, {_percent(r.ci_high)}] ({_percent(r.called_in)})"
            for r in rows.itertuples()
        ]
        body.append([name, *cells])
    lines += [markdown_table(["classifier", *headers], body), ""]
    return "\n".join(lines)


def render_all(tables: Mapping[str, pd.DataFrame | list[Finding]], n_bootstrap: int = N_BOOTSTRAP) -> dict[str, str]:
    """Markdown of every table `shadow_tables` returns (keys as there)."""
    out = {key: render_markdown(tables[key], TITLES[key], n_bootstrap) for key in TITLES if key in tables}
    if "figure7" in tables:
        out["figure7"] = render_figure_markdown(tables["figure7"], n_bootstrap)
    if "findings" in tables:
        out["findings"] = render_findings(tables["findings"], FINDINGS_TITLE, findings_method(n_bootstrap))
    return out


# --------------------------------------------------------------------------- findings

CHECKS = {
    "near_chance": "sample-level accuracy on Alice's probes is near 50%",
    "ood_above_chance": "accuracy on out-of-domain probes is above chance",
    "group_above_chance": "group-level accuracy on Alice's probe groups is above chance",
}
CHANCE = 0.5
FINDINGS_TITLE = "Findings of Hisamoto et al. (TACL 2020), checked on this run"


def near_chance(accuracy: float, low: float, high: float, margin: float = NEAR_CHANCE_MARGIN) -> bool:
    """Near 50%: the interval holds 0.5, or the accuracy is within `margin` of it."""
    return bool((low <= 0.5 <= high) or abs(accuracy - 0.5) <= margin)


def findings(
    tables: Mapping[str, pd.DataFrame], margin: float = NEAR_CHANCE_MARGIN, n_bootstrap: int = N_BOOTSTRAP
) -> list[Finding]:
    """The paper's findings checked cell by cell, each cell's accuracy against chance (0.5; margin 0),
    the difference's interval the accuracy's group-bootstrap interval less 0.5
    (`mlmia.report.finding` maps the old holds / does not hold onto the verdicts):

    - near_chance (Tables 2 and 3, Alice): holds when |accuracy - 0.5| <= margin or the interval
      holds 0.5 (`near_chance`); its verdict *not separated* agrees, *separated* or *reversed* not;
    - ood_above_chance (Table 4, every OOD subcorpus): holds when the accuracy is above 0.5,
      *separated* when its interval is;
    - group_above_chance (Table 6, Alice raw and adjusted): the same.
    """
    out = []

    def add(check: str, table: str, r, holds: bool, measure: str = "accuracy") -> None:
        low, high = r.ci_low - CHANCE, r.ci_high - CHANCE
        verdict = interval_verdict(low, high, 0.0)
        out.append(
            Finding(
                finding=check, claim=CHECKS[check], kind="finding", scope=table, measure=measure,
                first=f"{r.classifier} on {r.evaluation}", first_value=float(r.accuracy),
                first_ci_low=float(r.ci_low), first_ci_high=float(r.ci_high), second="chance",
                second_value=CHANCE, difference=float(r.accuracy - CHANCE), difference_ci_low=float(low),
                difference_ci_high=float(high),
                interval="group bootstrap, 95% percentile interval (the accuracy's, less 0.5)",
                n=int(n_bootstrap) if verdict != "not resolvable" else 0, margin=0.0, holds=bool(holds),
                verdict=verdict, note="no probe in that set" if verdict == "not resolvable" else "",
                number_format=".1%",
            )
        )  # fmt: skip

    band = f"accuracy; near 50%: within {100 * margin:g} points of it, or its interval holds it"
    for key in ("table2", "table3"):
        if key in tables:
            for r in tables[key][tables[key]["evaluation"] == "Alice"].itertuples():
                add("near_chance", key, r, near_chance(r.accuracy, r.ci_low, r.ci_high, margin), band)
    if "table4" in tables:
        for r in tables["table4"].itertuples():
            add("ood_above_chance", "table4", r, r.accuracy > CHANCE)
    if "table6" in tables:
        t6 = tables["table6"]
        for r in t6[t6["evaluation"].str.startswith("Alice")].itertuples():
            add("group_above_chance", "table6", r, r.accuracy > CHANCE)
    return out


def findings_method(n_bootstrap: int = N_BOOTSTRAP) -> str:
    """The method paragraph of the shadow study's findings file."""
    return (
        "Each attack classifier's accuracy on a set of probes against chance (50%). In brackets: 95% percentile "
        f"intervals of the group bootstrap ({int(n_bootstrap)} resamples of documents, of probe groups for Table 6; "
        "n: the resamples); the difference's interval is the accuracy's less 50%. *Above chance* holds when the "
        "accuracy is above 50%. *Near 50%* is a claim that the difference is small: it holds when the accuracy is "
        "within the band of the measure or its interval holds 50% (*not separated*, the verdict that agrees with it)."
    )
