"""Lesson 07's drawing of one encoder layer, post-norm and pre-norm side by side (matplotlib only).

A layer is drawn bottom to top as a column of steps. ``"split"`` marks where the residual path
leaves the main column, ``"add"`` where it comes back (a ⊕); every other step is a box.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch

COLOURS = {"LayerNorm": "#f2d7a6", "multi-head self-attention": "#c8d8ef", "feed-forward network": "#cfe8cf"}

POST_NORM: tuple[str, ...] = ("split", "multi-head self-attention", "add", "LayerNorm",
                              "split", "feed-forward network", "add", "LayerNorm")
PRE_NORM: tuple[str, ...] = ("split", "LayerNorm", "multi-head self-attention", "add",
                             "split", "LayerNorm", "feed-forward network", "add")


def layer_steps(norm_first: bool) -> tuple[str, ...]:
    """The steps of one layer from input to output: boxes, and where the residual splits and adds."""
    return PRE_NORM if norm_first else POST_NORM


def draw_block(norm_first: bool, ax=None):
    """Draw one encoder layer (pre-norm if ``norm_first``) with its residual paths; returns the Axes."""
    if ax is None:
        ax = plt.subplots(figsize=(3.6, 6.2), layout="constrained")[1]
    steps = layer_steps(norm_first)
    main, side, half, box_h, gap = 1.75, 0.3, 1.05, 0.62, 0.42
    y = 0.0
    ax.annotate("", xy=(main, y + gap), xytext=(main, y - 0.25), arrowprops={"arrowstyle": "-|>", "lw": 1.6})
    ax.text(main, y - 0.35, "x  (B, T, D)", ha="center", va="top", fontsize=11)
    y += gap
    split_at = None
    for step in steps:
        if step == "split":
            split_at = y - gap / 2
            ax.plot([main, side, side], [split_at, split_at, split_at], color="0.25", lw=1.6)
            ax.plot([main], [split_at], "o", color="0.25", ms=4)
            continue
        if step == "add":
            centre = y + 0.18
            ax.add_patch(Circle((main, centre), 0.17, fc="white", ec="0.15", lw=1.6, zorder=3))
            ax.text(main, centre, "+", ha="center", va="center", fontsize=14, zorder=4)
            ax.plot([side, side], [split_at, centre], color="0.25", lw=1.6)  # the residual path
            ax.annotate("", xy=(main - 0.17, centre), xytext=(side, centre),
                        arrowprops={"arrowstyle": "-|>", "lw": 1.6, "color": "0.25"})
            top = centre + 0.17
        else:
            ax.add_patch(FancyBboxPatch((main - half, y), 2 * half, box_h, zorder=3,
                                        boxstyle="round,pad=0.02,rounding_size=0.06",
                                        fc=COLOURS[step], ec="0.2", lw=1.3))
            label = step.replace("head ", "head\n").replace("forward ", "forward\n")
            ax.text(main, y + box_h / 2, label, ha="center", va="center", fontsize=10, zorder=4)
            top = y + box_h
        ax.annotate("", xy=(main, top + gap), xytext=(main, top), arrowprops={"arrowstyle": "-|>", "lw": 1.6})
        y = top + gap
    ax.text(main, y + 0.08, "out  (B, T, D)", ha="center", va="bottom", fontsize=11)
    title = ("pre-norm  x + f(LayerNorm(x))\n(GPT-2, ViT)" if norm_first
             else "post-norm  LayerNorm(x + f(x))\n(original Transformer, BERT)")
    ax.set_title(title, fontsize=11)
    ax.set_xlim(0, 3.0)
    ax.set_ylim(-0.8, y + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def plot_block_diagrams(axes=None):
    """Post-norm (left) and pre-norm (right) encoder layers side by side; returns the two Axes."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(8, 6.6), layout="constrained")[1]
    draw_block(False, axes[0])
    draw_block(True, axes[1])
    return axes
