"""Lesson 06: multi-head attention — the references, the bridge to ``nn.MultiheadAttention``,
what heads cost, and on lesson 01's trained attention classifier: head ablation, and every head's
weights on one review.

Shapes: ``(B, T, D)`` tokens as rows; ``(B, H, T, d_h)`` split into ``H`` heads of width
``d_h = D / H``, head ``h`` owning the contiguous features ``h·d_h … (h+1)·d_h − 1``.
Weights are applied as ``x @ w`` (``(D_in, D_out)``); ``nn.MultiheadAttention`` stores the
transpose. Masks are boolean, True = may attend (``nn.MultiheadAttention``: True = blocked).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import sentiment
from .attention import scaled_dot_product_attention
from .runtime import threads

# ----------------------------------------------------------------------------- references


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H): head h gets features h·D/H … (h+1)·D/H − 1 of every token."""
    if x.ndim != 3:
        raise ValueError(f"x must be (B, T, D), got shape {tuple(x.shape)}")
    B, T, D = x.shape
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"D = {D} must be divisible by n_heads = {n_heads}")
    return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_h) -> (B, T, H·d_h): the heads side by side again; inverse of split_heads."""
    if x.ndim != 4:
        raise ValueError(f"x must be (B, H, T, d_h), got shape {tuple(x.shape)}")
    B, H, T, d_h = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_h)  # (B, T, D)


def multi_head_attention(x_q: torch.Tensor, x_kv: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                         w_v: torch.Tensor, w_o: torch.Tensor, n_heads: int,
                         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention: x_q (B, T_q, D), x_kv (B, T_kv, D), weights (D, D) as x @ w.

    ``mask`` is bool, broadcastable to (B, H, T_q, T_kv), True = may attend. Returns the output
    (B, T_q, D) and the weights of every head (B, H, T_q, T_kv); a query with no allowed key
    gets zero weights.
    """
    if x_q.ndim != 3 or x_kv.ndim != 3 or x_q.shape[-1] != x_kv.shape[-1]:
        raise ValueError(f"x_q and x_kv must be (B, T, D) with the same D, got {tuple(x_q.shape)} "
                         f"and {tuple(x_kv.shape)}")
    D = x_q.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        if tuple(w.shape) != (D, D):
            raise ValueError(f"{name} must be ({D}, {D}), got {tuple(w.shape)}")
    q = split_heads(x_q @ w_q, n_heads)  # (B, H, T_q, d_h)
    k = split_heads(x_kv @ w_k, n_heads)  # (B, H, T_kv, d_h)
    v = split_heads(x_kv @ w_v, n_heads)  # (B, H, T_kv, d_h)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # scaled by √d_h
    return merge_heads(heads) @ w_o, weights  # (B, T_q, D), (B, H, T_q, T_kv)


# ----------------------------------------------------------------------------- nn.MultiheadAttention


def weights_from_torch(mha: nn.MultiheadAttention) -> tuple[torch.Tensor, ...]:
    """(w_q, w_k, w_v, w_o), each (D, D) for x @ w, copied from an ``nn.MultiheadAttention``.

    It stores ``in_proj_weight`` (3D, D) and ``out_proj.weight`` (D, D) for ``x @ Wᵀ``.
    """
    if mha.in_proj_weight is None:
        raise ValueError("this nn.MultiheadAttention has separate q/k/v weights (kdim or vdim set)")
    w_q, w_k, w_v = mha.in_proj_weight.detach().chunk(3)  # each (D, D), stored transposed
    return w_q.T, w_k.T, w_v.T, mha.out_proj.weight.detach().T


