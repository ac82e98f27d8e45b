"""The paper's tables and Figure 7 for the shadow-model attack (Hisamoto, Post and Duh, TACL 2020,
Tables 2-6 and Figure 7), as tidy DataFrames, Markdown and a plot.

Inputs are two feature tables, never text:

- Bob's labelled pairs (`bob_feature_table`): one row per (sentence of Bob, shadow model)
  with `sample_id`, `group_id`, `shadow`, `member`, `split` (train/valid/test), `oov` (the
  sentence holds a word that shadow never trained on) and the shadow model's features of the
  sentence;
- the probes (`probe_feature_table`): Carol's probes with `member` (True for in-probes),
  `probe_set` ("alice" for in- and out-probes, "ood"), `subcorpus`, `group_id`, `oov` (a word
  none of Bob's shadows trained on) and Alice's model's features.

The features are a target's black-box outputs: sentence BLEU, its 1-4-gram precisions, the model
score and the BLEU statistics (`mlmia.shadow.features`); nothing here is specific to a masked
language model.

Tables (tidy columns `TIDY_COLUMNS`; accuracy and AUC as fractions, each with its group-bootstrap
interval, `mlmia.shadow.classify`):

- Table 2: the five classifiers on BLEU and its n-gram precisions, trained on Bob:train,
  evaluated on Bob:train, Bob:valid, Bob:test and on Alice's probes (the real attack).
- Table 3: the same with the model score added.
- Table 4: Table 2's classifiers on each OOD subcorpus's probes, all "out": accuracy is the
  fraction called out (no AUC: one class).
- Table 5: Table 2's classifiers on the out-of-vocabulary subsets, as the paper: Bob:test's
  pairs whose sentence holds a word the queried shadow never trained on (all "out": a sentence a
  shadow trains on is never OOV for it), beside Bob:test's out-pairs without one; and Alice's
  probes holding a word none of Bob's shadows trained on, in and out.
- Table 6 and Figure 7: the group-level attack (`mlmia.shadow.group_eval`).

`selected` marks the classifier Bob would pick, the best on Bob:valid (ties: the paper's order).
The Markdown renderer prints accuracy in percent and the AUC as a fraction, names and counts only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import require_columns, write_text
from mlmia.report.finding import findings_frame, render_findings
from mlmia.report.markdown import markdown_table
from mlmia.shadow.classify import (
    ACCURACY_COLUMNS,
    FEATURES,
    MODEL_SCORE_FEATURES,
    accuracy_table,
    fit_classifiers,
)
from mlmia.shadow.features import oov_flags
from mlmia.shadow.findings import FINDINGS_TITLE, NEAR_CHANCE_MARGIN, findings, findings_method
from mlmia.shadow.group_eval import group_study
from mlmia.shadow.groups import bleu_edges
from mlmia.shadow.split import probe_table

TIDY_COLUMNS = ["table", "features", *ACCURACY_COLUMNS, "selected"]
BOB_SETS = ("Bob:train", "Bob:valid", "Bob:test")
TITLES = {
    "table1": "Table 1: the models' sentence BLEU on the sentences they trained on (in) and on held-out ones (out)",
    "table2": "Table 2: sample-level attack (features: sentence BLEU and its 1-4-gram precisions)",
    "table3": "Table 3: sample-level attack with the model score (features: Table 2's and the model score)",
    "table4": "Table 4: out-of-domain probes (all out; accuracy = fraction called out)",
    "table5": "Table 5: out-of-vocabulary subsets (a word the queried model's shadow never trained on)",
    "table6": "Table 6: group-level attack (BLEU histogram and corpus BLEU of random groups of sentences)",
}


# --------------------------------------------------------------------------- assembling the inputs


def bob_feature_table(pairs: pd.DataFrame, features_by_shadow: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Bob's labelled pairs (`shadow_splits`) with each shadow model's features of the sentence
    (`features_by_shadow[s]`: shadow model s's features of its pairs' sentences)."""
    require_columns(pairs, ["sample_id", "group_id", "shadow", "member", "split"], "Bob's pairs")
    frames = []
    for shadow in sorted(pairs["shadow"].unique()):
        if int(shadow) not in features_by_shadow:
            raise UserError(f"Bob's features: none for shadow model {int(shadow)}")
        rows = pairs[pairs["shadow"] == shadow]
        feats = features_by_shadow[int(shadow)].drop(columns=["text"], errors="ignore")
        require_columns(feats, ["sample_id", "bleu"], f"features of shadow model {int(shadow)}")
        merged = rows.merge(feats.assign(sample_id=feats["sample_id"].astype(str)), on="sample_id", how="left")
        missing = int(merged["bleu"].isna().sum())
        if missing:
            raise UserError(f"Bob's features: {missing} of shadow model {int(shadow)}'s sentences have no features")
        frames.append(merged)
    return pd.concat(frames, ignore_index=True)


