"""The overfitting experiment of Helali, Kleinbauer and Klakow (TSD 2020, Figure 2): does a
tagger's d-exposure keep growing once the model overfits?

The paper inserts its phrase 16 times into 10% of the training data, trains 250 epochs, and
plots d-exposure against epochs beside the training and validation loss; its reading (the
abstract): "d-exposure is not a measure of overfitting as it does not increase when the model
overfits". The paper shows the curve; it gives no test. What is computed here:

- the data (`subset_training`): `overfit.fraction` of the training sentences (seeded, the same
  for every model seed), the validation split whole, and the phrase inserted
  `overfit.repetitions` times per class (`mlmia.memorization.dexposure.inserted_sentences`);
- the taggers (`overfit_design`, `overfit_runs`): `overfit.seeds` model seeds, `overfit.epochs`
  epochs measured every `overfit.every` (`overfit_checkpoints`), no dropout and a constant
  learning rate after warm-up (chosen here so that nothing but the data limits overfitting; the
  paper is silent), weight decay `overfit.weight_decay` (0: the paper names none);
- the validation minimum e* of a seed: the checkpoint of least validation loss (the first on a
  tie); the validation loss *passes* its minimum when e* is not the last checkpoint;
- the trend test (`seed_trends`, `trend_summary`): per seed, the least-squares slope of
  d-exposure against epoch over the checkpoints from e* to the last (e* included), for each
  class and for the model (the mean over the classes), in bits per `SLOPE_EPOCHS` epochs; across
  seeds, the mean slope with its Student-t interval (`mlmia.metrics.intervals.seed_interval`)
  and the one-sample t-test of mean 0. The seeds are the resampling unit: each is an
  independent training run, one slope each; the checkpoints of one run are serially dependent,
  so the within-run regression's standard error is not used;
- the distance from the maximum at e* (`seed_trends`): per seed and class, the largest
  d-exposure over the run's checkpoints minus the value at e* (0 when e* is the run's
  maximum), and the ceiling log2 |C_i| minus the value at e* (0 when the class is at its
  ceiling and cannot grow), with the same seed intervals;
- Figure 2 (`figure2_data`, `plot_figure2`), its table (`render_overfit`) and the finding
  (`findings`): "d-exposure does not keep growing once the validation loss rises", checked by
  the mean slope, per class and for the model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.memorization.dexposure_report import interval_cell, model_means
from mlmia.metrics.intervals import seed_interval
from mlmia.report.finding import Finding, interval_verdict
from mlmia.report.markdown import markdown_table

#: the slopes' unit: bits of d-exposure per this many epochs
SLOPE_EPOCHS = 100
MODEL = "mean"  # the model's d-exposure (the mean over the classes) in the per-class tables
SLOPE_INTERVAL = "Student t over seeds (one slope per seed), 95%"


# --------------------------------------------------------------------------------------------
# the design


def subset_training(notes: pd.DataFrame, fraction: float, entities: Mapping[str, str], seed: int = 0) -> pd.DataFrame:
    """The overfitting experiment's data: `fraction` of the training sentences (seeded, by
    sentence), with the validation split whole. Every (chosen word, class) pair found in the
    training split keeps at least one of its sentences, so the chosen words stay ambiguous."""
    from mlmia.world.phi import word_key

    if not 0 < fraction <= 1:
        raise UserError(f"dexposure.overfit.fraction: must lie in (0, 1], got {fraction!r}")
    train = np.flatnonzero(notes["split"].to_numpy() == "train")
    rng = np.random.default_rng(seed)
    order = train[rng.permutation(len(train))]
    keep = set(order[: max(1, round(fraction * len(train)))].tolist())
    wanted = {word_key(w) for w in entities.values()}
    for pair_seen in _first_occurrences(notes, order, wanted):
        keep.add(pair_seen)
    mask = notes["split"].to_numpy() == "valid"
    mask[sorted(keep)] = True
    return notes[mask].reset_index(drop=True)


def _first_occurrences(notes: pd.DataFrame, order: np.ndarray, wanted: set) -> list[int]:
    from mlmia.world.phi import word_key

    found: dict[tuple[str, str], int] = {}
    for row in order:
        for word, tag in zip(notes["words"].iat[row], notes["tags"].iat[row]):
            key = word_key(word)
            if key in wanted and tag != "O":
                found.setdefault((key, tag[2:]), int(row))
    return sorted(set(found.values()))


def overfit_checkpoints(overfit: Mapping) -> list[int]:
    """Every `every`-th epoch up to `epochs` (and `epochs` itself)."""
    every, epochs = int(overfit["every"]), int(overfit["epochs"])
    if every < 1 or epochs < 1:
        raise UserError("dexposure.overfit: every and epochs must be >= 1")
    return sorted(set(range(every, epochs + 1, every)) | {epochs})


def overfit_design(dexposure: Mapping) -> dict:
    """How each overfitting tagger is trained, from the `dexposure:` config (`model`,
    `training`, `overfit`): the main experiment's model and optimiser settings but its
    checkpoints, with weight decay `overfit.weight_decay`, no dropout, a constant learning rate
    after warm-up, on `overfit.fraction` of the training notes, measured at
    `overfit_checkpoints`. Only what one tagger's training depends on (not its seed count)."""
    overfit = dexposure["overfit"]
    training = {k: v for k, v in dict(dexposure["training"]).items() if k != "checkpoints"}
    return {
        "model": dexposure["model"],
        "training": {**training, "weight_decay": overfit["weight_decay"]},
        "checkpoints": overfit_checkpoints(overfit),
        "lr_decay": False,
        "dropout": 0.0,
        "fraction": overfit["fraction"],
    }