def torch_mask(mask: torch.Tensor) -> torch.Tensor:
    """The course's bool mask (True = may attend) as ``nn.MultiheadAttention`` wants it (True = blocked)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool (True = may attend), got {mask.dtype}")
    return ~mask


def tagged_tokens(n_tokens: int, d_model: int) -> torch.Tensor:
    """(1, T, D) whose entry at token t, feature f is 10·t + f: each number says where it came from."""
    if not 1 <= d_model <= 10:
        raise ValueError(f"d_model must be 1 … 10 so that 10·t + f is readable, got {d_model}")
    t = torch.arange(n_tokens)[:, None]  # (T, 1)
    f = torch.arange(d_model)[None, :]  # (1, D)
    return (10 * t + f)[None]  # (1, T, D)


# ----------------------------------------------------------------------------- cost


def attention_cost(n_tokens: int, d_model: int, n_heads: int, d_head: int | None = None) -> dict[str, int]:
    """Multiply-adds and parameters of one attention layer (no biases) with H heads of width d_head.

    ``d_head`` defaults to d_model / n_heads. Keys: projections (q, k, v), scores, mix
    (weights @ v), output (W_O), total, parameters, score_entries (H·n²).
    """
    n, D, H = int(n_tokens), int(d_model), int(n_heads)
    if d_head is None:
        if D % H:
            raise ValueError(f"d_model = {D} is not divisible by n_heads = {H}; give d_head")
        d_head = D // H
    inner = H * int(d_head)  # width of the concatenated heads
    cost = {
        "projections": 3 * n * D * inner,
        "scores": H * n * n * d_head,
        "mix": H * n * n * d_head,
        "output": n * inner * D,
    }
    cost["total"] = sum(cost.values())
    cost["parameters"] = 3 * D * inner + inner * D
    cost["score_entries"] = H * n * n
    return cost


# ----------------------------------------------------------------------------- head ablation


def _head_outputs(layer: nn.Module, x: torch.Tensor, keep: torch.Tensor, cls_only: bool) -> torch.Tensor:
    """Every head's output (B, H, T_q, d_h) in a ``models.EncoderLayer`` for normalised input x (B, T, D).

    ``cls_only`` computes the query at position 0 ([CLS]) only: T_q = 1, else T_q = T.
    """
    attn = layer.self_attn
    B, T, D = x.shape
    H = layer.n_heads
    if cls_only:
        w_q, w_kv = attn.in_proj_weight.split([D, 2 * D])
        b_q, b_kv = attn.in_proj_bias.split([D, 2 * D])
        q = F.linear(x[:, :1], w_q, b_q).view(B, 1, H, D // H).transpose(1, 2)  # (B, H, 1, d_h)
        k, v = F.linear(x, w_kv, b_kv).view(B, T, 2, H, D // H).permute(2, 0, 3, 1, 4)  # (B, H, T, d_h)
    else:
        qkv = F.linear(x, attn.in_proj_weight, attn.in_proj_bias)  # (B, T, 3D), as the model does
        q, k, v = qkv.view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)  # each (B, H, T, d_h)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)  # (B, H, T_q, T)
    scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))  # padding is never a key
    return scores.softmax(dim=-1) @ v  # (B, H, T_q, d_h)


def _layer(layer: nn.Module, h: torch.Tensor, keep: torch.Tensor, head_on: torch.Tensor | None = None,
           heads: torch.Tensor | None = None, cls_only: bool = False) -> torch.Tensor:
    """One pre-norm encoder layer (B, T, D) -> (B, T_q, D), with heads switched off by ``head_on`` (H,).

    ``head_on`` multiplies each head's output before W_O (1 = keep, 0 = remove; None = all);
    ``heads`` reuses this layer's head outputs computed earlier; ``cls_only`` keeps position 0 only.
    """
    if heads is None:
        heads = _head_outputs(layer, layer.norm1(h), keep, cls_only)
    if head_on is not None:
        heads = heads * head_on[None, :, None, None]  # zero the removed heads' slices
    B, H, T_q, d_h = heads.shape
    merged = heads.transpose(1, 2).reshape(B, T_q, H * d_h)  # (B, T_q, D)
    h = (h[:, :1] if cls_only else h) + layer.self_attn.out_proj(merged)
    return h + layer.linear2(F.relu(layer.linear1(layer.norm2(h))))


@torch.no_grad()
def classifier_logits(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor,
                      head_on: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (B,) of a ``models.AttentionClassifier``, written out with its own parameters.

    ``head_on`` (n_layers, H): 1 keeps a head, 0 removes it (its output is zeroed before W_O);
    None reproduces ``model(ids, lengths)`` exactly.
    """
    n_layers, H = len(model.layers), model.config.n_heads
    if head_on is not None and tuple(head_on.shape) != (n_layers, H):
        raise ValueError(f"head_on must be (n_layers, H) = ({n_layers}, {H}), got {tuple(head_on.shape)}")
    T = ids.shape[1]
    h = model.embedding(ids) + model.positions.weight[:T]  # (B, T, D)
    keep = torch.arange(T) < lengths[:, None]  # (B, T): True = a real token
    for i, layer in enumerate(model.layers):
        h = _layer(layer, h, keep, None if head_on is None else head_on[i])
    return model.head(model.norm(h[:, 0])).squeeze(-1)  # [CLS] -> (B,)


