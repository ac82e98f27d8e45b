"""The d-exposure study's results (Helali, Kleinbauer and Klakow, TSD 2020): from the runs
table of the taggers (`mlmia.memorization.dexposure.train_and_measure`), the model's
d-exposure per checkpoint (`model_means`), Table 3 (`table3`, `render_table3`), Figure 1
(`plot_figure1`), the first finding, "d-exposure grows with repetitions" (`findings`), and the
Markdown of Tables 1 and 2 (their statistics: `mlmia.world.phi`).

Table 3, Figure 1 and the first finding are means over the model seeds with 95% Student-t
intervals (n - 1 degrees of freedom; none with one seed: `mlmia.metrics.intervals.seed_interval`).
The overfitting experiment (Figure 2, the second finding) is `mlmia.memorization.overfitting`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.memorization.exposure import mean_d_exposure
from mlmia.metrics.intervals import seed_interval
from mlmia.report.finding import Finding, interval_verdict
from mlmia.report.markdown import markdown_table


def model_means(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed, repetitions, epoch): the model's d-exposure (the mean over
    the classes, `mean_d_exposure`), its losses and F1."""
    keys = ["setting", "seed", "repetitions", "epoch"]
    rows = []
    for key, part in runs.groupby(keys, sort=True):
        rows.append(
            {
                **dict(zip(keys, key)),
                "d_exposure": mean_d_exposure(part["d_exposure"].to_numpy()),
                "max_d_exposure": float(part["max_d_exposure"].mean()),
                "train_loss": float(part["train_loss"].iloc[0]),
                "valid_loss": float(part["valid_loss"].iloc[0]),
                "f1": float(part["f1"].iloc[0]),
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "d_exposure", "max_d_exposure", "train_loss", "valid_loss", "f1"])