def overfit_runs(dexposure: Mapping) -> list[tuple[int, int]]:
    """The overfitting taggers: (model seed, repetitions) for seeds 0 .. `overfit.seeds` - 1."""
    overfit = dexposure["overfit"]
    return [(seed, int(overfit["repetitions"])) for seed in range(int(overfit["seeds"]))]


# --------------------------------------------------------------------------------------------
# the trend test and the distance from the maximum


def ols_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of y on x, sum((x - mean x)(y - mean y)) / sum((x - mean x)^2);
    NaN with fewer than two distinct x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    dx = x - x.mean() if len(x) else x
    denom = float(np.sum(dx * dx))
    if len(x) < 2 or denom == 0:
        return float("nan")
    return float(np.sum(dx * (y - y.mean())) / denom)


def _curves(runs: pd.DataFrame) -> pd.DataFrame:
    """The overfitting runs per (seed, class, epoch), the model's mean as class `MODEL`:
    d_exposure, max_d_exposure (the ceiling log2 |C_i|; for the model the mean of the classes'),
    valid_loss."""
    over = runs[runs["setting"] == "overfit"]
    cols = ["seed", "class", "epoch", "d_exposure", "max_d_exposure", "valid_loss"]
    means = model_means(over).assign(**{"class": MODEL})
    return pd.concat([over[cols], means[cols]], ignore_index=True)


