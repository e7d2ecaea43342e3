"""Figures used by the lessons. Each takes ``ax=None`` (or ``axes``), returns what it drew on,
and never calls ``plt.show()``."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .attention import softmax
from .calculator import LookupSteps


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


def figure_png(fig) -> bytes:
    """The figure as PNG bytes, closed afterwards (for static fallbacks of widgets)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()