def table3(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (tidy): d-exposure per class and for the model (class "mean"), per repetitions
    and checkpoint epoch: the mean over seeds with its interval, the maximum log2 |C_i| (for
    "mean": the mean of the classes' maxima), and the tagger's F1 (mean over seeds, interval)."""
    main = runs[runs["setting"] == "main"]
    means = model_means(main).assign(**{"class": "mean"})
    both = pd.concat([main, means], ignore_index=True)
    rows = []
    classes = [*dict.fromkeys(main["class"]), "mean"]
    for (cls, reps, epoch), part in both.groupby(["class", "repetitions", "epoch"], sort=True):
        mean, low, high = seed_interval(part["d_exposure"])
        f1, f1_low, f1_high = seed_interval(part["f1"])
        rows.append(
            {
                "class": cls,
                "repetitions": int(reps),
                "epoch": int(epoch),
                "n_seeds": int(part["seed"].nunique()),
                "d_exposure": mean,
                "ci_low": low,
                "ci_high": high,
                "max_d_exposure": float(part["max_d_exposure"].mean()),
                "f1": f1,
                "f1_ci_low": f1_low,
                "f1_ci_high": f1_high,
            }
        )
    out = pd.DataFrame(rows)
    out["class"] = pd.Categorical(out["class"], classes, ordered=True)
    return out.sort_values(["class", "repetitions", "epoch"]).reset_index(drop=True).astype({"class": str})


FINDINGS_TITLE = "Findings of Helali et al. (TSD 2020), checked over model seeds"
FINDINGS_METHOD = (
    "The model's d-exposure (bits; the mean over the chosen classes), and for the overfitting experiment each "
    "class's too. Growth with repetitions: the difference between the most and the fewest repetitions within each "
    "seed (paired by seed). No growth once the validation loss rises: per seed, the least-squares slope of "
    "d-exposure against epoch over the checkpoints from the epoch of least validation loss to the last, one slope "
    "per seed (the seeds, independent training runs, are the resampling unit). In brackets the mean over model "
    "seeds with its 95% Student-t interval (n - 1 degrees of freedom; n: the seeds); with one seed there is no "
    "interval. A finding *holds* by the point estimate: a difference above 0 for growth, a mean slope at most 0 "
    "for no further growth, which *not separated* (no growth the seeds resolve) and *reversed* agree with."
)
SEED_INTERVAL = "Student t over seeds (paired by seed), 95%"


def _seed_finding(finding: str, claim: str, scope: str, first: tuple[str, list], second: tuple[str, list]) -> dict:
    """The fields of a finding whose first and second values are per-seed lists (label, values;
    paired by seed): their means and the mean difference with their seed intervals
    (`seed_interval`), margin 0; the caller adds holds, the verdict and the note."""
    diffs = [a - b for a, b in zip(first[1], second[1])]
    mean, low, high = seed_interval(diffs)
    first_mean, first_low, first_high = seed_interval(first[1])
    second_mean, second_low, second_high = seed_interval(second[1])
    return {
        "finding": finding, "claim": claim, "kind": "finding", "scope": scope, "measure": "d-exposure (bits)",
        "first": first[0], "first_value": first_mean, "first_ci_low": first_low, "first_ci_high": first_high,
        "second": second[0], "second_value": second_mean, "second_ci_low": second_low, "second_ci_high": second_high,
        "difference": mean, "difference_ci_low": low, "difference_ci_high": high, "interval": SEED_INTERVAL,
        "n": len(diffs), "margin": 0.0, "number_format": ".3f",
    }  # fmt: skip


def _no_interval(found: dict) -> list[str]:
    """The note of a finding without an interval (fewer than 2 seeds)."""
    if np.isfinite(found["difference_ci_low"]):
        return []
    return [f"{found['n']} seed{'' if found['n'] == 1 else 's'}: no interval"]


def findings(runs: pd.DataFrame) -> list[Finding]:
    """The paper's first finding, "d-exposure grows with repetitions", checked with an interval
    over the seeds (`mlmia.report.finding` maps the old holds / does not hold onto the verdicts):
    per seed, the model's d-exposure at the last checkpoint with the most repetitions minus with
    the fewest (paired by seed); its mean and 95% t-interval; holds when the mean is above 0,
    *separated* when the interval lies above 0 (with one seed: not resolvable). The note gives
    the mean over seeds of Spearman's rho between repetitions and d-exposure. The second
    finding, from the overfitting experiment: `mlmia.memorization.overfitting.findings`.
    """
    from scipy import stats

    out = []
    main = model_means(runs[runs["setting"] == "main"])
    if len(main):
        last = main[main["epoch"] == main["epoch"].max()]
        epoch = int(last["epoch"].iloc[0])
        lo_r, hi_r = last["repetitions"].min(), last["repetitions"].max()
        highs, lows, rhos = [], [], []
        for _, part in last.groupby("seed"):
            by_r = part.set_index("repetitions")["d_exposure"]
            if lo_r in by_r.index and hi_r in by_r.index:
                highs.append(float(by_r[hi_r]))
                lows.append(float(by_r[lo_r]))
            if by_r.nunique() > 1 and len(by_r) > 2:
                rhos.append(float(stats.spearmanr(by_r.index, by_r.to_numpy()).statistic))
        found = _seed_finding(
            "grows_with_repetitions", "d-exposure grows with the number of repetitions of the inserted phrase",
            f"main experiment, epoch {epoch}", (f"{hi_r} repetitions", highs), (f"{lo_r} repetitions", lows),
        )  # fmt: skip
        notes = _no_interval(found)
        notes += [f"mean Spearman rho (repetitions, d-exposure) {np.mean(rhos):.2f}"] if rhos else []
        verdict = interval_verdict(found["difference_ci_low"], found["difference_ci_high"], 0.0)
        out.append(Finding(**found, holds=bool(found["difference"] > 0), verdict=verdict, note="; ".join(notes)))
    return out


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):.{digits}f}"


def interval_cell(mean, low, high, digits: int = 2) -> str:
    if not np.isfinite(mean):
        return ""
    if not (np.isfinite(low) and np.isfinite(high)):
        return _fmt(mean, digits)
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _frame_table(frame: pd.DataFrame) -> str:
    """A pipe table of the frame's cells as text (numbers with 2 decimals)."""
    return markdown_table(frame.columns, [[v if isinstance(v, str) else _fmt(v) for v in row] for row in frame.values])


def render_table1(stats: pd.DataFrame, source: str) -> str:
    shown = stats.rename(
        columns={
            "mentions": "mentions (B- tags)",
            "words": "words labelled C_i",
            "only_this_class": "words only C_i",
            "also_other_class": "also another class",
        }
    ).astype(object)
    for col in shown.columns[1:]:
        shown[col] = ["" if pd.isna(v) else str(int(v)) for v in shown[col]]
    return (
        f"## Table 1: class statistics of the training notes ({source})\n\n"
        "`words only C_i` counts the words labelled only as C_i (at least once B-C_i, never another "
        "tag): the candidate set of d-exposure, |C_i| less the inserted word. The last row counts the "
        "words labelled under more than one class (O aside).\n\n" + _frame_table(shown) + "\n"
    )


def render_table2(occurrences: pd.DataFrame) -> str:
    return (
        "## Table 2: occurrences of the ambiguous entities per class (training notes)\n\n"
        "`inserted as`: the class whose d-exposure the word measures (the inserted phrase labels it "
        "so).\n\n" + _frame_table(occurrences.astype(object)) + "\n"
    )


def render_table3(tidy: pd.DataFrame, phrase: str) -> str:
    epochs = sorted(tidy["epoch"].unique())
    lines = [
        "## Table 3: d-exposure per class, repetitions x epochs",
        "",
        f"Inserted phrase: `{phrase}` (the slot word labelled as the class). Cells: the mean over "
        "model seeds [95% t-interval]; `max` is log2 |C_i|; F1: seqeval entity-level micro F1 of the "
        "tagger on the held-out notes at the last epoch (mean [interval]).",
        "",
    ]
    header = ["class", "repetitions", *[f"epoch {e}" for e in epochs], "max", "F1"]
    rows = []
    for (cls, reps), part in tidy.groupby(["class", "repetitions"], sort=False):
        part = part.set_index("epoch")
        cells = [
            interval_cell(*part.loc[e, ["d_exposure", "ci_low", "ci_high"]]) if e in part.index else "" for e in epochs
        ]
        last = part.loc[max(part.index)]
        rows.append(
            [
                cls,
                str(reps),
                *cells,
                _fmt(last["max_d_exposure"]),
                interval_cell(*last[["f1", "f1_ci_low", "f1_ci_high"]], 3),
            ]
        )
    lines.append(markdown_table(header, rows))
    return "\n".join(lines) + "\n"


def plot_figure1(tidy: pd.DataFrame, paths: Sequence[str | os.PathLike], style: Mapping) -> None:
    """Figure 1: d-exposure at the last checkpoint against repetitions (evenly spaced), one line
    per class and the model's mean (black), with the seed intervals as bands and each class's
    maximum log2 |C_i| dotted; each path (format from its suffix) written atomically, in the
    config's `figure_style`."""
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    apply_style(style)

    last = tidy[tidy["epoch"] == tidy["epoch"].max()]
    reps = sorted(last["repetitions"].unique())
    x = {r: i for i, r in enumerate(reps)}
    fig, ax = plt.subplots(figsize=(6, 4))
    for cls, part in last.groupby("class", sort=False):
        part = part.sort_values("repetitions")
        xs = [x[r] for r in part["repetitions"]]
        line_style = {"color": "black", "lw": 2.2} if cls == "mean" else {"lw": 1.2}
        (line,) = ax.plot(xs, part["d_exposure"], marker="o", ms=4, label=cls, **line_style)
        ax.fill_between(xs, part["ci_low"], part["ci_high"], color=line.get_color(), alpha=0.15, lw=0)
        if cls != "mean":  # the class's largest possible value, log2 |C_i|
            ax.axhline(float(part["max_d_exposure"].iloc[0]), color=line.get_color(), ls=":", lw=0.9)
    ax.set_xticks(range(len(reps)), [str(r) for r in reps])
    ax.set_xlabel("repetitions of the inserted phrase")
    ax.set_ylabel("d-exposure (bits)")
    ax.set_title(f"Figure 1: d-exposure vs repetitions (epoch {int(last['epoch'].max())})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, paths, style)


def entity_labels(chosen: pd.DataFrame, name: bool) -> dict[str, str]:
    """How the tables name each class's inserted word: the word itself (generated notes) or,
    for real notes, "<class> entity" (a real note's entity is PHI and is not printed)."""
    return {row["class"]: (row["word"] if name else f"{row['class']} entity") for _, row in chosen.iterrows()}
