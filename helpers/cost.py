"""Lesson 08: what attention costs — multiply-adds of one layer, attention in blocks, measured cost.

Counting follows one encoder layer on ``n`` tokens of width ``d`` (``d_model``) with an FFN of
inner width ``d_ff``; one multiply-add (MAC) per term of a matrix product, biases, softmax and
norms ignored. Attention tensors are ``(..., n, d)``: tokens are rows.

Memory is counted by ``TensorMeter``: the bytes of the tensors that PyTorch operations create
during a call and that are alive at the same time (its peak), and the largest of them. Scratch
buffers a fused C++ kernel allocates internally are not seen.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .masking import log_axes_against_n, median_time
from .runtime import threads

MIB = 2**20

# ----------------------------------------------------------------------------- counting


def _positive_ints(**sizes) -> list[int]:
    """The sizes as ints, or a ValueError naming the first that is not a positive integer."""
    values = []
    for name, value in sizes.items():
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        values.append(int(value))
    return values


def layer_macs(n: int, d_model: int, d_ff: int) -> dict[str, int]:
    """Multiply-adds of one encoder layer on n tokens: projections, scores, mix, ffn (ints)."""
    n, d, d_ff = _positive_ints(n=n, d_model=d_model, d_ff=d_ff)
    return {
        "projections": 4 * n * d * d,  # x W_Q, x W_K, x W_V and the output W_O: (n, d) @ (d, d) each
        "scores": n * n * d,  # Q Kᵀ: (n, d) @ (d, n)
        "mix": n * n * d,  # weights @ V: (n, n) @ (n, d)
        "ffn": 2 * n * d * d_ff,  # (n, d) @ (d, d_ff), then (n, d_ff) @ (d_ff, d)
    }


def score_share(n: int, d_model: int, d_ff: int) -> float:
    """Share of the layer's multiply-adds spent in the two n × n products, (scores + mix) / total."""
    macs = layer_macs(n, d_model, d_ff)
    return (macs["scores"] + macs["mix"]) / sum(macs.values())


def crossover_n(d_model: int, d_ff: int) -> int:
    """The n at which the n × n products cost as much as the rest: 2n²d = 4nd² + 2nd·d_ff -> n = 2d + d_ff."""
    d, d_ff = _positive_ints(d_model=d_model, d_ff=d_ff)
    return 2 * d + d_ff


@dataclass(frozen=True)
class LayerType:
    """Vaswani et al.'s comparison, evaluated: leading term of the work, sequential steps, longest path."""

    name: str
    ops: int
    sequential_steps: int
    max_path: int


def layer_type_costs(n: int, d: int, k: int = 3) -> list[LayerType]:
    """The leading terms of Vaswani et al.'s Table 1 for n items of width d, convolution kernel k."""
    n, d, k = _positive_ints(n=n, d=d, k=k)
    dilated_path = max(1, math.ceil(math.log(n, k))) if k > 1 else n
    return [
        LayerType("self-attention", n * n * d, 1, 1),
        LayerType("recurrent", n * d * d, n, n),
        LayerType(f"convolution (k = {k}), dilated", k * n * d * d, 1, dilated_path),
        LayerType(f"convolution (k = {k}), contiguous", k * n * d * d, 1, math.ceil(n / k)),
    ]


