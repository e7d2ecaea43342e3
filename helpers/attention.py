"""Reference attention: the trusted implementations every check compares against.

NumPy versions follow lesson 02 (tokens are rows, ``q (n_q, d_k)``); the torch version
follows lessons 04 on (batched ``(..., T, d)``, boolean masks, True = may attend).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _matrix(name: str, a) -> np.ndarray:
    """``a`` as a float 2-D array, or a ValueError that names the argument."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (tokens as rows), got shape {arr.shape}")
    return arr


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``; ``-inf`` entries get weight 0."""
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)  # largest entry becomes 0: exp cannot overflow
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def attention(q, k, v) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q kᵀ / √d_k) v. q: (n_q, d_k), k: (n_k, d_k), v: (n_k, d_v) -> ((n_q, d_v), (n_q, n_k))."""
    q, k, v = _matrix("q", q), _matrix("k", k), _matrix("v", v)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k need the same width d_k, got q {q.shape} and k {k.shape}")
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"k and v need one row per key, got k {k.shape} and v {v.shape}")
    scores = q @ k.T / math.sqrt(q.shape[1])  # (n_q, n_k)
    weights = softmax(scores, axis=-1)  # each query's weights over the keys sum to 1
    return weights @ v, weights  # (n_q, d_v), (n_q, n_k)


def self_attention(x, w_q, w_k, w_v) -> tuple[np.ndarray, np.ndarray]:
    """attention(x w_q, x w_k, x w_v). x: (n, d_model), w_q/w_k: (d_model, d_k), w_v: (d_model, d_v)."""
    x = _matrix("x", x)
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        w = _matrix(name, w)
        if w.shape[0] != x.shape[1]:
            raise ValueError(
                f"{name} must have d_model = {x.shape[1]} rows (x @ {name}), got shape {w.shape}"
            )
    return attention(x @ w_q, x @ w_k, x @ w_v)


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v and the weights. q: (..., T_q, d_k), k/v: (..., T_k, d).

    ``mask`` is boolean, broadcastable to (..., T_q, T_k), True = may attend.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked row -> zeros
    return weights @ v, weights
