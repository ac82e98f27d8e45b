"""Every figure of the study, in one style: histograms of a statistic (Fig. 3a/3b) and ROC
curves on linear or logarithmic FPR axes (Fig. 4/5). A figure spec (data, from config)
names the experiments; this module knows nothing of where they came from."""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from mlmia.errors import UserError  # noqa: E402
from mlmia.io import atomic_path  # noqa: E402
from mlmia.metrics import population_threshold, published_threshold  # noqa: E402

STATISTICS = {
    "lr": ("stat", "likelihood ratio  L = E(target) - E(reference)"),
    "loss": ("target", "target loss  E(target)"),
}
ROLE_COLORS = {"member": "#c0392b", "nonmember": "#2e86c1"}


def apply_style(style: dict | None = None) -> dict:
    style = {"context": "paper", "font_scale": 1.2, "width": 5.0, "height": 3.6, "dpi": 150, **(style or {})}
    sns.set_theme(context=style["context"], style="whitegrid", font_scale=style["font_scale"])
    return style


def threshold_for(table: pd.DataFrame, column: str, alpha: float, protocol: str) -> float:
    if protocol == "published":
        return published_threshold(table.loc[table.role == "nonmember", column].to_numpy(), alpha)
    return population_threshold(table.loc[table.role == "population", column].to_numpy(), alpha)


def marked_member(table: pd.DataFrame, threshold: float, mark: str | None) -> pd.Series | None:
    """The member to mark: a given sample_id, or ("auto") the member the likelihood ratio
    catches at the threshold whose loss is highest, i.e. the one the loss attack misses most."""
    members = table[table.role == "member"]
    if mark in (None, "none"):
        return None
    if mark != "auto":
        found = members[members.sample_id == mark]
        if found.empty:
            raise UserError(f"figure: marked sample {mark!r} is not a member of the experiment")
        return found.iloc[0]
    caught = members[members.stat < threshold]
    pool = caught if not caught.empty else members
    return pool.loc[pool.target.idxmax()]


def plot_histogram(table: pd.DataFrame, spec: dict, style: dict, title: str):
    column, label = STATISTICS[spec.get("statistic", "lr")]
    alpha = float(spec.get("alpha", 0.1))
    protocol = spec.get("protocol", "corrected")
    threshold = threshold_for(table, column, alpha, protocol)
    lr_threshold = threshold_for(table, "stat", alpha, protocol)
    shown = table[table.role.isin(["member", "nonmember"])]
    fig, ax = plt.subplots(figsize=(style["width"], style["height"]))
    sns.histplot(
        data=shown, x=column, hue="role", hue_order=["member", "nonmember"], palette=ROLE_COLORS,
        bins=int(spec.get("bins", 50)), stat="density", common_norm=False, element="step", ax=ax,
    )  # fmt: skip
    ax.axvline(threshold, color="black", linestyle="--", linewidth=1.2, label=f"threshold (α = {alpha:g})")
    member = marked_member(table, lr_threshold, spec.get("mark", "auto"))
    if member is not None:
        ax.axvline(member[column], color=ROLE_COLORS["member"], linewidth=2.0, label="marked member")
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.get_legend()
    if legend is not None:
        handles = legend.legend_handles + handles
        labels = [t.get_text() for t in legend.get_texts()] + labels
        legend.remove()
    ax.legend(handles, labels, fontsize="small", frameon=False)
    ax.set_xlabel(label)
    ax.set_title(title, fontsize="medium")
    return fig


def plot_roc(curves: list[tuple[str, pd.DataFrame]], spec: dict, style: dict, title: str):
    log_x = bool(spec.get("log_x", False))
    fig, ax = plt.subplots(figsize=(style["width"], style["height"]))
    palette = sns.color_palette("colorblind", n_colors=max(2, len(curves) * 2))
    for i, (name, roc) in enumerate(curves):
        for j, (method, label) in enumerate((("lr", "(B) likelihood ratio"), ("loss", "(A) loss"))):
            curve = roc[roc.method == method]
            fpr = curve.fpr.to_numpy()
            tpr = curve.tpr.to_numpy()
            if log_x:
                keep = fpr > 0
                fpr, tpr = fpr[keep], tpr[keep]
            linestyle = "-" if method == "lr" else "--"
            ax.plot(fpr, tpr, color=palette[i], linestyle=linestyle, label=f"{name}: {label}" if len(curves) > 1 else label)
    lower = 1e-3 if log_x else 0.0
    grid = np.logspace(-3, 0, 50) if log_x else np.linspace(0, 1, 50)
    ax.plot(grid, grid, color="grey", linewidth=0.8, linestyle=":", label="chance")
    if log_x:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(lower, 1.0)
    ax.set_xlim(lower, 1.0)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="x-small", frameon=False, loc="lower right")
    return fig


def render_figure(figure_id: str, spec: dict, inputs: dict[str, pd.DataFrame], outputs: list[str], style: dict | None = None) -> None:
    """Draw one figure from its spec and write it to every output path (PNG, PDF)."""
    style = apply_style(style)
    title = textwrap.fill(spec.get("title", figure_id), 48)
    kind = spec.get("kind")
    if kind == "histogram":
        (table,) = inputs.values()
        fig = plot_histogram(table, spec, style, title)
    elif kind == "roc":
        labels = spec.get("labels", {})
        fig = plot_roc([(labels.get(name, name), roc) for name, roc in inputs.items()], spec, style, title)
    else:
        raise UserError(f"figure {figure_id!r}: unknown kind {kind!r} (use histogram or roc)")
    fig.tight_layout()
    try:
        for path in outputs:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=style["dpi"], format=str(path).rsplit(".", 1)[-1])
    finally:
        plt.close(fig)