# ----------------------------------------------------------------------------- attention, two ways


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k need the same width d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k and v need one row per key, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if k.size(-2) == 0:
        raise ValueError("attention needs at least one key")


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ/√d_k) v with the (..., n_q, n_k) matrix built in full: (..., n_q, d_v)."""
    _check_qkv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., n_q, n_k)
    return torch.softmax(scores, dim=-1) @ v


def online_softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             block_size: int = 64) -> torch.Tensor:
    """Exact attention over key blocks with a running max and sum, (..., n_q, d_v); never (n_q, n_k)."""
    _check_qkv(q, k, v)
    if isinstance(block_size, bool) or int(block_size) != block_size or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    scale = 1.0 / math.sqrt(q.size(-1))
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
    running_max = torch.full((*batch, q.size(-2), 1), -math.inf, dtype=dtype)  # (..., n_q, 1)
    running_sum = torch.zeros((*batch, q.size(-2), 1), dtype=dtype)  # (..., n_q, 1)
    acc = torch.zeros((*batch, q.size(-2), v.size(-1)), dtype=dtype)  # (..., n_q, d_v), not normalised
    for start in range(0, k.size(-2), int(block_size)):
        k_block = k[..., start : start + block_size, :]  # (..., b, d_k)
        v_block = v[..., start : start + block_size, :]  # (..., b, d_v)
        scores = q @ k_block.transpose(-2, -1) * scale  # (..., n_q, b)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        correction = torch.exp(running_max - new_max)  # shrinks what was summed under the old max
        p = torch.exp(scores - new_max)  # (..., n_q, b), every entry ≤ 1
        running_sum = running_sum * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v_block
        running_max = new_max
    return acc / running_sum  # divide once, at the end


# ----------------------------------------------------------------------------- counting bytes


class TensorMeter(TorchDispatchMode):
    """Counts the tensors PyTorch operations create while active: peak bytes alive at once, largest one.

    Views and in-place results share storage with an input and are not new memory. A storage is
    counted until the last tensor the meter saw on it is freed.
    """

    def __init__(self):
        super().__init__()
        self.peak_bytes = 0
        self.largest_bytes = 0
        self.largest_numel = 0
        self.largest_shape: tuple[int, ...] = ()
        self.op_names: set[str] = set()
        self._bytes: dict[int, int] = {}
        self._refs: dict[int, int] = {}
        self._current = 0

    def _release(self, key: int) -> None:
        if key not in self._refs:
            return
        self._refs[key] -= 1
        if self._refs[key] == 0:
            self._current -= self._bytes.pop(key)
            del self._refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.op_names.add(str(func.overloadpacket.__name__))
        inputs = {a.untyped_storage().data_ptr() for a in tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if key in self._refs:
                self._refs[key] += 1  # another view of memory created during the call
            elif key in inputs or nbytes == 0:
                continue  # a view of, or an in-place result in, memory that already existed
            else:
                self._bytes[key], self._refs[key] = nbytes, 1
                self._current += nbytes
                self.peak_bytes = max(self.peak_bytes, self._current)
            if t.numel() > self.largest_numel:
                self.largest_numel, self.largest_shape = t.numel(), tuple(t.shape)
            self.largest_bytes = max(self.largest_bytes, nbytes)
            weakref.finalize(t, self._release, key)
        return out


def tensor_memory(fn: Callable, *args, **kwargs) -> TensorMeter:
    """Run fn(*args, **kwargs) once under a TensorMeter, on one thread; returns the meter."""
    meter = TensorMeter()
    with threads(1), meter, torch.no_grad():
        fn(*args, **kwargs)
    return meter


# ----------------------------------------------------------------------------- measured cost


@dataclass(frozen=True)
class MethodCost:
    """One attention method at one n: median time (one thread) and bytes counted by TensorMeter."""

    method: str
    n: int
    seconds: float
    peak_bytes: int
    largest_bytes: int


def attention_methods(online: Callable = online_softmax_attention,
                      block_size: int = 64) -> dict[str, Callable]:
    """The three implementations compared: the full matrix, blocks with a running max, torch's kernel."""
    return {
        "naive": naive_attention,
        "online": lambda q, k, v: online(q, k, v, block_size=block_size),
        "sdpa": F.scaled_dot_product_attention,
    }


def measure_methods(ns: Sequence[int], d: int = 64, repeats: int = 3, block_size: int = 64,
                    online: Callable = online_softmax_attention, seed: int = 0) -> list[MethodCost]:
    """Time (median of repeats) and memory of each method on (1, 1, n, d) float32 self-attention."""
    if repeats < 1 or not ns or any(int(n) < 1 for n in ns):
        raise ValueError(f"need repeats ≥ 1 and at least one n ≥ 1, got repeats={repeats}, ns={list(ns)}")
    g = torch.Generator().manual_seed(seed)
    points = []
    for n in ns:
        # (B, H, T, d): on CPU, torch uses its fused kernel only for 4-D inputs
        q, k, v = (torch.randn(1, 1, int(n), d, generator=g) for _ in range(3))
        for name, fn in attention_methods(online, block_size).items():
            meter = tensor_memory(fn, q, k, v)
            with torch.no_grad():
                seconds = median_time(fn, q, k, v, repeats=repeats)
            points.append(MethodCost(name, int(n), seconds, meter.peak_bytes, meter.largest_bytes))
    return points


def cost_table(points: Sequence[MethodCost]) -> str:
    """The measurements as a text table: one row per n, time and peak memory of each method."""
    methods = list(dict.fromkeys(p.method for p in points))
    by = {(p.method, p.n): p for p in points}
    ns = sorted({p.n for p in points})
    head = f"{'n':>6} " + " ".join(f"{m + ' ms':>11}" for m in methods) + "  " + " ".join(
        f"{m + ' MiB':>11}" for m in methods)
    rows = [head]
    for n in ns:
        times = " ".join(f"{by[m, n].seconds * 1e3:11.2f}" for m in methods)
        mems = " ".join(f"{by[m, n].peak_bytes / MIB:11.3f}" for m in methods)
        rows.append(f"{n:6d} {times}  {mems}")
    return "\n".join(rows)


# Methods whose working memory the meter cannot see (a fused C++ kernel): it counts their output only.
OUTPUT_ONLY = frozenset({"sdpa"})