def probe_feature_table(split: pd.DataFrame, alice_features: pd.DataFrame) -> pd.DataFrame:
    """Carol's probes (`probe_table` of a `carol_split` table) with Alice's model's features and
    the `oov` flag against all of Bob's text (every shadow trains on all of Bob's data but a
    slice, so this is the words no shadow trained on); no text column."""
    probes = probe_table(split)
    probes["oov"] = oov_flags(probes["text"], split.loc[split["bob"].astype(bool), "text"])
    feats = alice_features.drop(columns=["text"], errors="ignore")
    require_columns(feats, ["sample_id", "bleu"], "Alice's features")
    merged = probes.drop(columns=["text"]).merge(
        feats.assign(sample_id=feats["sample_id"].astype(str)), on="sample_id", how="left"
    )
    missing = int(merged["bleu"].isna().sum())
    if missing:
        raise UserError(f"probe features: {missing} of {len(merged)} probes have no features from Alice's model")
    return merged


# --------------------------------------------------------------------------- tables


def model_fit(bob: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """Each model's mean sentence BLEU and model score on the sentences it trained on ("in") and on
    held-out ones ("out"): Alice's on her in- and out-probes (not the OOD probes), each shadow's on
    its pair's slices. As the paper's Table 1 reports its models' BLEU: a shadow that does not fit
    its own training sentences (in no better than out, or far below Alice's) makes a poor stand-in
    for Alice, and the protocol's tables inherit that."""
    sets = [("alice", probes[probes["probe_set"] == "alice"])]
    sets += [(f"bob_{int(s)}", part) for s, part in bob.groupby("shadow", sort=True)]
    rows = []
    for model, part in sets:
        for member, label in ((True, "in"), (False, "out")):
            chosen = part[part["member"].astype(bool) == member]
            rows.append({"table": "table1", "model": model, "set": label, "n": len(chosen), "bleu": float(chosen["bleu"].mean()),
                         "model_score": float(chosen["model_score"].mean())})  # fmt: skip
    return pd.DataFrame(rows)


def render_model_fit(fit: pd.DataFrame) -> str:
    """Table 1 as Markdown: one row per model, BLEU and model score in and out, and the gap in BLEU."""
    body = []
    for model, part in fit.groupby("model", sort=False):
        inside, outside = part[part["set"] == "in"].iloc[0], part[part["set"] == "out"].iloc[0]
        body.append([model, f"{inside['bleu']:.1f} ({int(inside['n'])})", f"{outside['bleu']:.1f} ({int(outside['n'])})",
                     f"{inside['bleu'] - outside['bleu']:+.1f}", f"{inside['model_score']:.3f}",
                     f"{outside['model_score']:.3f}"])  # fmt: skip
    header = ["model", "BLEU in (n)", "BLEU out (n)", "in - out", "model score in", "model score out"]
    return f"# {TITLES['table1']}\n\n" + markdown_table(header, body) + "\n"


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
    n_bootstrap: int,
    table: str = "table2",
) -> tuple[pd.DataFrame, dict]:
    """Table 2 (features `FEATURES`) or Table 3 (`MODEL_SCORE_FEATURES`): (tidy, classifiers)."""
    sets = _bob_sets(bob)
    classifiers = fit_classifiers(sets["Bob:train"], features, seed)
    sets["Alice"] = probes[probes["probe_set"] == "alice"]
    accuracy = accuracy_table(classifiers, sets, features, seed, n_bootstrap)
    return _tidy(table, " + ".join(features), accuracy), classifiers


def ood_table(
    classifiers: dict, probes: pd.DataFrame, features: Sequence[str], seed: int, n_bootstrap: int
) -> pd.DataFrame:
    """Table 4: accuracy on each OOD subcorpus (its probes are all out)."""
    ood = probes[probes["probe_set"] == "ood"]
    sets = {str(name): rows for name, rows in ood.groupby("subcorpus", sort=True)}
    if not sets:
        raise UserError("Table 4: no OOD probes")
    return _tidy("table4", " + ".join(features), accuracy_table(classifiers, sets, features, seed, n_bootstrap))


def oov_table(
    classifiers: dict,
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    features: Sequence[str],
    seed: int,
    n_bootstrap: int,
) -> pd.DataFrame:
    """Table 5: accuracy (and AUC where both classes occur) on the OOV subsets; an empty subset
    gives NaN."""
    require_columns(bob, ["oov"], "Table 5: Bob's pairs")
    test = bob[bob["split"] == "test"]
    out_rows = test[~test["member"].astype(bool)]
    oov = probes[probes["oov"].astype(bool) & (probes["probe_set"] == "alice")]
    sets = {
        "Bob:test OOV": test[test["oov"].astype(bool)],
        "Bob:test out, no OOV": out_rows[~out_rows["oov"].astype(bool)],
        "Alice OOV": oov,
        "Alice OOV in": oov[oov["member"].astype(bool)],
        "Alice OOV out": oov[~oov["member"].astype(bool)],
    }
    return _tidy("table5", " + ".join(features), accuracy_table(classifiers, sets, features, seed, n_bootstrap))


