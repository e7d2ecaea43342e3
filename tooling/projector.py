"""Figures for a projector: in a slide build, small figure text is enlarged and thin lines thickened.

A room reads a 1280×720 projector from several metres away: figure text below about 14 screen
pixels and hairlines are lost. A kernel executed for a deck (``tooling.slides.execute``) first runs
:func:`install`; from then on every figure the notebook displays, and every widget's static figure
(``helpers.plots.figure_png``), passes through :func:`for_projector` before it is rendered:

- the figure's size on the slide is estimated from its size in pixels and the room a figure has on a
  slide (``FIGURE_BOX``, from the deck's CSS); every text that would be smaller than ``TARGET_PX``
  screen pixels there is enlarged to that size, by at most ``MAX_GROWTH``;
- data lines thinner than ``MIN_LINE_PT`` points are thickened to it;
- the PNG carries, as a text chunk named ``TEXT_PX_KEY``, the height in PNG pixels of its smallest
  text; the deck's browser check (``tooling.deck_review``) multiplies it by the scale the image is
  shown at, so the size on screen is measured, not assumed.

Notebooks run for learners and for grading never call :func:`install` and are left as they are.
"""

from __future__ import annotations

import os

TARGET_PX = 15.0       # smallest figure text on a 1280×720 screen (the check allows 14)
MAX_GROWTH = 2.6       # a text grows by at most this factor
MIN_LINE_PT = 1.8      # thinnest data line, in points
TEXT_PX_KEY = "projector-text-px"
ENV = "ATTENTION_PROJECTOR"

# The room a figure has on a 1280×720 screen, in screen pixels, as the deck's CSS gives it (an image
# at most 60 % of the viewport's height and the width of a cell on the slide); measured in Chromium.
FIGURE_BOX = (915.0, 425.0)


def active() -> bool:
    """True in a kernel run for slides (after :func:`install`)."""
    return os.environ.get(ENV) in ("1", "measure")


def _render_size(fig, dpi: float, tight: bool) -> tuple[float, float]:
    """The figure's size in pixels once saved at ``dpi`` (``tight``: with ``bbox_inches="tight"``)."""
    if not tight:
        width, height = fig.get_size_inches()
        return width * dpi, height * dpi
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)
    pad = 2 * 0.1  # matplotlib's default pad_inches around a tight box
    return (box.width + pad) * dpi, (box.height + pad) * dpi


def screen_scale(width_px: float, height_px: float) -> float:
    """Screen pixels per PNG pixel for an image of this size on a slide (never enlarged)."""
    return min(1.0, FIGURE_BOX[0] / width_px, FIGURE_BOX[1] / height_px)


def _texts(fig):
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def smallest_text_px(fig, dpi: float) -> float:
    """The height in PNG pixels (at ``dpi``) of the smallest visible text of ``fig``."""
    sizes = [t.get_fontsize() for t in _texts(fig)]
    return min(sizes) * dpi / 72 if sizes else float("inf")


def for_projector(fig, dpi: float | None = None, tight: bool = True) -> float:
    """Enlarge ``fig``'s small text and thicken its thin lines for a slide; returns the smallest
    text in PNG pixels at ``dpi`` (default: the figure's own), saved with a tight box or not.
    With ``$ATTENTION_PROJECTOR`` set to ``measure``, nothing is changed, only measured."""
    dpi = float(dpi or fig.dpi)
    if os.environ.get(ENV) == "measure":
        fig.canvas.draw()
        return smallest_text_px(fig, dpi)
    for ax in fig.get_axes():
        for line in ax.get_lines():
            if 0 < line.get_linewidth() < MIN_LINE_PT:
                line.set_linewidth(MIN_LINE_PT)
    original = {id(t): t.get_fontsize() for t in _texts(fig)}
    for _ in range(3):  # larger text grows the figure, which shrinks it on the slide: settle
        fig.canvas.draw()  # tick labels exist once drawn
        scale = screen_scale(*_render_size(fig, dpi, tight))
        needed_pt = TARGET_PX / scale * 72 / dpi
        changed = False
        for text in _texts(fig):
            base = original.setdefault(id(text), text.get_fontsize())
            size = min(max(base, needed_pt), base * MAX_GROWTH)
            if abs(size - text.get_fontsize()) > 0.05:
                text.set_fontsize(size)
                changed = True
        if not changed:
            break
    return smallest_text_px(fig, dpi)


def png_metadata(text_px: float) -> dict[str, str]:
    return {TEXT_PX_KEY: f"{text_px:.2f}"}


def _widget_png_metadata(fig, dpi: float) -> dict[str, str] | None:
    """A widget's static figure (``helpers.plots.figure_png``), resized for the projector."""
    return png_metadata(for_projector(fig, dpi, tight=False)) if active() else None


def _inline_png(fig):
    """The inline backend's PNG of ``fig``, made for the projector."""
    from IPython.core.pylabtools import print_figure

    text_px = for_projector(fig)
    return print_figure(fig, "png", bbox_inches="tight", base64=True, metadata=png_metadata(text_px))


def install(enlarge: bool = True) -> None:
    """In an IPython kernel: render every figure for the projector from now on (``enlarge=False``:
    only record each figure's smallest text, as a learner's notebook draws it)."""
    import matplotlib.pyplot as plt
    from IPython import get_ipython
    from matplotlib.figure import Figure

    from helpers import plots

    plt.close(plt.figure())  # loads the inline backend, which registers its own formatter first

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("projector.install() works inside an IPython kernel")
    shell.display_formatter.formatters["image/png"].for_type(Figure, _inline_png)
    plots.png_for_projector = _widget_png_metadata  # the static figures of widgets too
    if enlarge:
        plt.rcParams["lines.linewidth"] = max(plt.rcParams["lines.linewidth"], 2.2)
    os.environ[ENV] = "1" if enlarge else "measure"


def text_px_of_png(data: bytes) -> float | None:
    """The smallest-text height a PNG made here records, or None."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        value = getattr(image, "text", {}).get(TEXT_PX_KEY)
    return float(value) if value is not None else None