def cost_ratios(points: Sequence[MethodCost], baseline: str = "naive") -> str:
    """For each n: how many times slower and more memory-hungry the baseline is than each other
    method (no memory ratio against a method of ``OUTPUT_ONLY``, whose working memory is unseen)."""
    by = {(p.method, p.n): p for p in points}
    others = [m for m in dict.fromkeys(p.method for p in points) if m != baseline]
    lines = []
    for n in sorted({p.n for p in points}):
        base = by[baseline, n]
        parts = [f"{baseline}/{m}: time × {base.seconds / by[m, n].seconds:5.2f}, memory × "
                 + ("   n/a" if m in OUTPUT_ONLY else f"{base.peak_bytes / by[m, n].peak_bytes:6.1f}")
                 for m in others]
        lines.append(f"n = {n:5d}   " + "   ".join(parts))
    if any(m in OUTPUT_ONLY for m in others):
        lines.append("(n/a: the meter sees only the output of "
                     + ", ".join(m for m in others if m in OUTPUT_ONLY) + ", not its working memory)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures

_COLOURS = {"projections": "#4c72b0", "ffn": "#55a868", "scores": "#c44e52", "mix": "#dd8452",
            "naive": "#c44e52", "online": "#4c72b0", "sdpa": "#55a868"}


def _axes(ax, size=(5.5, 3.6)):
    return ax if ax is not None else plt.subplots(figsize=size, layout="constrained")[1]


def plot_layer_shares(ns, d_model: int, d_ff: int, ax=None, marks: Sequence[int] = (),
                      macs: Callable = layer_macs):
    """Stacked shares of projections, FFN and the two n × n products against n, crossover marked."""
    ns = np.asarray(ns, dtype=int)
    if ns.ndim != 1 or len(ns) < 2 or np.any(ns < 1):
        raise ValueError(f"need at least two sequence lengths ≥ 1, got {ns}")
    ax = _axes(ax, (7.5, 3.8))
    parts = ["projections", "ffn", "scores", "mix"]
    counts = np.array([[macs(int(n), d_model, d_ff)[p] for p in parts] for n in ns], dtype=float)
    shares = counts / counts.sum(axis=1, keepdims=True)  # (len(ns), 4)
    ax.stackplot(ns, shares.T, labels=["projections (4nd²)", "FFN (2nd·d_ff)", "scores QKᵀ (n²d)",
                                        "weights @ V (n²d)"], colors=[_COLOURS[p] for p in parts], alpha=0.85)
    box = {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85}
    cross = crossover_n(d_model, d_ff)
    ax.axvline(cross, color="black", lw=1, ls="--")
    ax.text(cross * 1.08, 0.06, f"n = 2d + d_ff\n= {cross:,}", fontsize=8, bbox=box)
    for n in marks:
        m = macs(int(n), d_model, d_ff)
        share = (m["scores"] + m["mix"]) / sum(m.values())
        ax.plot([n], [1 - share], "o", color="black", ms=4)
        ax.annotate(f"n = {n:,}: n × n part {share:.0%}", (n, 1 - share), textcoords="offset points",
                    xytext=(-8, -16), fontsize=8, ha="right", bbox=box)
    ax.set_xscale("log")
    ax.set_xlim(ns[0], ns[-1])
    ax.set_ylim(0, 1)
    ax.set_xlabel("n (tokens)")
    ax.set_ylabel("share of the layer's multiply-adds")
    ax.set_title(f"one layer, d = {d_model}, d_ff = {d_ff}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def _series(points: Sequence[MethodCost], method: str) -> list[MethodCost]:
    return sorted((p for p in points if p.method == method), key=lambda p: p.n)


def plot_method_costs(points: Sequence[MethodCost], axes=None):
    """Two log-log panels against n: median time (ms) and peak memory (MiB) of each method."""
    if not points:
        raise ValueError("plot_method_costs needs at least one measured point")
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")[1]
    ns = sorted({p.n for p in points})
    grid = np.array(ns, dtype=float)
    for method in dict.fromkeys(p.method for p in points):
        mine = _series(points, method)
        x, colour = [p.n for p in mine], _COLOURS.get(method)
        axes[0].plot(x, [p.seconds * 1e3 for p in mine], "o-", color=colour, label=method)
        axes[1].plot(x, [p.peak_bytes / MIB for p in mine], "o-", color=colour,
                     label=f"{method} (its output only)" if method in OUTPUT_ONLY else method)
    guides = ((0, "naive", 2, ":", lambda p: p.seconds * 1e3),
              (1, "naive", 2, ":", lambda p: p.peak_bytes / MIB),
              (1, "online", 1, "--", lambda p: p.peak_bytes / MIB))
    for panel, method, power, style, value in guides:
        mine = _series(points, method)
        if mine:  # a guide through the method's last point
            axes[panel].plot(grid, value(mine[-1]) * (grid / mine[-1].n) ** power, style, color="0.5", lw=1,
                             label=f"∝ n{'²' if power == 2 else ''} (through {method}'s last point)")
    axes[0].set_ylabel("median time (ms)")
    axes[0].set_title("time of one attention (one thread)")
    axes[1].set_ylabel("peak MiB of tensors alive at once")
    axes[1].set_title("memory of one attention")
    return log_axes_against_n(axes, ns)
