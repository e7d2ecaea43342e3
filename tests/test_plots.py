"""Plot helpers draw what they say, return their Axes, and reject mismatched labels."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.calculator import lookup_steps  # noqa: E402
from helpers.plots import figure_png, plot_lookup, plot_sharpening, plot_weights  # noqa: E402


def test_plot_weights_annotates_every_cell():
    w = np.array([[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])
    ax = plot_weights(w, ["a", "b", "c"], ["x", "y"])
    assert [t.get_text() for t in ax.texts] == ["0.200", "0.800", "0.500", "0.500", "1.000", "0.000"]
    plt.close("all")


def test_plot_weights_rejects_wrong_labels():
    with pytest.raises(ValueError, match="2 key labels"):
        plot_weights(np.ones((3, 3)) / 3, ["a", "b", "c"], ["x", "y"])


def test_plot_lookup_draws_three_panels_on_given_axes():
    steps = lookup_steps(np.eye(2), np.eye(2), np.eye(2), 0, ["a", "b"])
    fig, axes = plt.subplots(1, 3)
    assert list(plot_lookup(steps, axes)) == list(axes)
    assert len(axes[1].patches) == 2 and len(axes[2].patches) == 4
    plt.close(fig)


def test_plot_sharpening_lines_are_softmax_weights():
    ax = plot_sharpening([1.0, 0.0], [1.0, 100.0], ["a", "b"])
    a = ax.lines[0].get_ydata()
    assert a[0] == pytest.approx(np.e / (np.e + 1)) and a[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one label per entry"):
        plot_sharpening([1.0, 0.0], [1.0], ["a"])
    plt.close("all")


def test_figure_png_is_a_png_and_closes_the_figure():
    fig = plt.figure()
    data = figure_png(fig)
    assert data.startswith(b"\x89PNG") and not plt.fignum_exists(fig.number)
