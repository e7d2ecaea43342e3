"""Lesson 01's figures: paths through an RNN and through attention, review lengths, and gradients
by distance. Each takes ``ax=None``, returns the Axes it drew on, and never calls ``plt.show()``."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from . import sentiment
from .models import LABELS
from .recurrence import GradientProfile

COLOURS = {"rnn": "#c44e52", "lstm": "#dd8452", "attention": "#4c72b0"}


def _axes(ax, size=(6, 3.4)):
    return ax if ax is not None else plt.subplots(figsize=size, layout="constrained")[1]


def _arrow(ax, start, end, colour="0.55", width=1.0) -> None:
    ax.annotate("", xy=end, xytext=start,
                arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width, "shrinkA": 9, "shrinkB": 9})


def _node(ax, xy, text, colour="white") -> None:
    ax.text(*xy, text, ha="center", va="center", fontsize=9,
            bbox={"boxstyle": "round,pad=0.3", "fc": colour, "ec": "0.4"})


def plot_paths(words: Sequence[str], axes=None):
    """Two diagrams: how the first word reaches the output in an RNN (a chain) and with attention."""
    words = list(words)
    if len(words) < 2:
        raise ValueError(f"need at least two words, got {words!r}")
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(11, 3.2), layout="constrained")[1]
    T, hot = len(words), "#c44e52"
    rnn, att = axes
    for t, word in enumerate(words):
        _node(rnn, (t, 0), word)
        _node(rnn, (t, 1), f"h{t + 1}", "#fbe3e3" if t else "#f4b6b6")
        _arrow(rnn, (t, 0), (t, 1), hot if t == 0 else "0.55", 2 if t == 0 else 1)
        if t:
            _arrow(rnn, (t - 1, 1), (t, 1), hot, 2)
    _node(rnn, (T - 1, 2), "output")
    _arrow(rnn, (T - 1, 1), (T - 1, 2), hot, 2)
    rnn.set_title(f"RNN: '{words[0]}' reaches the output through {T + 1} steps,\n"
                  f"one after the other (step t waits for step t−1)", fontsize=10)
    for t, word in enumerate(words):
        _node(att, (t, 0), word)
        _arrow(att, (t, 0), ((T - 1) / 2, 2), hot if t == 0 else "0.55", 2 if t == 0 else 1)
    _node(att, ((T - 1) / 2, 2), "[CLS] output")
    att.set_title(f"attention: every word is one step from the output,\n"
                  f"and all {T} words are read at the same time", fontsize=10)
    for ax in axes:
        ax.set_xlim(-0.7, T - 0.3)
        ax.set_ylim(-0.5, 2.5)
        ax.axis("off")
    return axes


def plot_lengths(reviews: sentiment.Reviews, config: sentiment.TaskConfig = sentiment.DEFAULT, ax=None):
    """Histogram of review lengths (words), with the length range of each test set shaded."""
    lengths = np.array([len(words) for words in reviews.sentences])
    ax = _axes(ax)
    top = np.bincount(lengths).max()
    shades = ["#4c72b0", "#55a868", "#dd8452", "#c44e52"]
    for i, ((name, n_fillers, distractor), colour) in enumerate(zip(config.test_sets, shades * 2)):
        lo, hi = sentiment.length_range(n_fillers, distractor)
        ax.axvspan(lo - 0.5, hi + 0.5, color=colour, alpha=0.12)
        ax.text((lo + hi) / 2, top * (1.08 + 0.12 * (i % 2)), name, ha="center", fontsize=8, color=colour)
    ax.hist(lengths, bins=np.arange(lengths.min(), lengths.max() + 2) - 0.5, color="0.35")
    ax.set_ylim(0, top * 1.32)
    ax.set_xlabel("words in the review")
    ax.set_ylabel("training reviews")
    ax.set_title(f"{len(lengths):,} training reviews (shaded: where each test set lies)", fontsize=10)
    return ax


def plot_gradient_by_distance(profile: GradientProfile, ax=None, mark: int | None = 40,
                              title: str = "before training"):
    """Median ‖∂logit/∂x‖ relative to the last word, by distance from the end (log scale), per model."""
    ax = _axes(ax)
    d = np.arange(profile.n_distances)
    for name, ratios in profile.ratios.items():
        lo, mid, hi = np.percentile(ratios, [25, 50, 75], axis=0)
        colour = COLOURS.get(name, None)
        ax.plot(d, mid, color=colour, lw=2, label=LABELS.get(name, name))
        ax.fill_between(d, lo, hi, color=colour, alpha=0.2)
    if mark is not None and 0 <= mark < profile.n_distances:
        ax.axvline(mark, color="0.5", lw=0.8, ls=":")
        for name in profile.ratios:
            value = profile.at(name, mark)
            ax.annotate(f"{value:.0e}", (mark, value), xytext=(8, 6), textcoords="offset points",
                        fontsize=8, color=COLOURS.get(name, "k"), va="bottom",
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
        ax.set_xlim(-1, max(profile.n_distances, mark + 1) + 6)  # room for the labels
    ax.set_yscale("log")
    ax.set_xlabel("distance from the last word (words)")
    ax.set_ylabel("‖∂ logit / ∂ word‖ ÷ last word's")
    ax.set_title(f"how strongly each word can move the output, {title}\n"
                 "(median over reviews and seeds; band: quartiles)", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return ax


def plot_training_losses(shipped: dict, longer: Sequence[Sequence[float]] = (),
                         highlight: Sequence[bool] = (), labels: tuple[str, str] = ("", ""),
                         budget: int = 20, axes=None):
    """Mean training loss by epoch. Left: every shipped run of each model. Right (with ``longer``):
    the plain RNN trained for more epochs, one line per run, those in ``highlight`` in colour;
    ``labels`` name the two kinds of line."""
    panels = 2 if longer else 1
    if axes is None:
        axes = plt.subplots(1, panels, figsize=(5.5 * panels, 3.5), layout="constrained")[1]
    axes = np.atleast_1d(axes)
    guess = float(np.log(2))
    for run in shipped["runs"]:
        name = run["model"]
        first = run["seed"] == min(r["seed"] for r in shipped["runs"] if r["model"] == name)
        axes[0].plot(np.arange(1, len(run["loss"]) + 1), run["loss"], color=COLOURS.get(name), lw=1.4,
                     label=LABELS.get(name, name) if first else None)
    axes[0].set_title(f"the shipped runs: {budget} epochs", fontsize=10)
    axes[0].legend(fontsize=8, loc="lower left")
    if longer:
        flags = list(highlight) or [False] * len(longer)
        for losses, hit in sorted(zip(longer, flags), key=lambda pair: pair[1]):
            axes[1].plot(np.arange(1, len(losses) + 1), losses, lw=1.0 if hit else 0.7,
                         color=COLOURS["rnn"] if hit else "0.6", alpha=0.9 if hit else 0.6)
        axes[1].axvline(budget, color="0.3", lw=0.8, ls="--")
        axes[1].text(budget, 0.97, f" the lesson's {budget} epochs", transform=axes[1].get_xaxis_transform(),
                     fontsize=8, color="0.3", va="top")
        if any(labels):
            axes[1].plot([], [], color=COLOURS["rnn"], label=labels[0])
            axes[1].plot([], [], color="0.6", label=labels[1])
        axes[1].set_title(f"the plain RNN, {len(longer)} runs trained longer", fontsize=10)
        if any(labels):
            axes[1].legend(fontsize=8, loc="lower left")
    for ax in axes:
        ax.axhline(guess, color="0.5", lw=0.8, ls=":")
        ax.text(0.99, guess, "guessing (ln 2)", transform=ax.get_yaxis_transform(), ha="right",
                va="bottom", fontsize=8, color="0.4")
        ax.set_xlabel("epoch")
    for ax in axes:
        ax.set_ylabel("mean training loss")
    return axes
