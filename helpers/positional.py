"""Where am I? Positional encodings: the references of lesson 05 and the measurements it shows.

Convention (the course's): the pair of dimensions ``(2i, 2i+1)`` of a ``d``-wide vector turns
at the frequency ``ω_i = base^(−2i/d)`` radians per position.

- ``sinusoidal_encoding``: ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)``, added once.
- ``rope``: the pair ``(x_2i, x_2i+1)`` at position ``p`` is rotated by the angle ``p ω_i``,
  ``(x_2i cos θ − x_2i+1 sin θ, x_2i sin θ + x_2i+1 cos θ)``, applied to queries and keys.

Figures for the lesson live in ``helpers.positional_plots``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import torch

from .plots import figure_png
from .widgets import WithFallback

BASE = 10000.0


def _even_width(d: int, name: str) -> int:
    """``d`` as an int, or a ValueError: the encodings work on pairs of dimensions."""
    d = int(d)
    if d <= 0 or d % 2:
        raise ValueError(f"{name} must be a positive even number (dimensions come in pairs), got {d}")
    return d


def pair_frequencies(d_model: int, base: float = BASE) -> torch.Tensor:
    """ω_i = base^(−2i/d_model) for i = 0 … d_model/2 − 1, in radians per position: (d_model/2,) float64."""
    d_model = _even_width(d_model, "d_model")
    if base <= 0:
        raise ValueError(f"base must be positive, got {base}")
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ... : the pair's first dim
    return float(base) ** (-two_i / d_model)


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = BASE) -> torch.Tensor:
    """The fixed sinusoidal encoding PE: (n_positions, d_model), float32, positions 0 … n − 1."""
    if int(n_positions) < 0:
        raise ValueError(f"n_positions must be >= 0, got {n_positions}")
    angles = torch.arange(int(n_positions), dtype=torch.float64)[:, None] * pair_frequencies(
        d_model, base)[None, :]  # (n, d/2): angle of pair i at position p
    pe = torch.empty(int(n_positions), int(d_model), dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(torch.float32)


def _positions(positions, n: int) -> torch.Tensor:
    """The positions as a float64 (n,) tensor: 0 … n − 1 by default."""
    if positions is None:
        return torch.arange(n, dtype=torch.float64)
    pos = torch.as_tensor(positions).to(torch.float64)
    if pos.shape != (n,):
        raise ValueError(f"positions must be a 1-D tensor with one entry per token (n = {n}), "
                         f"got shape {tuple(pos.shape)}")
    return pos


def rope(x: torch.Tensor, positions=None, base: float = BASE) -> torch.Tensor:
    """Rotary embedding of x (..., n, d): pair (2i, 2i+1) at position p turned by p·base^(−2i/d)."""
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise ValueError("x must be a floating-point torch tensor of shape (..., n, d)")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., n, d), got {tuple(x.shape)}")
    d = _even_width(x.shape[-1], "the last dimension of x")
    angles = _positions(positions, x.shape[-2])[:, None] * pair_frequencies(d, base)  # (n, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., n, d/2): the two coordinates of each pair
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def shift_matrix(offset: int, d_model: int, base: float = BASE) -> torch.Tensor:
    """The (d_model, d_model) block rotation M with PE[p + offset] = PE[p] @ M for every p (float64)."""
    angles = offset * pair_frequencies(d_model, base)  # (d/2,)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    c, s = torch.cos(angles), torch.sin(angles)
    # Row vector [sin a, cos a] times [[cos b, -sin b], [sin b, cos b]] = [sin(a+b), cos(a+b)].
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(-s)
    m[1::2, 0::2] = torch.diag(s)
    m[1::2, 1::2] = torch.diag(c)
    return m


def dot_by_offset(offsets, d_model: int, base: float = BASE) -> np.ndarray:
    """PE(p)·PE(p + Δ) = Σ_i cos(Δ ω_i) for each offset Δ: (len(offsets),) float64."""
    offsets = np.asarray(offsets, dtype=float)
    freqs = pair_frequencies(d_model, base).numpy()
    return np.cos(offsets[:, None] * freqs[None, :]).sum(axis=1)


def diagonal_spread(m) -> float:
    """Largest (max − min) along any diagonal of a square matrix (n, n): 0 for a Toeplitz matrix."""
    m = np.asarray(m.detach() if torch.is_tensor(m) else m, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"need a square matrix, got shape {m.shape}")
    n = m.shape[0]
    return float(max(np.ptp(np.diagonal(m, k)) for k in range(-n + 1, n)))


@dataclass(frozen=True)
class PairView:
    """One pair of dimensions of the sinusoidal encoding, followed along the positions."""

    pair: int  # i: the dimensions 2i and 2i+1
    offset: int  # Δ: how far apart the two compared positions are
    start: int  # p: the first of the two compared positions
    frequency: float  # ω_i in radians per position
    wavelength: float  # 2π / ω_i: positions per full turn
    positions: np.ndarray  # (n,) 0 … n − 1
    points: np.ndarray  # (n, 2) = (PE[p, 2i], PE[p, 2i+1]) = (sin pω_i, cos pω_i): a point on the unit circle
    turn: float  # Δ ω_i mod 2π: the angle this pair turns between p and p + Δ, the same for every p
    dots: np.ndarray  # (n − Δ,) PE(p)·PE(p + Δ) over all pairs, for every p: all equal


def pair_view(pair: int, offset: int, d_model: int = 64, n_positions: int = 64, start: int = 0,
              base: float = BASE) -> PairView:
    """What the widget shows: pair ``pair`` of PE (n_positions, d_model) and the offset ``offset``."""
    d_model = _even_width(d_model, "d_model")
    if not 0 <= pair < d_model // 2:
        raise ValueError(f"pair must be between 0 and {d_model // 2 - 1} for d_model = {d_model}, got {pair}")
    if not 0 <= offset < n_positions or not 0 <= start < n_positions - offset:
        raise ValueError(f"need 0 <= offset and 0 <= start < n_positions − offset = {n_positions - offset}, "
                         f"got offset {offset}, start {start}")
    pe = sinusoidal_encoding(n_positions, d_model, base).double().numpy()  # (n, d)
    freq = float(pair_frequencies(d_model, base)[pair])
    dots = np.einsum("pd,pd->p", pe[: n_positions - offset], pe[offset:])  # (n − Δ,)
    return PairView(pair=pair, offset=offset, start=start, frequency=freq,
                    wavelength=2 * math.pi / freq, positions=np.arange(n_positions),
                    points=pe[:, 2 * pair: 2 * pair + 2], turn=float((offset * freq) % (2 * math.pi)),
                    dots=dots)


def _count(x: float) -> str:
    """A number of positions for a caption: 3 significant digits, no scientific notation."""
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def view_summary(view: PairView) -> str:
    """The widget's caption: the pair's frequency, its turn for the offset, and PE(p)·PE(p+Δ)."""
    return (f"pair {view.pair} (dims {2 * view.pair}, {2 * view.pair + 1}): ω = {view.frequency:.4g} rad "
            f"per position, one full turn every {_count(view.wavelength)} positions. An offset of "
            f"{view.offset} turns this pair by {math.degrees(view.turn):.1f}° wherever it starts; "
            f"PE(p)·PE(p+{view.offset}) = {view.dots.mean():.4f} for every p "
            f"(spread {np.ptp(view.dots):.1e}).")


# ---------------------------------------------------------------- figures
# Each takes ax=None (or axes=None), returns what it drew on, and never calls plt.show().


def _axes(ax, figsize=(4.5, 3.4)):
    return ax if ax is not None else plt.subplots(figsize=figsize, layout="constrained")[1]


def _matrix_2d(m, name: str) -> np.ndarray:
    m = np.asarray(m.detach() if torch.is_tensor(m) else m, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {m.shape}")
    return m


def plot_encoding(pe, ax=None, title: str = "sinusoidal encoding PE"):
    """Heatmap of an encoding PE (n_positions, d_model): positions down, dimensions across."""
    pe = _matrix_2d(pe, "pe")
    ax = _axes(ax)
    im = ax.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.figure.colorbar(im, ax=ax, shrink=0.8)
    ax.set_xlabel("dimension (fast on the left, slow on the right)")
    ax.set_ylabel("position p")
    ax.set_title(title)
    return ax


def plot_counter(n_positions: int, n_bits: int, ax=None):
    """The binary digits of 0 … n_positions − 1, lowest digit on the left: (n_positions, n_bits)."""
    if n_positions < 1 or n_bits < 1:
        raise ValueError(f"need n_positions >= 1 and n_bits >= 1, got {n_positions} and {n_bits}")
    bits = (np.arange(n_positions)[:, None] >> np.arange(n_bits)[None, :]) & 1  # (n, n_bits)
    ax = _axes(ax)
    ax.imshow(bits, cmap="Greys", vmin=0, vmax=1.6, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(n_bits), [f"$2^{b}$" for b in range(n_bits)])
    ax.set_xlabel("binary digit (fast on the left)")
    ax.set_ylabel("position p")
    ax.set_title("a binary counter")
    return ax


def plot_dimension_curves(pe, dims, ax=None, base: float = BASE):
    """Columns ``dims`` of PE (n_positions, d_model) against the position, each with its wavelength."""
    pe = _matrix_2d(pe, "pe")
    d_model = pe.shape[1]
    if any(not 0 <= d < d_model for d in dims):
        raise ValueError(f"dims must lie in 0 … {d_model - 1}, got {list(dims)}")
    freqs = pair_frequencies(d_model, base).numpy()
    ax = _axes(ax, figsize=(8, 3.4))
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax.plot(np.arange(len(pe)), pe[:, d], label=f"dim {d} ({kind}): one turn per "
                f"{_count(2 * np.pi / freqs[d // 2])} positions")
    ax.set_xlabel("position p")
    ax.set_ylabel("PE[p, dim]")
    ax.set_ylim(-1.15, 1.6)
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    return ax


def plot_position_matrix(m, ax=None, title: str = "", label: str = "value"):
    """Heatmap of a (n, n) matrix indexed by two positions: row p, column q."""
    m = _matrix_2d(m, "m")
    ax = _axes(ax)
    if m.min() >= 0:  # all positive: a sequential map uses the whole colour range
        im = ax.imshow(m, cmap="viridis", interpolation="nearest")
    else:  # signed: white at zero
        lim = np.abs(m).max()
        im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    ax.figure.colorbar(im, ax=ax, shrink=0.8, label=label)
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    ax.set_title(title)
    return ax


def plot_rows_by_offset(m, rows, ax=None, label: str = "m[p, p + Δ]"):
    """Row p of a (n, n) matrix against the offset Δ = q − p, one curve per p in ``rows``."""
    m = _matrix_2d(m, "m")
    n = m.shape[0]
    if m.shape != (n, n) or any(not 0 <= p < n for p in rows):
        raise ValueError(f"need a square matrix and rows in 0 … {n - 1}, got {m.shape} and {list(rows)}")
    ax = _axes(ax)
    styles = ["-", "--", ":", "-."]  # the curves lie on top of each other: keep each one visible
    for k, p in enumerate(rows):
        ax.plot(np.arange(n) - p, m[p], styles[k % 4], lw=3.0 - 2.0 * k / max(1, len(rows) - 1),
                label=f"p = {p}")
    ax.set_xlabel("offset Δ = q − p")
    ax.set_ylabel(label)
    ax.legend(fontsize=8)
    return ax


def plot_pair_view(view: PairView, axes=None):
    """Two panels for one pair of PE: its sin and cos against p, and the pair as a point on a circle."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained",
                            gridspec_kw={"width_ratios": [1.8, 1]})[1]
    p, q = view.start, view.start + view.offset
    i = view.pair
    axes[0].plot(view.positions, view.points[:, 0], label=f"dim {2 * i}: sin(p ω)")
    axes[0].plot(view.positions, view.points[:, 1], label=f"dim {2 * i + 1}: cos(p ω)")
    for pos, colour in ((p, "black"), (q, "#c44e52")):
        axes[0].axvline(pos, color=colour, lw=0.8, ls=":")
    axes[0].set_xlabel("position p")
    axes[0].set_ylim(-1.15, 1.6)
    axes[0].legend(fontsize=8, ncol=2, loc="upper right")
    axes[0].set_title(f"pair {i}: one turn every {_count(view.wavelength)} positions")

    circle = np.linspace(0, 2 * np.pi, 200)
    axes[1].plot(np.sin(circle), np.cos(circle), color="0.85", lw=1)
    axes[1].scatter(view.points[:, 0], view.points[:, 1], color="0.55", s=10, label="positions 0 … n − 1")
    for pos, colour in ((p, "black"), (q, "#c44e52")):
        x, y = view.points[pos]
        axes[1].annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": colour})
        axes[1].text(1.15 * x, 1.15 * y, f"p={pos}", color=colour, ha="center", va="center", fontsize=8)
    axes[1].set_aspect("equal")
    axes[1].set_xlim(-1.4, 1.4)
    axes[1].set_ylim(-1.4, 1.4)
    axes[1].set_xlabel(f"PE[p, {2 * i}]")
    axes[1].set_ylabel(f"PE[p, {2 * i + 1}]")
    axes[1].set_title(f"offset {view.offset}: a turn of {np.degrees(view.turn):.1f}°")
    return axes


