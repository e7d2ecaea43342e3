"""Figures used by the lessons. Each takes ``ax=None`` (or ``axes``), returns what it drew on,
and never calls ``plt.show()``."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .attention import softmax
from .calculator import LookupSteps
from .scaling import ScalingView, Sweep


def _axes(ax):
    return ax if ax is not None else plt.subplots(figsize=(4, 3.2), layout="constrained")[1]


def plot_weights(weights, query_labels: Sequence[str], key_labels: Sequence[str], ax=None,
                 title: str | None = None):
    """Heatmap of attention weights (n_q, n_k), each cell annotated with its value."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(query_labels), len(key_labels)):
        raise ValueError(f"weights have shape {weights.shape}, but there are {len(query_labels)} "
                         f"query labels and {len(key_labels)} key labels")
    ax = _axes(ax)
    ax.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_labels)), key_labels)
    ax.set_yticks(range(len(query_labels)), query_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    for i, j in np.ndindex(weights.shape):
        colour = "white" if weights[i, j] > 0.6 else "black"
        ax.text(j, i, f"{weights[i, j]:.3f}", ha="center", va="center", color=colour, fontsize=9)
    if title:
        ax.set_title(title)
    return ax


def plot_lookup(steps: LookupSteps, axes=None):
    """Three panels for one query: scores, weights, and the output built from weighted values."""
    if axes is None:
        axes = plt.subplots(1, 3, figsize=(10, 3), layout="constrained")[1]
    who = steps.tokens[steps.query_index]
    x = np.arange(len(steps.tokens))
    axes[0].bar(x - 0.2, steps.raw_scores, 0.4, label="q · k")
    axes[0].bar(x + 0.2, steps.scaled_scores, 0.4, label=f"÷ {steps.scale:.3g}")
    axes[0].set_title(f"1. scores of '{who}'")
    axes[0].legend(fontsize=8)
    axes[1].bar(x, steps.weights, color="#4c72b0")
    axes[1].set_ylim(0, 1)
    axes[1].set_title("2. softmax → weights")
    for j, w in enumerate(steps.weights):
        axes[1].text(j, w + 0.02, f"{w:.3f}", ha="center", fontsize=9)
    for ax in axes[:2]:
        ax.set_xticks(x, steps.tokens)
    bottom = np.zeros_like(steps.output)
    dims = np.arange(len(steps.output))
    for token, c in zip(steps.tokens, steps.contributions):
        axes[2].bar(dims, c, bottom=bottom, label=f"{token}")
        bottom = bottom + c
    for d, o in zip(dims, steps.output):
        axes[2].text(d, o, f"{o:.3f}", ha="center", va="bottom", fontsize=9)
    axes[2].set_xticks(dims, [f"dim {d}" for d in dims])
    axes[2].set_title("3. output = Σ weight × value")
    axes[2].legend(fontsize=8)
    return axes


def plot_sharpening(scores, factors, labels: Sequence[str], ax=None):
    """Softmax weights of ``scores`` multiplied by each factor: from a blend to a near copy."""
    scores = np.asarray(scores, dtype=float)
    factors = np.asarray(factors, dtype=float)
    if scores.ndim != 1 or len(labels) != len(scores):
        raise ValueError(f"need a 1-D score vector with one label per entry, got {scores.shape} "
                         f"and {len(labels)} labels")
    ax = _axes(ax)
    weights = softmax(factors[:, None] * scores[None, :])  # (n_factors, n)
    for j, label in enumerate(labels):
        ax.plot(factors, weights[:, j], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("scores multiplied by")
    ax.set_ylabel("attention weight")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return ax


def figures_shown() -> bool:
    """Whether figures are shown as pictures here: outside IPython, and in Jupyter as set up by
    default. A grading kernel shows a figure as its one-line text instead (the course's grader
    draws no pictures for nothing)."""
    from IPython import get_ipython
    from matplotlib.figure import Figure

    formatter = getattr(get_ipython(), "display_formatter", None)
    if formatter is None or "image/png" not in formatter.formatters:
        return True
    return formatter.formatters["image/png"].for_type(Figure) is not None


# A slide build draws every figure for a projector: ``tooling.projector.install()`` sets this to
# a function (figure, dpi) -> the PNG metadata of the figure it has resized. None: as drawn.
png_for_projector = None


def figure_png(fig) -> bytes:
    """The figure as PNG bytes, closed afterwards (for static fallbacks of widgets); sized for a
    projector in a slide build (``png_for_projector``). Where figures are not shown as pictures
    (``figures_shown``), no bytes: nothing is rendered."""
    import io

    if not figures_shown():
        plt.close(fig)
        return b""

    dpi = 90
    metadata = png_for_projector(fig, dpi) if png_for_projector is not None else None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata=metadata)
    plt.close(fig)
    return buf.getvalue()


# Lesson 03: why the scores are divided by √d_k.


def _log2_axis(ax, d_ks) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(d_ks), [str(int(d)) for d in d_ks])
    ax.set_xlabel("d_k (width of queries and keys)")


def plot_score_std(d_ks, measured, ax=None):
    """Measured std of q·k for each d_k against √d_k, and of q·k / √d_k against 1."""
    d_ks, measured = np.asarray(d_ks, dtype=float), np.asarray(measured, dtype=float)
    if d_ks.shape != measured.shape or d_ks.ndim != 1:
        raise ValueError(f"need one measurement per d_k, got {d_ks.shape} and {measured.shape}")
    ax = _axes(ax)
    ax.plot(d_ks, np.sqrt(d_ks), color="0.6", lw=3, alpha=0.6, label="√d_k")
    ax.plot(d_ks, measured, "o", color="#c44e52", label="measured std of q·k")
    ax.plot(d_ks, measured / np.sqrt(d_ks), "s", color="#4c72b0", label="measured std of q·k / √d_k")
    ax.axhline(1.0, color="#4c72b0", lw=0.8, ls=":")
    ax.set_yscale("log", base=2)
    _log2_axis(ax, d_ks)
    ax.set_ylabel("standard deviation of the score")
    ax.legend(fontsize=8)
    return ax