def plot_top_share(
    figure: pd.DataFrame, paths: Sequence[str | os.PathLike], style: Mapping, title: str = "Figure 7"
) -> None:
    """Plot Figure 7 to every path (format from its suffix: png, pdf, svg), written atomically in
    the config's `figure_style`: the precision of calling the top N% of Alice's pure groups "in"
    against N, with its interval, one line per classifier; left raw features, right adjusted. A
    random ranking's precision is the share of in-groups (50%)."""
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    apply_style(style)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, kind in zip(axes, ("raw", "adjusted")):
        for name, rows in figure[figure["features"] == kind].groupby("classifier", sort=False):
            rows = rows.sort_values("top_percentage")
            x = rows["top_percentage"].to_numpy()
            (line,) = ax.plot(x, 100 * rows["precision"], marker="o", ms=3, lw=1.2, label=name)
            ax.fill_between(
                x,
                100 * rows["precision_ci_low"],
                100 * rows["precision_ci_high"],
                color=line.get_color(),
                alpha=0.12,
                lw=0,
            )
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("groups called in: top N% by the classifier's score")
        ax.set_title(f"{kind} features", fontsize=10)
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("precision of the calls (%)")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, paths, style)


# --------------------------------------------------------------------------- everything at once


def shadow_tables(
    bob: pd.DataFrame,
    probes: pd.DataFrame,
    seed: int,
    *,
    n_bootstrap: int,
    group_size: int,
    groups: int,
    bins: int,
    percentages: Sequence[float],
    margin: float = NEAR_CHANCE_MARGIN,
) -> dict:
    """Tables 1-6 and Figure 7's numbers as tidy DataFrames keyed table1 ... table6, figure7, the
    adjustment shift ("shift") and the findings (`Finding` records, "findings"). The protocol's
    settings have no defaults here: `mlmia.shadow.workflow.tables` passes them from the
    protocol's config section, every key given."""
    table1 = model_fit(bob, probes)
    table2, classifiers = sample_table(bob, probes, FEATURES, seed, n_bootstrap, "table2")
    table3, _ = sample_table(bob, probes, MODEL_SCORE_FEATURES, seed, n_bootstrap, "table3")
    table4 = ood_table(classifiers, probes, FEATURES, seed, n_bootstrap)
    table5 = oov_table(classifiers, bob, probes, FEATURES, seed, n_bootstrap)
    rows, figure7, _, shift = group_study(
        bob, probes, seed, n_bootstrap, group_size, groups, bleu_edges(bins), percentages
    )
    table6 = _tidy("table6", f"groups of {int(group_size)}", rows)
    tables = {
        "table1": table1,
        "table2": table2,
        "table3": table3,
        "table4": table4,
        "table5": table5,
        "table6": table6,
    }
    tables["figure7"] = figure7
    tables["shift"] = shift
    tables["findings"] = findings(tables, margin, n_bootstrap=n_bootstrap)
    return tables


# --------------------------------------------------------------------------- Markdown


def _percent(value: float) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{100 * value:.1f}"


def _fraction(value: float) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.2f}"


def _cell(r) -> str:
    text = _percent(r["accuracy"])
    if np.isfinite(r["ci_low"]):
        text += f" [{_percent(r['ci_low'])}, {_percent(r['ci_high'])}]"
    if np.isfinite(r["auc"]):
        text += f" / {_fraction(r['auc'])}"
        if np.isfinite(r["auc_ci_low"]):
            text += f" [{_fraction(r['auc_ci_low'])}, {_fraction(r['auc_ci_high'])}]"
    return text