def seed_trends(runs: pd.DataFrame) -> pd.DataFrame:
    """Per overfitting seed and class (and the model, class `MODEL`): the validation minimum e*
    (`best_epoch`), the last checkpoint, whether the validation loss passed its minimum
    (`passed`: e* before the last checkpoint), its rise from e* to the last checkpoint, the
    number of checkpoints from e* on, the slope of d-exposure over them (bits per
    `SLOPE_EPOCHS` epochs; NaN when the minimum was not passed), d-exposure at e* and at the
    last checkpoint, its maximum over the run, the ceiling log2 |C_i|, and the distances at e*
    below the run's maximum and below the ceiling."""
    curves = _curves(runs)
    if curves.empty:
        return pd.DataFrame()
    classes = [c for c in dict.fromkeys(curves["class"]) if c != MODEL] + [MODEL]
    rows = []
    for seed, part in curves.groupby("seed", sort=True):
        loss = part[part["class"] == MODEL].sort_values("epoch")
        best = int(loss["epoch"].iloc[int(np.argmin(loss["valid_loss"].to_numpy()))])
        last = int(loss["epoch"].iloc[-1])
        rise = float(loss["valid_loss"].iloc[-1] - loss["valid_loss"].min())
        for cls in classes:
            curve = part[part["class"] == cls].sort_values("epoch")
            after = curve[curve["epoch"] >= best]
            at_best = float(after["d_exposure"].iloc[0])
            ceiling = float(curve["max_d_exposure"].iloc[0])
            run_max = float(curve["d_exposure"].max())
            passed = best < last
            slope = ols_slope(after["epoch"], after["d_exposure"]) * SLOPE_EPOCHS if passed else np.nan
            rows.append(
                {
                    "seed": int(seed), "class": cls, "best_epoch": best, "last_epoch": last, "passed": passed,
                    "valid_loss_rise": rise, "n_after": len(after), "slope": slope, "d_exposure_at_best": at_best,
                    "d_exposure_last": float(curve["d_exposure"].iloc[-1]), "run_max": run_max, "ceiling": ceiling,
                    "below_run_max": run_max - at_best, "below_ceiling": ceiling - at_best,
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def p_text(p: float) -> str:
    """A p-value as printed: three decimals, "< 0.001" below that, empty when undefined."""
    if not np.isfinite(p):
        return ""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _p_relation(p: float) -> str:
    text = p_text(p)
    return text if text.startswith("<") else f"= {text}"


def _t_test(values: Sequence[float]) -> tuple[float, float]:
    """The one-sample t statistic of mean 0 and its two-sided p-value (n - 1 degrees of
    freedom); NaN with fewer than two values or no spread."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2 or float(np.std(x, ddof=1)) == 0:
        return float("nan"), float("nan")
    result = stats.ttest_1samp(x, 0.0)
    return float(result.statistic), float(result.pvalue)


SUMMARY_COLUMNS = ["slope", "d_exposure_at_best", "below_run_max", "below_ceiling", "ceiling"]


def trend_summary(trends: pd.DataFrame) -> pd.DataFrame:
    """Per class (the model last): over the seeds, the mean with its 95% Student-t interval
    (`<column>`, `<column>_ci_low`, `<column>_ci_high`) of the slope after the validation
    minimum and of d-exposure at e* and its distances below the run's maximum and the ceiling;
    the t-test of mean slope 0 (`t`, `p`), the seeds (`n_seeds`), those whose validation loss
    passed its minimum (`n_passed`: the slope's n) and the seeds' e* (`best_epochs`)."""
    rows = []
    for cls, part in trends.groupby("class", sort=False):
        row = {"class": cls, "n_seeds": int(part["seed"].nunique()), "n_passed": int(part["passed"].sum())}
        for col in SUMMARY_COLUMNS:
            mean, low, high = seed_interval(part[col])
            row.update({col: mean, f"{col}_ci_low": low, f"{col}_ci_high": high})
        row["t"], row["p"] = _t_test(part["slope"])
        row["best_epochs"] = ", ".join(str(int(e)) for e in part["best_epoch"])
        rows.append(row)
    return pd.DataFrame(rows)


def figure2_data(runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 2 (tidy): per overfitting epoch, the model's d-exposure, training and validation
    loss, each a mean over seeds with its interval."""
    over = model_means(runs[runs["setting"] == "overfit"])
    rows = []
    for epoch, part in over.groupby("epoch", sort=True):
        row = {"epoch": int(epoch), "n_seeds": int(part["seed"].nunique())}
        for col in ("d_exposure", "train_loss", "valid_loss"):
            mean, low, high = seed_interval(part[col])
            row.update({col: mean, f"{col}_ci_low": low, f"{col}_ci_high": high})
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# the finding

CLAIM = "d-exposure does not keep growing once the validation loss rises"
MEASURE = f"slope of d-exposure against epoch after the validation minimum (bits per {SLOPE_EPOCHS} epochs)"


def findings(runs: pd.DataFrame) -> list[Finding]:
    """The paper's second finding, "d-exposure does not keep growing once the validation loss
    rises", one record for the model (the mean over the classes) and one per class: first, the
    mean over seeds of the slope after the validation minimum (`seed_trends`), second, no trend
    (0); the difference is the mean slope with its Student-t interval over the seeds, margin 0.

    The claim agrees with *not separated* (no growth the seeds resolve; the note gives the
    fastest growth the interval leaves open) and *reversed* (a resolved fall), not with
    *separated* (it kept growing); `holds` is "no growth by the point estimate" (mean slope at
    most 0). *Not resolvable* when the validation loss did not pass its minimum in every seed
    (the claim's premise; `holds` False) or with one seed (no interval)."""
    trends = seed_trends(runs)
    if trends.empty:
        return []
    summary = trend_summary(trends).set_index("class")
    out = []
    for cls in summary.index:
        s = summary.loc[cls]
        passed_all = int(s["n_passed"]) == int(s["n_seeds"])
        mean, low, high = s["slope"], s["slope_ci_low"], s["slope_ci_high"]
        notes = [] if passed_all else [
            f"not reached: the validation loss passed its minimum in {int(s['n_passed'])} of {int(s['n_seeds'])} seeds"
        ]  # fmt: skip
        if not np.isfinite(low):
            notes.append(f"{int(s['n_passed'])} seed{'' if int(s['n_passed']) == 1 else 's'}: no interval")
        verdict = interval_verdict(low, high, 0.0) if passed_all else "not resolvable"
        if np.isfinite(s["p"]):
            notes.append(f"t-test of mean slope 0: t = {s['t']:.2f}, p {_p_relation(s['p'])}")
        if verdict == "not separated":
            notes.append(f"growth faster than {high:.2f} bits per {SLOPE_EPOCHS} epochs is excluded")
        below = {col: interval_cell(s[col], s[f"{col}_ci_low"], s[f"{col}_ci_high"]) for col in SUMMARY_COLUMNS}
        notes.append(
            f"at the validation minimum (epochs {s['best_epochs']}): {below['below_run_max']} bits below the "
            f"run's maximum, {below['below_ceiling']} below the ceiling {s['ceiling']:.2f}"
        )
        out.append(
            Finding(
                finding="no_growth_when_overfitting", claim=CLAIM, kind="finding",
                scope=f"overfitting experiment, {'the model (mean over the classes)' if cls == MODEL else cls}",
                measure=MEASURE, first="slope after the validation minimum", first_value=mean, first_ci_low=low,
                first_ci_high=high, second="no trend", second_value=0.0, difference=mean, difference_ci_low=low,
                difference_ci_high=high, interval=SLOPE_INTERVAL, n=int(s["n_passed"]), margin=0.0,
                holds=passed_all and bool(mean <= 0), verdict=verdict, note="; ".join(notes), number_format=".3f",
            )
        )  # fmt: skip
    return out[-1:] + out[:-1]  # the model first, then the classes


# --------------------------------------------------------------------------------------------
# the table and the figure


def render_overfit(curve: pd.DataFrame, summary: pd.DataFrame, overfit: Mapping) -> str:
    """The overfitting experiment in numbers: Figure 2's curve (the model's d-exposure and the
    losses per checkpoint, means over seeds [95% t-interval]), then per class the trend after
    the validation minimum and the distance from the maximum there."""
    cell = lambda row, col, d=2: interval_cell(row[col], row[f"{col}_ci_low"], row[f"{col}_ci_high"], d)  # noqa: E731
    head = (
        f"## Figure 2 in numbers: the overfitting experiment\n\n"
        f"{overfit['fraction']:.0%} of the training notes, the phrase inserted {overfit['repetitions']} times per "
        f"class, {overfit['epochs']} epochs measured every {overfit['every']}, no dropout, no learning-rate decay, "
        f"weight decay {overfit['weight_decay']:g}; means over {int(curve['n_seeds'].max()) if len(curve) else 0} "
        "model seeds [95% Student-t interval over the seeds].\n\n"
    )
    curve_rows = [
        [str(int(r["epoch"])), cell(r, "d_exposure"), cell(r, "train_loss", 3), cell(r, "valid_loss", 3)]
        for _, r in curve.iterrows()
    ]
    trend_rows = [
        [str(r["class"]), r["best_epochs"], cell(r, "d_exposure_at_best"), cell(r, "below_run_max"),
         cell(r, "below_ceiling"), f"{r['ceiling']:.2f}", cell(r, "slope"),
         p_text(r["p"]), f"{int(r['n_passed'])} of {int(r['n_seeds'])}"]
        for _, r in summary.iterrows()
    ]  # fmt: skip
    return (
        head
        + markdown_table(["epoch", "d-exposure (bits)", "training loss", "validation loss"], curve_rows)
        + "\n\n### After the validation minimum: the trend, and the distance from the maximum\n\n"
        "Per seed, e* is the checkpoint of least validation loss. *slope*: the least-squares slope of d-exposure "
        f"against epoch over the checkpoints from e* to the last (bits per {SLOPE_EPOCHS} epochs), one per seed, "
        "its mean over the seeds with the t-interval and the t-test of mean 0 (*p*; the seeds are the resampling "
        "unit: independent training runs). At e*: d-exposure, how far it is below its largest value over the "
        "run (*below run max*) and below the ceiling log2 |C_i| (*below ceiling*; for the model, the mean of the "
        "classes'). *passed*: seeds whose validation loss passed its minimum before the last checkpoint.\n\n"
        + markdown_table(
            [
                "class",
                "e* per seed",
                "d-exposure at e*",
                "below run max",
                "below ceiling",
                "ceiling",
                f"slope per {SLOPE_EPOCHS} epochs",
                "p",
                "passed",
            ],
            trend_rows,
        )  # fmt: skip
        + "\n"
    )


def plot_figure2(
    curve: pd.DataFrame,
    runs: pd.DataFrame,
    paths: Sequence[str | os.PathLike],
    overfit: Mapping,
    style: Mapping,
) -> None:
    """Figure 2, the overfitting experiment: left, d-exposure against epochs (the model's mean
    with its seed band, each class thin, its ceiling log2 |C_i| dotted); right, training and
    validation loss against epochs; the epoch of least mean validation loss dashed in both; in the
    config's `figure_style`."""
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    apply_style(style)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    over = runs[runs["setting"] == "overfit"]
    for cls, part in over.groupby("class", sort=False):
        mean = part.groupby("epoch")["d_exposure"].mean()
        (line,) = left.plot(mean.index, mean.to_numpy(), lw=0.9, alpha=0.8, label=cls)
        # the class's ceiling log2 |C_i|: at it, d-exposure cannot grow
        left.axhline(float(part["max_d_exposure"].iloc[0]), color=line.get_color(), ls=":", lw=0.9)
    left.plot(curve["epoch"], curve["d_exposure"], color="black", lw=2.2, label="mean")
    left.fill_between(
        curve["epoch"], curve["d_exposure_ci_low"], curve["d_exposure_ci_high"], color="black", alpha=0.12
    )
    for col, label in (("train_loss", "training loss"), ("valid_loss", "validation loss")):
        (line,) = right.plot(curve["epoch"], curve[col], lw=1.6, label=label)
        right.fill_between(
            curve["epoch"], curve[f"{col}_ci_low"], curve[f"{col}_ci_high"], color=line.get_color(), alpha=0.15
        )
    if len(curve):
        best = int(curve.loc[curve["valid_loss"].idxmin(), "epoch"])
        for ax in (left, right):
            ax.axvline(best, color="grey", ls="--", lw=0.9)
    left.set_ylabel("d-exposure (bits)")
    right.set_ylabel("loss (cross-entropy per word)")
    for ax in (left, right):
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    seeds = int(curve["n_seeds"].max()) if len(curve) else 0
    fig.suptitle(
        f"Figure 2: overfitting ({overfit['fraction']:.0%} of the notes, {overfit['repetitions']} insertions, "
        f"{seeds} seeds; no dropout, constant learning rate, weight decay {overfit['weight_decay']:g})"
    )
    fig.tight_layout()
    save_figure(fig, paths, style)
