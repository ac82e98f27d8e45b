"""Every figure of the study, in one style: histograms of a statistic (Fig. 3a/3b) and ROC
curves on linear or logarithmic FPR axes (Fig. 4/5, and an audit card's: `plot_card_roc`). A
figure spec (data, from config) names the experiments; this module knows nothing of where they
came from."""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from mlmia.attacks.base import Attack, get_attack  # noqa: E402
from mlmia.core.errors import UserError, shown_id  # noqa: E402
from mlmia.metrics.classification import (  # noqa: E402
    population_threshold,
    published_threshold,
    resolvable,
    tpr_at_fpr,
)
from mlmia.metrics.classification import roc as roc_curve  # noqa: E402  (the curves' loops name theirs `roc`)
from mlmia.report.style import apply_style, save_figure  # noqa: E402

ROLE_COLORS = {"member": "#c0392b", "nonmember": "#2e86c1"}


def member_threshold(table: pd.DataFrame, attack: Attack, alpha: float, protocol: str) -> float:
    """The attack's threshold at alpha, in member-score space (higher = member)."""
    score = attack.member_score(table)
    if protocol == "published":
        return published_threshold(score[(table.role == "nonmember").to_numpy()], alpha)
    return population_threshold(score[(table.role == "population").to_numpy()], alpha)


def marked_member(table: pd.DataFrame, spec: dict) -> pd.Series | None:
    """The member to mark: a given sample_id, or ("auto") among the members that attack
    `mark_caught_by` calls members at the threshold, the one that `mark_missed_by` ranks least
    member-like (by default: the member the likelihood ratio catches and the loss misses most)."""
    mark = spec["mark"]
    members = table[table.role == "member"]
    if mark == "none":
        return None
    if mark != "auto":
        found = members[members.sample_id == mark]
        if found.empty:
            raise UserError(f"figure: marked sample {shown_id(mark)} is not a member of the experiment")
        return found.iloc[0]
    caught_by, missed_by = get_attack(spec["mark_caught_by"]), get_attack(spec["mark_missed_by"])
    threshold = member_threshold(table, caught_by, float(spec["alpha"]), spec["protocol"])
    caught = members[caught_by.member_score(members) > threshold]
    pool = caught if not caught.empty else members
    return pool.iloc[int(np.argmin(missed_by.member_score(pool)))]


def plot_histogram(table: pd.DataFrame, spec: dict, style: dict, title: str):
    """The attack's statistic over members and non-members, its threshold, one member marked."""
    attack = get_attack(spec["attack"])
    alpha = float(spec["alpha"])
    table = table.assign(statistic=attack.statistic(table))
    threshold = member_threshold(table, attack, alpha, spec["protocol"])
    threshold = -threshold if attack.lower_is_member else threshold
    column, label = "statistic", attack.label
    shown = table[table.role.isin(["member", "nonmember"])]
    fig, ax = plt.subplots(figsize=(style["width"], style["height"]))
    sns.histplot(
        data=shown, x=column, hue="role", hue_order=["member", "nonmember"], palette=ROLE_COLORS,
        bins=int(spec["bins"]), stat="density", common_norm=False, element="step", ax=ax,
    )  # fmt: skip
    ax.axvline(threshold, color="black", linestyle="--", linewidth=1.2, label=f"threshold (α = {alpha:g})")
    member = marked_member(table, spec)
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


def _roc_axes(ax, curves: list[tuple[str, pd.DataFrame]], spec: dict, colours_by: str) -> None:
    """Draw every attack's ROC curve of `curves` on `ax`; colours by experiment or by attack. The
    spec may name each attack's legend label (`attack_labels`; default its label) and, on log
    axes, the smallest rate shown (`fpr_min`; default 0.001)."""
    log_x = bool(spec["log_x"])
    attacks = spec["attacks"]
    names = spec.get("attack_labels", {})
    n_colours = len(attacks) if colours_by == "attack" else len(curves)
    palette = sns.color_palette("colorblind" if n_colours <= 10 else "husl", n_colors=max(2, n_colours))
    styles = ["-", "--", ":", "-.", (0, (3, 1, 1, 1))]
    for i, (name, roc) in enumerate(curves):
        for j, attack in enumerate(attacks):
            label = names.get(attack) or get_attack(attack).label
            curve = roc[roc.attack == attack]
            fpr, tpr = curve.fpr.to_numpy(), curve.tpr.to_numpy()
            if log_x:
                keep = (fpr > 0) & (tpr > 0)
                fpr, tpr = fpr[keep], tpr[keep]
            colour = palette[j] if colours_by == "attack" else palette[i]
            style = "-" if colours_by == "attack" else styles[j % len(styles)]
            shown = label if colours_by == "attack" or len(curves) == 1 else f"{name}: {label}"
            ax.plot(fpr, tpr, color=colour, linestyle=style, linewidth=1.2, label=shown)
    lower = float(spec.get("fpr_min", 1e-3)) if log_x else 0.0
    grid = np.logspace(np.log10(lower), 0, 50) if log_x else np.linspace(0, 1, 50)
    ax.plot(grid, grid, color="grey", linewidth=0.8, linestyle=":", label="chance")
    if log_x:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(lower, 1.0)
    ax.set_xlim(lower, 1.0)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")


