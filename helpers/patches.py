"""Lesson 09: images as token sequences — references, the patch-size widget and the figures.

References (the checks compare with these; ``tests/test_patches.py`` compares them with torch):

- ``patchify(images, P)``  (B, C, H, W) -> (B, N, C·P·P): patches in row-major order (left to
  right, then top to bottom), each flattened in (C, P, P) order — the layout of
  ``torch.nn.functional.unfold`` transposed, and of a convolution's output flattened.
- ``n_tokens(H, W, P, cls_token=True)``: (H/P)·(W/P) patches, plus one for [CLS].
- ``conv_to_linear(conv)``: the (C·P·P, D) matrix and (D,) bias of a patch-embedding convolution.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from torch import nn

from .plots import figure_png
from .widgets import WithFallback

# ---------------------------------------------------------------- references


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images (B, C, H, W) into P × P patches: (B, N, C·P·P), N = (H/P)·(W/P), row-major."""
    if images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    B, C, H, W = images.shape
    P = int(patch_size)
    if P < 1 or H % P or W % P:
        raise ValueError(f"patch size {patch_size} must divide both the height {H} and the width {W}")
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, h, P, w, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, h, w, C, P, P): patch (row, col), then its pixels
    return grid.reshape(B, (H // P) * (W // P), C * P * P)


def n_tokens(height: int, width: int, patch_size: int, cls_token: bool = True) -> int:
    """Tokens a ViT reads for an image of height × width: (H/P)·(W/P) patches (+1 for [CLS])."""
    if patch_size < 1 or height % patch_size or width % patch_size:
        raise ValueError(f"patch size {patch_size} must divide both {height} and {width}")
    return (height // patch_size) * (width // patch_size) + int(bool(cls_token))


def conv_to_linear(conv: nn.Conv2d) -> tuple[torch.Tensor, torch.Tensor]:
    """The patch embedding ``conv`` (kernel = stride = P) as a matrix (C·P·P, D) and a bias (D,).

    ``patchify(x, P) @ weight + bias`` equals ``conv(x).flatten(2).transpose(1, 2)``. A conv
    without a bias gives a zero bias. The tensors are detached copies.
    """
    P = conv.kernel_size
    if (conv.stride != P or P[0] != P[1] or conv.padding not in ((0, 0), "valid")
            or conv.dilation != (1, 1) or conv.groups != 1):
        raise ValueError("need a square kernel with stride = kernel size, no padding, no dilation, "
                         f"groups = 1; got kernel {P}, stride {conv.stride}, padding {conv.padding}")
    D = conv.out_channels
    weight = conv.weight.detach().reshape(D, -1).T.clone()  # (D, C, P, P) -> (D, C·P·P) -> (C·P·P, D)
    bias = conv.bias.detach().clone() if conv.bias is not None else torch.zeros(D, dtype=weight.dtype)
    return weight, bias


# ---------------------------------------------------------------- the patch-size widget's logic


def divisors(n: int) -> list[int]:
    """All patch sizes that tile a side of n pixels exactly, smallest first."""
    if n < 1:
        raise ValueError(f"need a positive size, got {n}")
    return [p for p in range(1, n + 1) if n % p == 0]


@dataclass(frozen=True)
class PatchView:
    """What the widget shows for one patch size on an image of height × width × channels."""

    height: int
    width: int
    channels: int
    patch_size: int
    grid: tuple[int, int]  # patches per column and per row (h, w)
    n_patches: int
    n_tokens: int  # with [CLS]
    patch_dim: int  # C·P·P numbers per token before the projection
    score_entries: int  # n_tokens², the entries of one head's attention matrix


def patch_view(height: int, width: int, patch_size: int, channels: int = 1) -> PatchView:
    """The numbers for ``patch_size`` on a height × width image; ValueError if P does not divide it."""
    n = n_tokens(height, width, patch_size)
    return PatchView(height, width, channels, patch_size, (height // patch_size, width // patch_size),
                     n - 1, n, channels * patch_size**2, n * n)


def view_summary(view: PatchView) -> str:
    """The widget's caption: patches, tokens, numbers per token and the n² cost."""
    h, w = view.grid
    return (f"P = {view.patch_size}: a {h} × {w} grid of {view.n_patches:,} patches of "
            f"{view.patch_dim:,} numbers each; with [CLS], n = {view.n_tokens:,} tokens and "
            f"n² = {view.score_entries:,} attention scores per head and layer.")


# ---------------------------------------------------------------- figures
# Each takes ax=None (or axes=None), returns what it drew on, and never calls plt.show().


def _axes(ax, figsize=(4, 4)):
    return ax if ax is not None else plt.subplots(figsize=figsize, layout="constrained")[1]


def _image_2d(image) -> np.ndarray:
    """A one-channel image (H, W), (1, H, W) or (1, 1, H, W) as a NumPy array (H, W)."""
    a = np.asarray(image.detach() if torch.is_tensor(image) else image, dtype=float)
    a = a.reshape(a.shape[-2:]) if a.size == np.prod(a.shape[-2:]) else a
    if a.ndim != 2:
        raise ValueError(f"need a one-channel image (H, W), got shape {a.shape}")
    return a


def plot_patch_grid(image, patch_size: int, ax=None, numbers: bool = True, title: str | None = None):
    """A one-channel image with its P × P patch grid; each patch labelled by its token index."""
    img = _image_2d(image)
    H, W = img.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f"patch size {patch_size} must divide both {H} and {W}")
    ax = _axes(ax)
    ax.imshow(img, cmap="gray")
    for r in range(0, H + 1, patch_size):
        ax.axhline(r - 0.5, color="#dd8452", lw=0.8)
    for c in range(0, W + 1, patch_size):
        ax.axvline(c - 0.5, color="#dd8452", lw=0.8)
    w = W // patch_size
    if numbers and (H // patch_size) * w <= 64:
        for i in range((H // patch_size) * w):
            r, c = divmod(i, w)
            ax.text(c * patch_size + 0.5, r * patch_size + 1.5, str(i), color="#ffd166", fontsize=7,
                    va="top", ha="left")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"{H} × {W} pixels, P = {patch_size}")
    return ax


def plot_tokens(tokens, ax=None, title: str = "the token sequence (one row per patch)"):
    """The (N, C·P·P) matrix of flattened patches as an image: row i is token i."""
    t = np.asarray(tokens.detach() if torch.is_tensor(tokens) else tokens, dtype=float)
    if t.ndim != 2:
        raise ValueError(f"need tokens (N, C·P·P), got shape {t.shape}")
    ax = _axes(ax, (3, 4))
    ax.imshow(t, cmap="gray", aspect="auto", interpolation="nearest")
    ax.set_xlabel(f"C·P·P = {t.shape[1]} pixel values")
    ax.set_ylabel(f"token (patch index), N = {t.shape[0]}")
    ax.set_title(title)
    return ax


def plot_patch_view(view: PatchView, image, axes=None):
    """Two panels: the image cut by the current patch size, and n and n² against P."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")[1]
    plot_patch_grid(image, view.patch_size, ax=axes[0], numbers=view.n_patches <= 64)
    sizes = [p for p in divisors(view.height) if view.width % p == 0]
    tokens = np.array([n_tokens(view.height, view.width, p) for p in sizes])
    axes[1].plot(sizes, tokens, "o-", color="#4c72b0", label="tokens n")
    axes[1].plot(sizes, tokens**2, "s-", color="#c44e52", label="attention scores n²")
    axes[1].plot([view.patch_size] * 2, [view.n_tokens, view.score_entries], "k*", ms=12,
                 label=f"P = {view.patch_size}")
    axes[1].set_xscale("log", base=2)
    axes[1].set_yscale("log")
    axes[1].set_xticks(sizes, [str(p) for p in sizes])
    axes[1].set_xlabel("patch size P")
    axes[1].set_title("halving P: about 4× the tokens, 16× the scores")
    axes[1].legend(fontsize=8)
    return axes


def _overlay(ax, image: np.ndarray, heat: np.ndarray, title: str, vmax_floor: float) -> None:
    """Draw ``image`` in grey and ``heat`` (h, w) stretched over it; the colour scale tops out at the
    map's maximum but never below ``vmax_floor``, so a near-uniform map stays dark."""
    H, W = image.shape
    ax.imshow(image, cmap="gray")
    ax.imshow(heat, cmap="magma", alpha=0.6, extent=(-0.5, W - 0.5, H - 0.5, -0.5),
              vmin=0.0, vmax=max(float(heat.max()), vmax_floor), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)


def _scale_bar(axes, vmax_floor: float) -> None:
    """One colour bar for maps that each have their own scale: from 0 to the map's maximum (or
    ``vmax_floor``, if larger), the number in each map's title."""
    axes = np.asarray(axes, dtype=object).ravel().tolist()
    bar = axes[0].figure.colorbar(ScalarMappable(Normalize(0.0, 1.0), cmap="magma"), ax=axes,
                                  ticks=[0.0, 1.0], shrink=0.8)
    bar.ax.set_yticklabels(["0", f"the map's max,\nat least {vmax_floor:g}"])


def _maps(maps, ndim: int, shape: str) -> np.ndarray:
    m = np.asarray(maps.detach() if torch.is_tensor(maps) else maps, dtype=float)
    if m.ndim != ndim:
        raise ValueError(f"maps must be {shape}, got shape {m.shape}")
    return m


def quadrant_shares(maps) -> np.ndarray:
    """Share of [CLS]'s attention on each quadrant, per layer, averaged over images and heads.

    maps (L, B, n_heads, h, w) with h and w even -> (L, 4): top-left, top-right, bottom-left,
    bottom-right (the shares of the patches; [CLS]'s attention to itself is left out, so a row
    sums to a little less than 1)."""
    m = _maps(maps, 5, "(L, B, n_heads, h, w)").mean(axis=(1, 2))  # (L, h, w)
    h, w = m.shape[1:]
    if h % 2 or w % 2:
        raise ValueError(f"the patch grid must have even sides to split it into quadrants, got {h} × {w}")
    quads = m.reshape(len(m), 2, h // 2, 2, w // 2).sum(axis=(2, 4))  # (L, 2, 2)
    return quads.reshape(len(m), 4)


def plot_cls_attention(images, maps, titles=None, axes=None, vmax_floor: float = 0.1):
    """Rows of examples: the image, then [CLS]'s attention over the patches in each layer,
    averaged over the heads. images (B, 1, H, W), maps (L, B, n_heads, h, w)."""
    maps = _maps(maps, 5, "(L, B, n_heads, h, w)")
    L, B = maps.shape[:2]
    if axes is None:
        axes = plt.subplots(B, L + 1, figsize=(1.9 * (L + 1), 2.0 * B), layout="constrained",
                            squeeze=False)[1]
    mean = maps.mean(axis=2)  # (L, B, h, w)
    for b in range(B):
        img = _image_2d(images[b])
        axes[b][0].imshow(img, cmap="gray")
        axes[b][0].set_xticks([])
        axes[b][0].set_yticks([])
        axes[b][0].set_title(titles[b] if titles else "image", fontsize=9)
        for layer in range(L):
            top = mean[layer, b].max()
            _overlay(axes[b][layer + 1], img, mean[layer, b], f"layer {layer + 1} (max {top:.2f})",
                     vmax_floor)
    _scale_bar(axes, vmax_floor)
    return axes


def plot_head_attention(image, maps, layer: int, axes=None, vmax_floor: float = 0.1):
    """[CLS]'s attention in each head of one layer, for one image. maps (L, n_heads, h, w)."""
    maps = _maps(maps, 4, "(L, n_heads, h, w)")
    if not 0 <= layer < maps.shape[0]:
        raise ValueError(f"need maps (L, n_heads, h, w) and 0 <= layer < L, got {maps.shape}, layer {layer}")
    n_heads = maps.shape[1]
    if axes is None:
        axes = plt.subplots(1, n_heads, figsize=(2.2 * n_heads, 2.4), layout="constrained",
                            squeeze=False)[1][0]
    img = _image_2d(image)
    for h in range(n_heads):
        title = f"layer {layer + 1}, head {h}\n(max {maps[layer, h].max():.2f})"
        _overlay(axes[h], img, maps[layer, h], title, vmax_floor)
    _scale_bar(axes, vmax_floor)
    return axes


# ---------------------------------------------------------------- the widget


def patch_size_explorer(image, patch_size: int = 4) -> WithFallback:
    """Slide P over the divisors of the image size: the patch grid, n tokens and the n² cost."""
    img = _image_2d(image)
    height, width = img.shape
    sizes = [p for p in divisors(height) if width % p == 0]
    slider = W.SelectionSlider(options=sizes, value=patch_size if patch_size in sizes else sizes[0],
                               description="patch P", continuous_update=False)
    picture, numbers = W.Image(format="png"), W.HTML()

    def update(_=None) -> bytes:
        view = patch_view(height, width, slider.value)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
        plot_patch_view(view, img, axes)
        png = figure_png(fig)
        picture.value, numbers.value = png, f"<p>{view_summary(view)}</p>"
        return png

    slider.observe(update, names="value")
    first = update()
    return WithFallback(W.VBox([slider, picture, numbers]), first)


def plot_position_similarity(positions, grid: tuple[int, int], indices, axes=None):
    """Cosine similarity of chosen patches' position vectors with every patch's, on the patch grid.

    positions (N, D), one learned vector per patch in row-major order ([CLS]'s left out)."""
    pos = np.asarray(positions.detach() if torch.is_tensor(positions) else positions, dtype=float)
    h, w = grid
    if pos.ndim != 2 or len(pos) != h * w:
        raise ValueError(f"need positions (N, D) with N = {h}·{w} = {h * w}, got shape {pos.shape}")
    unit = pos / np.linalg.norm(pos, axis=1, keepdims=True)
    similarity = unit @ unit.T  # (N, N)
    indices = list(indices)
    if axes is None:
        axes = plt.subplots(1, len(indices), figsize=(2.1 * len(indices), 2.3), layout="constrained",
                            squeeze=False)[1][0]
    for ax, i in zip(axes, indices):
        shown = ax.imshow(similarity[i].reshape(h, w), cmap="viridis", vmin=-1.0, vmax=1.0)
        r, c = divmod(i, w)
        ax.plot(c, r, "r+", ms=10)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"patch {i} (row {r}, col {c})", fontsize=9)
    axes[-1].figure.colorbar(shown, ax=list(axes), shrink=0.8, label="cosine similarity")
    return axes
