"""The study's one figure style and the one way a figure is written.

Every figure of the workflow (the paper's, the zoo's, the DP audit's, the shadow protocol's
Figure 7, canary exposure, d-exposure's Figures 1-2, PHI extraction) is drawn after
`apply_style` and written by `save_figure`, both from the config's `figure_style` (its defaults
live in the schema). The training curves in a model's folder are the exception: they are drawn
while the model trains, and a change of style must not retrain a model."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from mlmia.core.io import atomic_path  # noqa: E402


def apply_style(style: Mapping) -> Mapping:
    """Seaborn's theme from the config's `figure_style` (context, font_scale)."""
    sns.set_theme(context=style["context"], style="whitegrid", font_scale=style["font_scale"])
    return style


def save_figure(fig, paths: Iterable[str | os.PathLike], style: Mapping) -> None:
    """Write `fig` to every path, each atomically, in the format its suffix names (png, pdf,
    svg) at the style's dpi, then close it (also when a write fails)."""
    try:
        for path in paths:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=style["dpi"], format=str(path).rsplit(".", 1)[-1].lower())
    finally:
        plt.close(fig)