def render_markdown(tidy: pd.DataFrame, title: str, n_bootstrap: int) -> str:
    """A tidy table as Markdown: one row per classifier (the one Bob selects marked *), one
    column per evaluation set, cells "accuracy [interval] / AUC [interval]", accuracy in percent,
    a last row with the number of rows (groups, for Table 6) and of bootstrap units of each set."""
    groups = (tidy["table"] == "table6").any()
    unit = "documents (groups rebuilt from the drawn documents)" if groups else "documents/patients"
    note = f"Accuracy (%) / AUC [brackets: 95% percentile bootstrap intervals, {int(n_bootstrap)} resamples of {unit}]"
    if tidy["selected"].any():
        note += "; * the classifier Bob selects (best on Bob:valid)"
    if tidy["accuracy"].isna().any():
        note += "; – no probe in that set"
    if tidy["auc"].isna().any():
        note += "; no AUC where the set holds one class only"
    last = "groups (documents)" if groups else "rows (bootstrap units)"
    lines = [f"# {title}", "", note + f"; last row: n {last}.", ""]
    headers = list(dict.fromkeys(tidy["evaluation"]))
    body = []
    for name in dict.fromkeys(tidy["classifier"]):
        rows = tidy[tidy["classifier"] == name].set_index("evaluation")
        cells = [_cell(rows.loc[h]) if h in rows.index else "" for h in headers]
        mark = " *" if bool(rows["selected"].any()) else ""
        body.append([f"{name}{mark}", *cells])
    counts = tidy.drop_duplicates("evaluation").set_index("evaluation")
    body.append(["n", *(f"{int(counts.loc[h, 'n'])} ({int(counts.loc[h, 'n_groups'])})" for h in headers)])
    lines += [markdown_table(["classifier", *headers], body), ""]
    return "\n".join(lines)


def render_figure_markdown(figure: pd.DataFrame, n_bootstrap: int) -> str:
    """Figure 7's numbers as Markdown: per features (raw, adjusted) a table, rows classifiers,
    columns N, cells "precision [interval] (accuracy)" of calling the top N% of groups in."""
    lines = [
        "# Figure 7: Alice's pure groups ranked by the classifier's score, the top N% called in",
        "",
        f"Precision (%) of the calls [brackets: 95% percentile bootstrap interval, {int(n_bootstrap)} resamples of "
        "documents, the groups rebuilt] (accuracy of all calls, %); half of the groups are in, so a ranking without "
        "signal has precision 50%.",
        "",
    ]
    for kind in ("raw", "adjusted"):
        part = figure[figure["features"] == kind]
        if part.empty:
            continue
        headers = [f"top {p:g}%" for p in sorted(part["top_percentage"].unique())]
        body = []
        for name, rows in part.groupby("classifier", sort=False):
            rows = rows.sort_values("top_percentage")
            body.append(
                [
                    name,
                    *(
                        f"{_percent(r.precision)} [{_percent(r.precision_ci_low)}, {_percent(r.precision_ci_high)}] "
                        f"({_percent(r.accuracy)})"
                        for r in rows.itertuples()
                    ),
                ]
            )
        n = int(part["n"].iloc[0])
        lines += [f"## {kind} features ({n} groups)", "", markdown_table(["classifier", *headers], body), ""]
    return "\n".join(lines)


def render_all(tables: Mapping[str, object], n_bootstrap: int) -> dict[str, str]:
    """Markdown of every table `shadow_tables` returns (keys as there)."""
    out = {
        key: render_markdown(tables[key], TITLES[key], n_bootstrap)
        for key in TITLES
        if key in tables and key != "table1"
    }
    if "table1" in tables:
        out = {"table1": render_model_fit(tables["table1"]), **out}
    if "shift" in tables and "table6" in out:
        out["table6"] += (
            f"\nAdjustment (the paper's single mean shift): Alice's sentence and corpus BLEU moved by "
            f"{-float(tables['shift']):+.2f} BLEU points (her probes' mean sentence BLEU minus Bob's training rows').\n"
        )
    if "figure7" in tables:
        out["figure7"] = render_figure_markdown(tables["figure7"], n_bootstrap)
    if "findings" in tables:
        out["findings"] = render_findings(tables["findings"], FINDINGS_TITLE, findings_method(n_bootstrap))
    return out


def write_outputs(result: Mapping[str, object], outputs: Mapping[str, str], n_bootstrap: int, style: Mapping) -> None:
    """Write one run of the protocol (`mlmia.shadow.workflow.tables`, `mt_workflow.tables`):
    `tables_md` (every table and Figure 7's numbers), `tables_csv` (the tidy rows, a `result`
    column naming the table), `figure_png`/`figure_pdf` (Figure 7), `findings_md`/`findings_csv`."""
    markdown = render_all(result, n_bootstrap)
    write_text("\n\n".join(text for key, text in markdown.items() if key != "findings") + "\n", outputs["tables_md"])
    frames = [frame.assign(result=key) for key, frame in result.items() if key not in ("findings", "shift")]
    tidy = pd.concat(frames, ignore_index=True)
    # a count column of some tables stays a count where others lack it (not 12.0)
    counts = {c for f in frames for c in f.columns if pd.api.types.is_integer_dtype(f[c])}
    tidy = tidy.astype({c: "Int64" for c in counts if not pd.api.types.is_integer_dtype(tidy[c])})
    write_text(tidy.to_csv(index=False), outputs["tables_csv"])
    plot_top_share(result["figure7"], [outputs["figure_png"], outputs["figure_pdf"]], style)
    write_text(markdown["findings"], outputs["findings_md"])
    write_text(findings_frame(result["findings"]).to_csv(index=False), outputs["findings_csv"])
