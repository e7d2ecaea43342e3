"""Figures for a projector: small text grows to the target size on a slide, lines thicken, and a
measure-only run changes nothing."""

import base64

import matplotlib.pyplot as plt
import pytest

from helpers.plots import figure_png
from tooling import projector


def _figure(width=10.0, height=4.0, small=7):
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    ax.plot([0, 1, 2], [1, 0, 1], linewidth=0.8)
    ax.set_title("a title", fontsize=small)
    ax.set_xlabel("x", fontsize=small + 2)
    ax.text(1, 0.5, "note", fontsize=small)
    return fig


def _smallest_on_screen(fig, tight=True):
    fig.canvas.draw()
    width, height = projector._render_size(fig, fig.dpi, tight)
    return projector.smallest_text_px(fig, fig.dpi) * projector.screen_scale(width, height)


@pytest.mark.parametrize("size", [(10, 4), (6, 4), (14, 3), (4, 6)])
def test_small_text_reaches_the_target_on_screen(monkeypatch, size):
    monkeypatch.setenv(projector.ENV, "1")
    fig = _figure(*size)
    before = _smallest_on_screen(fig)
    px = projector.for_projector(fig)
    after = _smallest_on_screen(fig)
    assert before < projector.TARGET_PX - 1, "the test figure must start too small"
    assert after >= projector.TARGET_PX - 0.5, f"{before:.1f} px became {after:.1f} px on screen"
    assert px == pytest.approx(projector.smallest_text_px(fig, fig.dpi))
    assert min(line.get_linewidth() for line in fig.axes[0].get_lines()) >= projector.MIN_LINE_PT
    plt.close(fig)


def test_large_text_is_left_alone(monkeypatch):
    monkeypatch.setenv(projector.ENV, "1")
    fig = _figure(5, 3, small=30)
    sizes = sorted(t.get_fontsize() for t in projector._texts(fig))
    projector.for_projector(fig)
    assert 30 in sizes and sorted(t.get_fontsize() for t in projector._texts(fig))[-3:] == sizes[-3:]
    plt.close(fig)


def test_measure_only_changes_nothing_and_the_png_records_the_size(monkeypatch):
    from helpers import plots

    monkeypatch.setenv(projector.ENV, "measure")
    monkeypatch.setattr(plots, "png_for_projector", projector._widget_png_metadata)  # what install() sets
    fig = _figure()
    fig.canvas.draw()  # the tick labels exist once drawn
    sizes = [t.get_fontsize() for t in projector._texts(fig)]
    png = figure_png(fig)  # a widget's static figure
    assert [t.get_fontsize() for t in projector._texts(fig)] == sizes
    assert projector.text_px_of_png(png) == pytest.approx(7 * 90 / 72, abs=0.01)
    monkeypatch.delenv(projector.ENV)
    assert projector.text_px_of_png(figure_png(_figure())) is None, "outside a slide build nothing is added"
    monkeypatch.setattr(plots, "png_for_projector", None)
    monkeypatch.setenv(projector.ENV, "measure")
    assert projector.text_px_of_png(figure_png(_figure())) is None, "a library figure without install()"


def test_inline_figures_of_a_slide_kernel_go_through_the_projector():
    """What tooling.slides.execute does: install() in an IPython shell, then display a figure."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        projector.install()
        fig = _figure()
        data, _ = shell.display_formatter.format(fig)
        px = projector.text_px_of_png(base64.b64decode(data["image/png"]))
        assert px is not None and px > 7 * fig.dpi / 72
    finally:
        InteractiveShell.clear_instance()
        import os

        os.environ.pop(projector.ENV, None)
        plt.close("all")