@torch.no_grad()
def _ablated_predictions(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor,
                         variants: Sequence[tuple[int, torch.Tensor]]) -> list[torch.Tensor]:
    """Logits (B,) with all heads, then for each (layer, head_on (H,)) variant; fast but equivalent.

    Each layer's input and head outputs are computed once and reused by every variant that changes
    that layer; the last layer computes the [CLS] position only, the one the classifier reads.
    """
    L, T = len(model.layers), ids.shape[1]
    h = model.embedding(ids) + model.positions.weight[:T]  # (B, T, D)
    keep = torch.arange(T) < lengths[:, None]  # (B, T)
    inputs, heads = [], []
    for i, layer in enumerate(model.layers):
        inputs.append(h)
        heads.append(_head_outputs(layer, layer.norm1(h), keep, cls_only=i == L - 1))
        h = _layer(layer, h, keep, heads=heads[i], cls_only=i == L - 1)

    def readout(h: torch.Tensor) -> torch.Tensor:
        return model.head(model.norm(h[:, 0])).squeeze(-1)

    logits = [readout(h)]
    for layer_index, head_on in variants:
        h = _layer(model.layers[layer_index], inputs[layer_index], keep, head_on, heads[layer_index],
                   cls_only=layer_index == L - 1)
        for i in range(layer_index + 1, L):
            h = _layer(model.layers[i], h, keep, cls_only=i == L - 1)
        logits.append(readout(h))
    return logits


@dataclass(frozen=True)
class Ablation:
    """Accuracies of one model: ``full`` (S,), ``removed`` and ``alone`` (L, H, S) over S test sets.

    ``removed[l, h]``: head h of layer l zeroed; ``alone[l, h]``: only head h kept in layer l.
    """

    test_sets: tuple[str, ...]
    full: np.ndarray
    removed: np.ndarray
    alone: np.ndarray


def head_ablation(model: nn.Module, data: Mapping[str, object]) -> Ablation:
    """Accuracy on each test set (``trained.Encoded``) with every head removed in turn, and alone."""
    L, H = len(model.layers), model.config.n_heads
    variants = []
    for layer, head in np.ndindex(L, H):
        removed = torch.ones(H)
        removed[head] = 0.0
        variants.append((layer, removed))
    for layer, head in np.ndindex(L, H):
        variants.append((layer, torch.eye(H)[head]))  # only this head
    acc = np.zeros((1 + 2 * L * H, len(data)))  # rows: all heads, removed…, alone…
    with threads(1):  # these small products run faster on one thread than on two that compete
        for s, d in enumerate(data.values()):
            for r, logits in enumerate(_ablated_predictions(model, d.ids, d.lengths, variants)):
                acc[r, s] = float(((logits > 0) == d.labels.bool()).float().mean())
    return Ablation(tuple(data), acc[0], acc[1 : 1 + L * H].reshape(L, H, -1),
                    acc[1 + L * H :].reshape(L, H, -1))


def ablation_rows(result: Ablation, which: str = "removed") -> list[str]:
    """One line per head: its layer, its index and the accuracy per test set (%), as text."""
    table = {"removed": result.removed, "alone": result.alone}.get(which)
    if table is None:
        raise ValueError(f"which must be 'removed' or 'alone', got {which!r}")
    width = max(len(n) for n in result.test_sets) + 2
    head = "layer head  " + "".join(f"{n:>{width}}" for n in result.test_sets)
    lines = [head, "  all heads " + "".join(f"{100 * a:>{width}.1f}" for a in result.full)]
    for layer, h in np.ndindex(table.shape[:2]):
        lines.append(f"{layer + 1:>5} {h:>4}  " + "".join(f"{100 * a:>{width}.1f}" for a in table[layer, h]))
    return lines


