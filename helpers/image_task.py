"""Lesson 09's image task: do the shapes in two opposite corners match?

Every image is 32 × 32 pixels, one grey channel, with a small shape in each of its four corners
(one of ``SHAPES``, placed at a random offset inside its 16 × 16 quadrant, at a random brightness)
on a noisy background. The label is 1 when the **top-left** and the **bottom-right** shapes are the
same kind, else 0 (half the images each). The top-right and bottom-left shapes are distractors:
they may match either corner and must be ignored, so a model has to know *where* a shape is, and
has to bring together two regions about 20 pixels apart.

Everything is generated with NumPy from a seed: the same seed gives the same images everywhere.

    train = training_set()   # 10,000 images, seed 0
    test = test_set()        # 2,000 images, seed 1
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch

IMAGE_SIZE = 32
QUADRANT = IMAGE_SIZE // 2
STAMP = 7  # every shape is drawn in a 7 × 7 box
CORNERS = ("top-left", "top-right", "bottom-left", "bottom-right")
COMPARED = (0, 3)  # the label compares the shapes in these corners: top-left and bottom-right
N_TRAIN, N_TEST = 10_000, 2_000
TRAIN_SEED, TEST_SEED = 0, 1


def _stamps() -> dict[str, np.ndarray]:
    """The shapes as 7 × 7 masks in {0, 1}: each has 13 to 24 lit pixels."""
    r = np.arange(STAMP)
    row, col = np.meshgrid(r, r, indexing="ij")
    c = STAMP // 2
    ring = (np.maximum(np.abs(row - c), np.abs(col - c)) == c)  # the outline of a square
    plus = (row == c) | (col == c)
    cross = (row == col) | (row + col == STAMP - 1)
    diamond = (np.abs(row - c) + np.abs(col - c) == c)  # the outline of a diamond
    bars = (row % 3 == 0) & (col > 0) & (col < STAMP - 1)  # three horizontal bars
    return {name: m.astype(np.float32) for name, m in
            (("square", ring), ("plus", plus), ("cross", cross), ("diamond", diamond), ("bars", bars))}


SHAPES: dict[str, np.ndarray] = _stamps()
SHAPE_NAMES: tuple[str, ...] = tuple(SHAPES)


@dataclass(frozen=True)
class ImageSet:
    """A set of task images: images (N, 1, 32, 32) float32, labels (N,) in {0, 1},
    shapes (N, 4) shape index per corner (``CORNERS`` order), offsets (N, 4, 2) top-left pixel
    of each shape (row, column)."""

    images: np.ndarray
    labels: np.ndarray
    shapes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """images (N, 1, 32, 32) float32 and labels (N,) float32, as torch tensors."""
        return torch.from_numpy(self.images), torch.from_numpy(self.labels.astype(np.float32))

    def describe(self, i: int) -> str:
        """One line for image ``i``: its four shapes and its label."""
        names = [SHAPE_NAMES[s] for s in self.shapes[i]]
        a, b = (names[k] for k in COMPARED)
        verdict = "match" if self.labels[i] else "differ"
        return f"{a} (top-left) and {b} (bottom-right) {verdict}; distractors {names[1]}, {names[2]}"


def make_images(n: int, seed: int, noise: float = 0.15) -> ImageSet:
    """``n`` task images from ``seed`` (half of them matching), deterministic; see the module docstring."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    k = len(SHAPE_NAMES)
    labels = np.zeros(n, dtype=np.int64)
    labels[: n // 2] = 1
    labels = rng.permutation(labels)
    shapes = rng.integers(0, k, size=(n, 4))
    # Compared corners: a matching pair copies the top-left shape; a differing pair shifts it.
    first, last = COMPARED
    shift = rng.integers(1, k, size=n)
    shapes[:, last] = np.where(labels == 1, shapes[:, first], (shapes[:, first] + shift) % k)
    span = QUADRANT - STAMP - 1  # offsets 1 … 8 inside each quadrant: never touching a border
    offsets = rng.integers(1, span + 1, size=(n, 4, 2))
    brightness = rng.uniform(0.6, 1.0, size=(n, 4)).astype(np.float32)
    images = (noise * rng.standard_normal((n, IMAGE_SIZE, IMAGE_SIZE))).astype(np.float32)
    stamps = np.stack([SHAPES[name] for name in SHAPE_NAMES])  # (k, 7, 7)
    for corner in range(4):
        top, left = QUADRANT * (corner // 2), QUADRANT * (corner % 2)
        for i in range(n):
            r, c = top + offsets[i, corner, 0], left + offsets[i, corner, 1]
            images[i, r: r + STAMP, c: c + STAMP] += brightness[i, corner] * stamps[shapes[i, corner]]
    offsets = offsets + np.array([[0, 0], [0, QUADRANT], [QUADRANT, 0], [QUADRANT, QUADRANT]])
    return ImageSet(images[:, None], labels, shapes, offsets)


def training_set(n: int = N_TRAIN, seed: int = TRAIN_SEED) -> ImageSet:
    """The training images of lesson 09 (10,000, seed 0 by default)."""
    return make_images(n, seed)


def test_set(n: int = N_TEST, seed: int = TEST_SEED) -> ImageSet:
    """The held-out test images of lesson 09 (2,000, seed 1 by default): never seen in training."""
    return make_images(n, seed)


def plot_examples(images: ImageSet, indices, axes=None, predictions: dict | None = None):
    """A row of task images with their labels (and, if given, each model's predicted label).

    ``predictions`` maps a model name to predicted labels (N,) for the whole set."""
    indices = list(indices)
    if axes is None:
        axes = plt.subplots(1, len(indices), figsize=(2.1 * len(indices), 2.5), layout="constrained",
                            squeeze=False)[1][0]
    for ax, i in zip(axes, indices):
        ax.imshow(images.images[i, 0], cmap="gray")
        a, b = (SHAPE_NAMES[images.shapes[i, k]] for k in COMPARED)
        title = f"{a} / {b}\nlabel {images.labels[i]} ({'match' if images.labels[i] else 'differ'})"
        for name, predicted in (predictions or {}).items():
            title += f"\n{name}: {int(predicted[i])}" + ("" if predicted[i] == images.labels[i] else " ✗")
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    return axes


def accuracy_by_pair(images: ImageSet, predicted) -> np.ndarray:
    """Accuracy for each (top-left shape, bottom-right shape) pair: (k, k), NaN where a pair never occurs."""
    predicted = np.asarray(predicted).astype(int)
    if predicted.shape != images.labels.shape:
        raise ValueError(f"need one prediction per image, {images.labels.shape}, got {predicted.shape}")
    k = len(SHAPE_NAMES)
    right = predicted == images.labels
    first, last = (images.shapes[:, c] for c in COMPARED)
    table = np.full((k, k), np.nan)
    for i in range(k):
        for j in range(k):
            pair = (first == i) & (last == j)
            if pair.any():
                table[i, j] = right[pair].mean()
    return table


def plot_pair_accuracy(table, ax=None, title: str = "accuracy by shape pair"):
    """Heatmap of ``accuracy_by_pair``: rows the top-left shape, columns the bottom-right shape."""
    table = np.asarray(table, dtype=float)
    k = len(SHAPE_NAMES)
    if table.shape != (k, k):
        raise ValueError(f"need a ({k}, {k}) table, got {table.shape}")
    if ax is None:
        ax = plt.subplots(figsize=(3.8, 3.4), layout="constrained")[1]
    ax.imshow(table, cmap="RdYlGn", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(k), SHAPE_NAMES, rotation=45, ha="right")
    ax.set_yticks(range(k), SHAPE_NAMES)
    ax.set_xlabel("bottom-right shape")
    ax.set_ylabel("top-left shape")
    for i, j in np.ndindex(table.shape):
        ax.text(j, i, f"{table[i, j]:.2f}", ha="center", va="center", fontsize=8)
    ax.set_title(title, fontsize=10)
    return ax