def plot_roc(curves: list[tuple[str, pd.DataFrame]], spec: dict, style: dict, title: str):
    """ROC curves of the spec's attacks: one panel with every experiment, or (`panels`) one
    panel per experiment with every attack in its own colour."""
    if not spec.get("panels"):
        fig, ax = plt.subplots(figsize=(style["width"], style["height"]))
        _roc_axes(ax, curves, spec, colours_by="experiment")
        ax.set_title(title, fontsize="medium")
        ax.legend(fontsize="x-small", frameon=False, loc="lower right")
        return fig
    fig, axes = plt.subplots(
        1, len(curves), figsize=(style["width"] * len(curves), style["height"] * 1.3), squeeze=False
    )
    for ax, (name, roc) in zip(axes[0], curves):
        _roc_axes(ax, [(name, roc)], spec, colours_by="attack")
        ax.set_title(name, fontsize="medium")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="x-small", frameon=False, loc="lower center", ncol=min(4, len(labels)))
    fig.suptitle(title, fontsize="medium")
    return fig


def plot_card_roc(scores: dict[str, tuple[np.ndarray, np.ndarray]], labels: dict[str, str], fprs, style: dict,
                  title: str):  # fmt: skip
    """An audit card's ROC curves (`mlmia.report.cards`): each attack's from (member, score) arrays
    of one set of units, on log axes down to half the smallest FPR shown, every FPR of `fprs` a
    vertical line (dotted where too few non-members resolve it, `resolvable`) and each attack's TPR
    there a marker of its colour. Only counts and the given labels are written on it."""
    member = next(iter(scores.values()))[0] if scores else np.zeros(0, dtype=bool)
    negatives = int((~np.asarray(member, dtype=bool)).sum())
    frames = []
    for name, (y, score) in scores.items():
        fpr, tpr = roc_curve(y, score)
        frames.append(pd.DataFrame({"attack": name, "fpr": fpr, "tpr": tpr}))
    curves = pd.concat(frames) if frames else pd.DataFrame(columns=["attack", "fpr", "tpr"])
    lower = min([*fprs, 1.0 / max(negatives, 1)]) / 2.0
    spec = {"log_x": True, "attacks": list(scores), "attack_labels": labels, "fpr_min": lower}
    # the legend below the axes (it names up to three attacks and the FPRs): a taller figure, laid out to hold it
    fig, ax = plt.subplots(figsize=(style["width"], style["height"] * 1.6), layout="constrained")
    _roc_axes(ax, [("", curves)], spec, colours_by="attack")
    colours = [line.get_color() for line in ax.lines[: len(scores)]]  # `_roc_axes` draws the attacks first
    for fpr in fprs:
        shown = resolvable(fpr, negatives)
        words = f"FPR {100 * fpr:g}%" + (
            ": the table's TPR (dots)" if shown else f": not resolvable with {negatives} non-members"
        )
        ax.axvline(fpr, color="black", linestyle="--" if shown else ":", linewidth=0.8, label=words)
        for colour, (y, score) in zip(colours, scores.values()):
            tpr = tpr_at_fpr(y, score, fpr) if shown else np.nan
            if tpr > 0:  # a TPR of 0 (or none) has no place on a log axis
                ax.plot([fpr], [tpr], marker="o", markersize=4, color=colour, linestyle="none")
    ax.set_title(title, fontsize="medium")
    fig.legend(*ax.get_legend_handles_labels(), fontsize="x-small", frameon=False, loc="outside lower center")
    return fig


def render_figure(figure_id: str, spec: dict, inputs: dict[str, pd.DataFrame], outputs: list[str], style: dict) -> None:
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
    fig.tight_layout(rect=(0, 0.22, 1, 0.95) if spec.get("panels") else None)
    save_figure(fig, outputs, style)
