"""Where am I? Positional encodings: the references of lesson 05 and the measurements it shows.

Convention (the course's): the pair of dimensions ``(2i, 2i+1)`` of a ``d``-wide vector turns
at the frequency ``ω_i = base^(−2i/d)`` radians per position.

- ``sinusoidal_encoding``: ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)``, added once.
- ``rope``: the pair ``(x_2i, x_2i+1)`` at position ``p`` is rotated by the angle ``p ω_i``,
  ``(x_2i cos θ − x_2i+1 sin θ, x_2i sin θ + x_2i+1 cos θ)``, applied to queries and keys.

The ``plot_*`` functions draw the lesson's figures. At the end: what lesson 01's trained attention
classifier did with its learned position table (``learned_positions``).
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
    # two hands close together (a slow pair): the labels sit on either side of them, not on top
    close = np.linalg.norm(view.points[p] - view.points[q]) < 0.35
    for pos, colour, side in ((p, "black", -1), (q, "#c44e52", 1)):
        x, y = view.points[pos]
        axes[1].annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": colour})
        tx, ty = 1.15 * x, 1.15 * y
        if close:  # push along the tangent, away from the other hand
            turn = side * np.sign(view.turn or 1.0) * 0.22
            tx, ty = tx + turn * y, ty - turn * x
        axes[1].text(tx, ty, f"p={pos}", color=colour, ha="center", va="center", fontsize=8)
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


# What lesson 01's attention classifier did with its learned position table ------------------------

ABLATIONS = ("trained table", "table it started from", "rows shuffled", "no positions")


@dataclass(frozen=True)
class LearnedPositions:
    """Lesson 01's attention classifiers (one per seed): their learned position tables, compared with
    the sinusoidal encoding of the same width, and their accuracy when the table is changed."""

    seeds: tuple[int, ...]
    n_positions: int  # positions 0 … n − 1 occur in training reviews ([CLS] is position 0)
    sinusoidal: np.ndarray  # (n, n) cosine similarity of PE rows
    trained: dict[int, np.ndarray]  # seed -> (n, n) cosine similarity of the trained table's rows
    untrained: dict[int, np.ndarray]  # seed -> (n, n) the same for the table training started from
    moved: dict[int, float]  # seed -> ‖trained − start‖ / ‖start‖ over the n rows
    accuracy: dict[tuple[int, str], float]  # (seed, ablation) -> share right over lesson 01's four test sets


def cosine_similarity(table) -> np.ndarray:
    """(n, n) cosine similarity between the rows of a table (n, d)."""
    t = torch.as_tensor(table, dtype=torch.float64)
    t = t / t.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return (t @ t.T).numpy()


def mean_by_offset(m, max_offset: int) -> np.ndarray:
    """Mean of m[p, p + Δ] over p for Δ = 1 … max_offset: (max_offset,)."""
    m = _matrix_2d(m, "m")
    if not 1 <= max_offset < m.shape[0]:
        raise ValueError(f"max_offset must be in 1 … {m.shape[0] - 1}, got {max_offset}")
    return np.array([np.diagonal(m, k).mean() for k in range(1, max_offset + 1)])


def learned_positions(seeds=(0, 1, 2), per_set: int = 500) -> LearnedPositions:
    """Measure the shipped attention classifiers of lesson 01 (``data/sentiment/``) on the first
    ``per_set`` reviews of each of its four test sets."""
    from . import sentiment
    from .trained import check_sample, initial_model, load_model, test_data

    check_sample(seeds, per_set)
    n = sentiment.DEFAULT.max_train_words + 1  # the longest training review, with [CLS] in front
    tests = [(data.ids[:per_set], data.lengths[:per_set], data.labels[:per_set].bool())
             for data in test_data(add_cls=True).values()]
    total = sum(len(labels) for *_, labels in tests)
    trained, untrained, moved, accuracy = {}, {}, {}, {}
    for seed in seeds:
        model = load_model("attention", seed)
        start = initial_model("attention", seed).positions.weight.detach().clone()
        table = model.positions.weight.detach().clone()
        trained[seed], untrained[seed] = cosine_similarity(table[:n]), cosine_similarity(start[:n])
        moved[seed] = float((table[:n] - start[:n]).norm() / start[:n].norm())
        order = torch.randperm(len(table), generator=torch.Generator().manual_seed(seed))
        variants = dict(zip(ABLATIONS, (table, start, table[order], torch.zeros_like(table))))
        with torch.no_grad():
            for name, rows in variants.items():
                model.positions.weight.copy_(rows)
                right = sum(int(((model(ids, lengths, cls_only=True) > 0) == labels).sum())
                            for ids, lengths, labels in tests)
                accuracy[seed, name] = right / total
            model.positions.weight.copy_(table)
    d = int(start.shape[1])
    return LearnedPositions(tuple(seeds), n, cosine_similarity(sinusoidal_encoding(n, d)),
                            trained, untrained, moved, accuracy)


def learned_positions_table(lp: LearnedPositions) -> str:
    """Accuracy over the four test sets with each version of the table: the range over seeds."""
    from .trained import span

    lines = [f"{'position table':24} accuracy (seeds {', '.join(map(str, lp.seeds))})"]
    for name in ABLATIONS:
        lines.append(f"{name:24} {span([100 * lp.accuracy[s, name] for s in lp.seeds], '.1f', '%')}")
    return "\n".join(lines)


def learned_positions_reading(lp: LearnedPositions, near: int = 3, width: int = 92) -> str:
    """What the figure and the table say, in sentences computed from them."""
    import textwrap

    from .trained import span

    sin = mean_by_offset(lp.sinusoidal, near)
    learned = [mean_by_offset(lp.trained[s], near).mean() for s in lp.seeds]
    far = [np.abs(mean_by_offset(lp.trained[s], lp.n_positions // 2)).max() for s in lp.seeds]
    acc = {name: [100 * lp.accuracy[s, name] for s in lp.seeds] for name in ABLATIONS}
    text = (f"Neighbours (offsets 1 to {near}) have a mean cosine similarity of {sin.mean():.2f} in the "
            f"sinusoidal table and {span(learned, '.2f')} in the trained ones; at no offset up to "
            f"{lp.n_positions // 2} does a trained table's mean similarity exceed {max(far):.2f} "
            "in size. Training moved the table by "
            f"{span([100 * lp.moved[s] for s in lp.seeds], '.0f', '%')} of its size. Yet the model needs "
            f"it: {span(acc['trained table'], '.1f', '%')} right with it, "
            f"{span(acc['rows shuffled'], '.1f', '%')} with its rows shuffled and "
            f"{span(acc['no positions'], '.1f', '%')} without positions; with the random table it started "
            f"from, {span(acc['table it started from'], '.1f', '%')}.")
    return textwrap.fill(text, width)


def plot_learned_positions(lp: LearnedPositions, seed: int | None = None, max_offset: int = 30, axes=None):
    """Cosine similarity of the sinusoidal table and of one trained table, and both by offset."""
    seed = lp.seeds[0] if seed is None else seed
    if axes is None:
        axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained",
                            gridspec_kw={"width_ratios": [1, 1, 1.2]})[1]
    plot_position_matrix(lp.sinusoidal, axes[0], "sinusoidal PE, same width", "cosine similarity")
    plot_position_matrix(lp.trained[seed], axes[1], f"trained table, seed {seed}", "cosine similarity")
    for im_ax in axes[:2]:  # one colour scale for both tables
        im_ax.images[0].set_cmap("RdBu_r")
        im_ax.images[0].set_clim(-1, 1)
    offsets = np.arange(1, max_offset + 1)
    ax = axes[2]
    ax.plot(offsets, mean_by_offset(lp.sinusoidal, max_offset), color="tab:blue", lw=2.5, label="sinusoidal")
    for k, s in enumerate(lp.seeds):
        ax.plot(offsets, mean_by_offset(lp.trained[s], max_offset), color="tab:orange", lw=1.5,
                label="trained tables" if k == 0 else None)
        ax.plot(offsets, mean_by_offset(lp.untrained[s], max_offset), color="grey", lw=1, ls=":",
                label="tables before training" if k == 0 else None)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel("offset Δ")
    ax.set_ylabel("mean cosine similarity of p and p + Δ")
    ax.legend(fontsize=8)
    return axes