def plot_ablation(results: Sequence[Ablation], seeds: Sequence[int], which: str = "removed", axes=None):
    """Heatmaps of the accuracy drop (points) per head, one panel per seed; returns the axes."""
    if len(results) != len(seeds) or not results:
        raise ValueError(f"give one seed per result, got {len(results)} results and {len(seeds)} seeds")
    if axes is None:
        axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), layout="constrained",
                            squeeze=False)[1][0]
    drops = [100 * (r.full[None, None, :] - getattr(r, which)) for r in results]  # (L, H, S) points
    top = max(1.0, max(float(d.max()) for d in drops))
    for ax, r, drop, seed in zip(axes, results, drops, seeds):
        L, H, S = drop.shape
        grid = drop.transpose(0, 2, 1).reshape(L * S, H)  # rows: layer × test set
        image = ax.imshow(grid, cmap="Reds", vmin=0.0, vmax=top, aspect="auto")
        ax.set_xticks(range(H), [f"head {h}" for h in range(H)])
        ax.set_yticks(range(L * S), [f"L{i + 1} {name}" for i in range(L) for name in r.test_sets],
                      fontsize=8)
        for i in range(1, L):
            ax.axhline(i * S - 0.5, color="black", lw=1.5)
        for i, j in np.ndindex(grid.shape):
            ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=7,
                    color="white" if grid[i, j] > 0.6 * top else "black")
        label = "one head removed" if which == "removed" else "only this head kept"
        ax.set_title(f"seed {seed}: {label}", fontsize=10)
    axes[-1].figure.colorbar(image, ax=list(axes), label="accuracy lost (points)", shrink=0.8)
    return axes


def ablation_summary(result: Ablation, cost: float = 1.0) -> dict:
    """What one model's ablation measured: heads removable at < ``cost`` points on every test set,
    the costliest head to remove, and per layer the best head kept alone (its worst test set)."""
    worst = 100 * (result.full[None, None, :] - result.removed).max(axis=-1)  # (L, H) points
    layer, head = np.unravel_index(np.argmax(worst), worst.shape)
    alone = 100 * result.alone.min(axis=-1)  # (L, H) %
    return {"free": int((worst < cost).sum()), "heads": int(worst.size), "removal_cost": worst,
            "costliest": (int(layer), int(head), float(worst[layer, head])),
            "best_alone": [(int(np.argmax(row)), float(row.max())) for row in alone]}


# ----------------------------------------------------------------------------- one review, head by head


@torch.no_grad()
def review_patterns(model: nn.Module, words: Sequence[str]) -> tuple[list[str], torch.Tensor]:
    """The tokens of one review ([CLS] first) and every head's weights (L, H, T, T) in ``model``."""
    ids, lengths = sentiment.encode([list(words)], add_cls=True)
    maps = model.attention_maps(ids, lengths)  # L tensors (1, H, T, T)
    return [sentiment.CLS, *words], torch.stack([m[0] for m in maps])


def strongest_keys(tokens: Sequence[str], weights: torch.Tensor,
                   query: int = 0) -> list[list[tuple[str, float]]]:
    """For every layer and head of weights (L, H, T, T): the token that position ``query`` puts
    most weight on, and that weight."""
    row = weights[:, :, query, :]  # (L, H, T)
    best, index = row.max(dim=-1)  # (L, H)
    return [[(tokens[int(i)], float(w)) for i, w in zip(ix, bw)] for ix, bw in zip(index, best)]


def layers_splitting(keys: list[list[tuple[str, float]]], words: Sequence[str]) -> list[int]:
    """The layers (0-based) in which, for every word of ``words``, some head's strongest key is that word."""
    return [layer for layer, row in enumerate(keys) if set(words) <= {word for word, _ in row}]


def plot_head_patterns(tokens: Sequence[str], weights: torch.Tensor, title: str = "", axes=None):
    """One heatmap per head of weights (H, T, T): row = query, column = key; returns the axes."""
    H, T, _ = weights.shape
    if T != len(tokens):
        raise ValueError(f"weights are over {T} tokens, got {len(tokens)} tokens")
    if axes is None:
        axes = plt.subplots(1, H, figsize=(3.0 * H, 3.3), layout="constrained", squeeze=False)[1][0]
    for h, ax in enumerate(axes):
        ax.imshow(weights[h].numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(T), tokens, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(T), tokens if h == 0 else [], fontsize=8)
        for i, j in np.ndindex(T, T):
            w = float(weights[h, i, j])
            if w >= 0.1:
                text = f"{w:.2f}"
                ax.text(j, i, "1" if text == "1.00" else text.lstrip("0"), ha="center", va="center",
                        fontsize=7, color="white" if w > 0.6 else "black")
        ax.set_title(f"head {h}", fontsize=10)
    if H:
        axes[0].set_ylabel("query (row)")
        axes[0].figure.suptitle(title, fontsize=10)
    return axes
