"""Interactive widgets: thin ipywidgets wrappers around tested functions.

Each widget is displayed together with a static PNG of its initial state. JupyterLab shows
the live widget; exported HTML, slides and other front ends without a widget manager show
the picture instead.
"""

from __future__ import annotations

import base64

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from .calculator import lookup_steps, parse_matrix, steps_html, with_key
from .plots import figure_png, plot_lookup, plot_scaling_view
from .scaling import scaling_view, view_summary


class WithFallback:
    """Display ``widget`` live where widgets work, else the PNG ``static`` (if there is one:
    ``plots.figure_png`` renders none where figures are not shown as pictures)."""

    def __init__(self, widget: W.Widget, static: bytes):
        self.widget, self.static = widget, static

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        if self.static:
            bundle["image/png"] = base64.b64encode(self.static).decode("ascii")
        return bundle


def _matrix_text(a: np.ndarray) -> str:
    return "\n".join(" ".join(f"{x:g}" for x in row) for row in np.asarray(a))


def attention_calculator(q, k, v, tokens, experiment: tuple[str, list[float]] | None = None) -> WithFallback:
    """Pick a query token, toggle the √d_k scale, edit Q, K, V: the lookup is recomputed.

    ``experiment``, a token and a new key for it such as ``("spike", [3, 0])``, is the edit the
    lesson suggests: where widgets do not run, the static picture shows the first query's lookup
    after that edit (without it, the lookup as given).
    """
    tokens = list(tokens)
    pick = W.Dropdown(options=[(t, i) for i, t in enumerate(tokens)], value=0, description="query")
    scale = W.Checkbox(value=True, description="divide by √d_k")
    boxes = {name: W.Textarea(value=_matrix_text(m), description=name,
                              layout=W.Layout(width="180px", height="90px"))
             for name, m in (("Q", q), ("K", k), ("V", v))}
    out = W.HTML()

    def update(_=None):
        try:
            mats = {n: parse_matrix(b.value, n) for n, b in boxes.items()}
            steps = lookup_steps(mats["Q"], mats["K"], mats["V"], pick.value, tokens, scale.value)
            out.value = steps_html(steps)
        except ValueError as err:
            out.value = f'<p style="color:#b00">{err}</p>'

    for control in (pick, scale, *boxes.values()):
        control.observe(update, names="value")
    update()
    ui = W.VBox([W.HBox([pick, scale]), W.HBox(list(boxes.values())), out])
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), layout="constrained")
    if experiment is None:
        plot_lookup(lookup_steps(q, k, v, 0, tokens), axes)
    else:
        token, key = experiment
        plot_lookup(lookup_steps(q, with_key(k, tokens, token, key), v, 0, tokens), axes)
        shown = ", ".join(f"{x:g}" for x in np.asarray(key, dtype=float))
        fig.suptitle(f"the calculator after the edit: {token}'s key set to [{shown}]")
    return WithFallback(ui, figure_png(fig))


# Lesson 03: the d_k slider and the √d_k switch.


def scaling_explorer(d_k: int = 64, scale: bool = False, n_keys: int = 16, seed: int = 0) -> WithFallback:
    """Slide d_k from 2 to 512 and switch ÷√d_k on and off: scores, weights and their numbers."""
    widths = [2**i for i in range(1, 10)]
    slider = W.SelectionSlider(options=widths, value=d_k if d_k in widths else 64, description="d_k",
                               continuous_update=False)
    switch = W.Checkbox(value=scale, description="divide by √d_k")
    picture, numbers = W.Image(format="png"), W.HTML()

    def draw(width: int, on: bool) -> tuple[bytes, str]:
        view = scaling_view(width, on, n_keys=n_keys, seed=seed)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
        plot_scaling_view(view, axes)
        return figure_png(fig), view_summary(view)

    def update(_=None) -> bytes:
        png, text = draw(slider.value, switch.value)
        picture.value, numbers.value = png, f"<p>{text}</p>"
        return png

    for control in (slider, switch):
        control.observe(update, names="value")
    first = update()
    ui = W.VBox([W.HBox([slider, switch]), picture, numbers])
    return WithFallback(ui, first)
