"""The privacy-utility figure of the DP audit: leakage against utility, one point per target.

Two panels share the x-axis, the pseudo-perplexity of the non-member samples (lower = more
useful; `mlmia.defences.audit.utility`): the AUC and the TPR at the audit's FPR of each
target's strongest attack (the attack with the highest AUC on that target), each point with
its patient-bootstrap 95% interval in both directions, labelled by the accountant's epsilon
("no DP" for the target trained without it). Drawn from the audit's per-target table
(results/<run>/dp/bounds.csv), in the study's figure style (`mlmia.report.style.apply_style`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _label(row: pd.Series) -> str:
    eps = row["accountant_epsilon"]
    return "no DP" if not math.isfinite(eps) else f"ε = {eps:.2g}"


def _errors(table: pd.DataFrame, key: str) -> np.ndarray:
    """Asymmetric error bars (below, above) from the interval columns; 0 where there is none."""
    value = table[key].to_numpy(dtype=float)
    low = np.nan_to_num(value - table[f"{key}_ci_low"].to_numpy(dtype=float), nan=0.0)
    high = np.nan_to_num(table[f"{key}_ci_high"].to_numpy(dtype=float) - value, nan=0.0)
    return np.vstack([np.maximum(low, 0.0), np.maximum(high, 0.0)])


def sns_palette(n: int) -> list:
    import seaborn as sns

    return sns.color_palette("rocket", max(n, 1))


def privacy_utility_figure(table: pd.DataFrame, fpr: float, style: dict, outputs: list[str]) -> None:
    """Draw the figure from the audit's per-target table and write it to every path (PNG, PDF);
    the targets without an attack audit are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    style = apply_style(style)
    # the targets the zoo's attacks audit (others, e.g. faulty trainers, have no AUC or utility)
    table = table[table["auc"].notna()].reset_index(drop=True) if "auc" in table.columns else table.iloc[:0]
    fig, axes = plt.subplots(1, 2, figsize=(style["width"] * 2, style["height"] * 1.2))
    x = table["pseudo_perplexity"].to_numpy(dtype=float)
    xerr = _errors(table, "pseudo_perplexity")
    colours = sns_palette(len(table))
    panels = (("auc", "AUC of the strongest attack", 0.5), ("tpr", f"TPR at {fpr:g} FPR (%)", 100 * fpr))
    for ax, (key, ylabel, chance) in zip(axes, panels):
        y = table[key].to_numpy(dtype=float)
        yerr = _errors(table, key)
        shown = np.isfinite(y)
        ax.plot(x[shown], y[shown], color="#7f8c8d", linewidth=0.8, zorder=1)
        for i in range(len(table)):
            row = table.iloc[i]
            label = f"{_label(row)} ({row['strongest_attack']})"
            if shown[i]:
                ax.errorbar(x[i : i + 1], y[i : i + 1], xerr=xerr[:, i : i + 1], yerr=yerr[:, i : i + 1], fmt="o",
                            color=colours[i], capsize=3, label=label, zorder=2)  # fmt: skip
        ax.axhline(chance, color="grey", linestyle=":", linewidth=0.8)
        ax.set_xlabel("pseudo-perplexity, non-members")
        ax.set_ylabel(ylabel)
        if not shown.any():
            ax.text(0.5, 0.5, "not resolvable (too few non-members)", transform=ax.transAxes, ha="center")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        # two columns: four targets' labels with their attacks' names overran the figure's width in one row
        fig.legend(handles, labels, loc="lower center", ncol=min(2, len(labels)), fontsize="small", frameon=False)
    fig.suptitle("Privacy and utility of the DP-SGD targets (95% patient-bootstrap intervals)")
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    save_figure(fig, outputs, style)
