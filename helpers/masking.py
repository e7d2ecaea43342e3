"""Lesson 04: masks, attention under a mask, decoding with a key/value cache, and what it costs.

Masks are boolean and True means "may attend" (the convention of
``torch.nn.functional.scaled_dot_product_attention``). A query row with no allowed key gets
all-zero weights and a zero output, never NaN. Shapes: ``(B, T)`` for one flag per token,
``(..., T_q, T_k)`` for a mask over scores.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

from .attention import scaled_dot_product_attention
from .runtime import threads

# ----------------------------------------------------------------------------- references


def causal_mask(n: int) -> torch.Tensor:
    """Bool (n, n): True where key j ≤ query i — each position sees itself and the past."""
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    return torch.ones(int(n), int(n), dtype=torch.bool).tril()


def padding_mask(lengths, max_len: int) -> torch.Tensor:
    """Bool (B, max_len): True at positions < length of each sequence (real tokens)."""
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.is_floating_point():
        raise ValueError(f"lengths must be a list or 1-D tensor of integers, got {lengths!r}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > max_len):
        raise ValueError(f"every length must lie in 0..max_len = {max_len}, got {lengths.tolist()}")
    return torch.arange(max_len)[None, :] < lengths[:, None]  # (B, max_len)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ/√d_k) v under a bool mask. q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v)."""
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k need the same width d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k and v need one row per key, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    return scaled_dot_product_attention(q, k, v, mask)  # (..., n_q, d_v), (..., n_q, n_k)