def plot_scaling_view(view: ScalingView, axes=None):
    """Two panels: the scores of all queries (histogram) and the weights of a typical query."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")[1]
    spread = 4 * max(1.0, np.sqrt(view.d_k))  # the raw scores' range, with the scale on or off
    axes[0].hist(view.scores.ravel(), bins=np.linspace(-spread, spread, 81), color="#c44e52"
                 if not view.scale else "#4c72b0")
    axes[0].set_xlim(-spread, spread)
    axes[0].set_xlabel("score" + (" q·k / √d_k" if view.scale else " q·k"))
    axes[0].set_ylabel("count")
    axes[0].set_title(f"d_k = {view.d_k}: scores, std {view.stats.score_std:.2f}")
    weights = view.weights[view.shown]
    keys = np.arange(len(weights))
    axes[1].bar(keys, weights, color="#c44e52" if not view.scale else "#4c72b0")
    axes[1].axhline(1 / len(weights), color="0.5", lw=0.8, ls=":", label="uniform")
    axes[1].set_ylim(0, 1)
    axes[1].set_xlabel("key")
    axes[1].set_ylabel("weight")
    axes[1].set_title(f"a typical query: max weight {weights.max():.2f}, "
                      + ("÷√d_k" if view.scale else "not scaled"))
    axes[1].legend(fontsize=8, loc="upper right")
    return axes


def plot_scaling_sweep(sweep: Sweep, axes=None):
    """Three panels against d_k, without and with ÷√d_k: max weight, entropy, size of ∂p/∂z."""
    if axes is None:
        axes = plt.subplots(1, 3, figsize=(12, 3.4), layout="constrained")[1]
    d_ks, n = np.array(sweep.d_ks), sweep.n_keys
    styles = (("without ÷√d_k", sweep.raw, "#c44e52", "o-"), ("with ÷√d_k", sweep.scaled, "#4c72b0", "s-"))
    for label, stats, colour, marker in styles:
        axes[0].plot(d_ks, [s.max_weight for s in stats], marker, color=colour, label=label)
        axes[1].plot(d_ks, [s.entropy for s in stats], marker, color=colour, label=label)
        lo, hi = np.array([s.jacobian_quartiles for s in stats]).T
        axes[2].plot(d_ks, [s.jacobian_norm for s in stats], marker, color=colour, label=label)
        axes[2].fill_between(d_ks, lo, hi, color=colour, alpha=0.15)
    axes[0].axhline(1.0, color="0.5", lw=0.8, ls=":")
    axes[0].axhline(1 / n, color="0.5", lw=0.8, ls="--", label=f"uniform (1/{n})")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_ylabel("mean largest weight")
    axes[0].set_title("how one-hot?")
    axes[1].axhline(np.log(n), color="0.5", lw=0.8, ls="--", label=f"uniform (log {n})")
    axes[1].set_ylim(0, np.log(n) * 1.1)
    axes[1].set_ylabel("mean entropy (nats)")
    axes[1].set_title("how spread out?")
    axes[2].set_yscale("log")
    axes[2].set_ylabel("median ‖∂p/∂z‖ (band: quartiles)")
    axes[2].set_title("how much gradient passes?")
    for ax in axes:
        _log2_axis(ax, d_ks)
        ax.legend(fontsize=8)
    return axes


def plot_trained_spread(spreads, predicted: float, axes=None):
    """Each head's score spread (log scale) and entropy share: untrained, then trained layer by layer."""
    from .scaling import UNSCALED_64, spread_groups

    if axes is None:
        axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")[1]
    groups = spread_groups(spreads)
    seeds = sorted({h.seed for h in spreads})
    colours = plt.cm.viridis(np.linspace(0.1, 0.8, len(seeds)))
    for ax, field, label in ((axes[0], "score_std", "std of q·k / √d_head"),
                             (axes[1], "entropy", "mean entropy / log(number of keys)")):
        for x, (_, heads) in enumerate(groups):
            for colour, seed in zip(colours, seeds):
                values = [getattr(h, field) for h in heads if h.seed == seed]
                jitter = np.linspace(-0.18, 0.18, len(values)) + (seed - np.mean(seeds)) * 0.04
                ax.scatter(x + jitter, values, s=22, color=colour, label=f"seed {seed}" if x == 0 else None)
        ax.set_xticks(range(len(groups)), [name.replace(", ", "\n") for name, _ in groups])
        ax.set_ylabel(label)
    axes[0].set_yscale("log")
    axes[0].axhline(predicted, color="tab:blue", ls="--", lw=1)
    axes[0].text(0.99, predicted, f"predicted at init: {predicted:.2g}",
                 transform=axes[0].get_yaxis_transform(), ha="right", va="bottom", color="tab:blue",
                 fontsize=8)
    axes[0].axhline(UNSCALED_64, color="tab:red", ls=":", lw=1)
    axes[0].text(0.01, UNSCALED_64, f"unscaled scores at d_k = 64: {UNSCALED_64:g}",
                 transform=axes[0].get_yaxis_transform(), ha="left", va="bottom", color="tab:red", fontsize=8)
    axes[1].set_ylim(0, 1.05)
    axes[1].axhline(1, color="grey", ls=":", lw=1)  # uniform weights
    axes[0].legend(fontsize=8, loc="upper left")
    return axes
