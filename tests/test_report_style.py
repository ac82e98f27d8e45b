"""The one figure saver: every format, the style's dpi, atomic writes, the figure closed."""

import matplotlib
import matplotlib.pyplot as plt
import pytest

from mlmia.report.style import apply_style, save_figure

STYLE = {"context": "paper", "font_scale": 1.0, "width": 5.0, "height": 3.6, "dpi": 50}


def test_save_figure_writes_each_format_at_the_styles_dpi(tmp_path):
    for dpi in (50, 100):
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([0, 1], [0, 1])
        png, pdf = tmp_path / f"figure_{dpi}.png", tmp_path / f"figure_{dpi}.pdf"
        save_figure(fig, [png, pdf], {**STYLE, "dpi": dpi})
        # a 2 x 1 inch figure is 2*dpi x 1*dpi pixels
        assert matplotlib.image.imread(png).shape[:2] == (dpi, 2 * dpi)
        assert pdf.read_bytes().startswith(b"%PDF")
        assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "figure_100.pdf",
        "figure_100.png",
        "figure_50.pdf",
        "figure_50.png",
    ]


def test_save_figure_leaves_no_partial_file_and_closes_the_figure(tmp_path):
    fig, _ = plt.subplots()
    with pytest.raises(ValueError):
        save_figure(fig, [tmp_path / "figure.unknownformat"], STYLE)
    assert list(tmp_path.iterdir()) == []
    assert not plt.fignum_exists(fig.number)


def test_apply_style_sets_the_context_and_font_scale():
    apply_style({**STYLE, "context": "talk", "font_scale": 2.0})
    talk = plt.rcParams["font.size"]
    apply_style({**STYLE, "context": "paper", "font_scale": 1.0})
    # seaborn's talk context scales fonts by 1.5 over notebook, paper by 0.8: with the
    # font_scale 2 against 1, the talk size is 2 * 1.5 / 0.8 = 3.75 times the paper size
    assert talk == pytest.approx(3.75 * plt.rcParams["font.size"])