def causal_attention_with_cache(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention one query at a time against a growing key/value cache: (..., n, d_v)."""
    cache_k, cache_v = k[..., :0, :], v[..., :0, :]  # empty caches (..., 0, d)
    outputs = []
    for t in range(q.size(-2)):
        cache_k = torch.cat([cache_k, k[..., t : t + 1, :]], dim=-2)  # (..., t + 1, d_k)
        cache_v = torch.cat([cache_v, v[..., t : t + 1, :]], dim=-2)  # (..., t + 1, d_v)
        out, _ = scaled_dot_product_attention(q[..., t : t + 1, :], cache_k, cache_v)  # (..., 1, d_v)
        outputs.append(out)
    return torch.cat(outputs, dim=-2) if outputs else v[..., :0, :]


def attention_matrix_bytes(n_tokens: int, n_heads: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes of n_heads materialised n × n score matrices (fp16 by default)."""
    return int(n_tokens) ** 2 * int(n_heads) * int(bytes_per_element)


def kv_cache_bytes(n_tokens: int, n_heads: int, d_head: int, n_layers: int = 1,
                   bytes_per_element: int = 2) -> int:
    """Bytes of the cached keys and values: 2 · n_layers · n_heads · n_tokens · d_head numbers."""
    return 2 * int(n_layers) * int(n_heads) * int(n_tokens) * int(d_head) * int(bytes_per_element)


# ----------------------------------------------------------------------------- decoding, step by step


@dataclass(frozen=True)
class DecodeStep:
    """One step of decoding: the new query at ``position`` against a cache of ``cache_length`` rows."""

    position: int
    cache_length: int
    weights: torch.Tensor  # (cache_length,)
    output: torch.Tensor  # (d_v,)


def decode_trace(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[DecodeStep]:
    """Decode q (n, d_k) token by token against a growing cache of k (n, d_k), v (n, d_v)."""
    if q.ndim != 2 or k.shape != q.shape or v.ndim != 2 or v.size(0) != q.size(0):
        raise ValueError(f"need q and k of shape (n, d_k) and v of shape (n, d_v), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    steps = []
    for t in range(q.size(0)):
        out, w = scaled_dot_product_attention(q[t : t + 1], k[: t + 1], v[: t + 1])  # (1, d_v), (1, t + 1)
        steps.append(DecodeStep(t, t + 1, w[0], out[0]))
    return steps


# ----------------------------------------------------------------------------- measured cost


def median_time(fn: Callable, *args, repeats: int = 5) -> float:
    """Median seconds of ``repeats`` calls fn(*args), after one warm-up call, on one thread.

    The median, not the fastest: a single lucky or disturbed run moves it little.
    """
    if repeats < 1:
        raise ValueError(f"need repeats ≥ 1, got {repeats}")
    with threads(1):
        fn(*args)  # warm-up: the first call pays for allocation
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def traced_peak_bytes(fn: Callable, *args, **kwargs) -> int:
    """Peak bytes of Python/NumPy memory traced (tracemalloc) while ``fn(*args, **kwargs)`` runs.

    tracemalloc sees NumPy's arrays, not torch's tensors.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        fn(*args, **kwargs)
        return int(tracemalloc.get_traced_memory()[1] - before)
    finally:
        if not was_tracing:
            tracemalloc.stop()


# ----------------------------------------------------------------------------- figures

MIB = 2**20
_MASK_COLOURS = ListedColormap(["#f2f2f2", "#4c72b0"])  # blocked, allowed


def _axes(ax, size=(4, 3.4)):
    return ax if ax is not None else plt.subplots(figsize=size, layout="constrained")[1]


def plot_mask(mask, ax=None, query_labels: Sequence[str] | None = None,
              key_labels: Sequence[str] | None = None, title: str | None = None):
    """A bool mask (n_q, n_k) as a grid: blue = may attend, grey = blocked."""
    mask = np.asarray(torch.as_tensor(mask), dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"plot_mask draws one (n_q, n_k) mask, got shape {mask.shape}")
    n_q, n_k = mask.shape
    query_labels = list(query_labels) if query_labels is not None else [str(i) for i in range(n_q)]
    key_labels = list(key_labels) if key_labels is not None else [str(j) for j in range(n_k)]
    if len(query_labels) != n_q or len(key_labels) != n_k:
        raise ValueError(f"mask has shape {mask.shape}, but there are {len(query_labels)} query labels "
                         f"and {len(key_labels)} key labels")
    ax = _axes(ax)
    ax.imshow(mask, cmap=_MASK_COLOURS, vmin=0, vmax=1)
    ax.set_xticks(range(n_k), key_labels)
    ax.set_yticks(range(n_q), query_labels)
    ax.set_xticks(np.arange(-0.5, n_k), minor=True)
    ax.set_yticks(np.arange(-0.5, n_q), minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    if title:
        ax.set_title(title)
    return ax


def log_axes_against_n(axes, ns: Sequence[int]):
    """Log-log axes with one tick per measured n (tokens), and a legend; returns ``axes``."""
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("n (tokens)")
        ax.legend(fontsize=8)
    return axes


def plot_memory_growth(ns: Sequence[int], n_heads: int, d_head: int, bytes_per_element: int = 2, ax=None):
    """Bytes per layer against context length: n × n score matrices (n²) vs the KV cache (n)."""
    ns = np.asarray(ns, dtype=float)
    if ns.ndim != 1 or len(ns) < 2 or np.any(ns < 1):
        raise ValueError(f"need at least two context lengths ≥ 1, got {ns}")
    ax = _axes(ax, (5, 3.6))
    scores = [attention_matrix_bytes(int(n), n_heads, bytes_per_element) / MIB for n in ns]
    cache = [kv_cache_bytes(int(n), n_heads, d_head, 1, bytes_per_element) / MIB for n in ns]
    ax.plot(ns, scores, "o-", color="#c44e52", label=f"score matrices, {n_heads} heads (∝ n²)")
    ax.plot(ns, cache, "s-", color="#4c72b0", label=f"KV cache, {n_heads} heads × {d_head} (∝ n)")
    ax.axvline(2 * d_head, color="0.5", ls=":", lw=1)
    ax.text(2 * d_head, max(scores), f" n = 2·d_head = {2 * d_head}", fontsize=8, va="top")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("context length n (tokens)")
    ax.set_ylabel(f"MiB per layer ({8 * bytes_per_element}-bit numbers)")
    ax.legend(fontsize=8, loc="lower right")
    return ax