# ---------------------------------------------------------------- widget


def pair_explorer(pair: int = 2, offset: int = 3, start: int = 0, d_model: int = 64, n_positions: int = 64):
    """Slide the pair of dimensions and the offset: the pair's curves, its circle and PE(p)·PE(p+Δ)."""
    pick = W.IntSlider(value=pair, min=0, max=d_model // 2 - 1, description="pair i",
                       continuous_update=False)
    shift = W.IntSlider(value=offset, min=0, max=n_positions // 2, description="offset Δ",
                        continuous_update=False)
    first_p = W.IntSlider(value=start, min=0, max=n_positions // 2 - 1, description="start p",
                        continuous_update=False)
    picture, numbers = W.Image(format="png"), W.HTML()

    def update(_=None) -> bytes:
        view = pair_view(pick.value, shift.value, d_model, n_positions, first_p.value)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained",
                                 gridspec_kw={"width_ratios": [1.8, 1]})
        plot_pair_view(view, axes)
        png = figure_png(fig)
        picture.value, numbers.value = png, f"<p>{view_summary(view)}</p>"
        return png

    for control in (pick, shift, first_p):
        control.observe(update, names="value")
    first = update()
    return WithFallback(W.VBox([W.HBox([pick, shift, first_p]), picture, numbers]), first)
