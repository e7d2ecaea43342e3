"""Lesson 10: common claims, checked — the small measurements behind the claims.

How the gradient of a plain RNN, an LSTM and self-attention depends on the distance from the
end, a convolution computed by attention with relative positions, and the memory of causally
masked attention. The verdicts and their reasons are not here: they live only in the lesson's
hidden tests, so a student reads them in the feedback, after answering.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from . import sentiment
from .cost import tensor_memory
from .inspect_models import attention_forward
from .masking import causal_mask, masked_attention


def gradient_by_distance(kind: str, n_tokens: int = 60, d_in: int = 16, d_hidden: int = 32,
                         seed: int = 0) -> torch.Tensor:
    """‖∂(last output)/∂x_t‖ of a freshly initialised model, relative to the last token: (n_tokens,).

    Entry ``k`` is the token ``k`` positions before the end. ``kind``: "rnn" (tanh), "lstm", or
    "attention" (one self-attention layer, the last position's output).
    """
    if kind not in ("rnn", "lstm", "attention"):
        raise ValueError(f"kind must be 'rnn', 'lstm' or 'attention', got {kind!r}")
    if n_tokens < 2:
        raise ValueError(f"need at least 2 tokens, got {n_tokens}")
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # nn.RNN and nn.LSTM draw their initial weights from the global generator
    x = torch.randn(1, n_tokens, d_in, generator=g, dtype=torch.float64, requires_grad=True)  # (B, T, d)
    if kind == "attention":
        w_q, w_k, w_v = (torch.randn(d_in, d_hidden, generator=g, dtype=torch.float64) / math.sqrt(d_in)
                         for _ in range(3))
        q, k, v = x @ w_q, x @ w_k, x @ w_v  # (B, T, d_hidden)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_hidden), dim=-1) @ v
    else:
        layer = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM}[kind](d_in, d_hidden, batch_first=True)
        out, _ = layer.double()(x)  # (B, T, d_hidden)
    out[0, -1].sum().backward()
    norms = x.grad[0].norm(dim=-1)  # (T,)
    return (norms / norms[-1]).flip(0).detach()  # index = distance from the end


def _kernel_size(x: torch.Tensor, kernel: torch.Tensor) -> int:
    """The kernel width K, or a ValueError unless x is (n, c_in) and kernel (c_out, c_in, K) with K odd."""
    if x.ndim != 2 or kernel.ndim != 3 or kernel.size(-1) % 2 == 0 or kernel.size(1) != x.size(-1):
        raise ValueError(f"need x (n, c_in) and an odd kernel (c_out, c_in, K) with the same c_in, got "
                         f"{tuple(x.shape)} and {tuple(kernel.shape)}")
    return kernel.size(-1)


def circular_conv1d(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """1-D convolution with circular padding. x (n, c_in), kernel (c_out, c_in, K), K odd -> (n, c_out)."""
    size = _kernel_size(x, kernel)
    padded = F.pad(x.T[None], (size // 2, size // 2), mode="circular")  # (1, c_in, n + K − 1)
    return F.conv1d(padded, kernel)[0].T  # (n, c_out)


def attention_as_convolution(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """The same convolution as multi-head attention with relative-position scores: (n, c_out).

    Head h scores key j against query i by their offset alone: 0 if j − i = δ_h (circularly),
    −∞ otherwise (the limit of a sharp relative-position bias), so it copies token i + δ_h.
    W_V is the identity; W_O stacks the kernel's taps, one block per head.
    """
    size = _kernel_size(x, kernel)
    n = x.size(0)
    offset = (torch.arange(n)[None, :] - torch.arange(n)[:, None]) % n  # (n, n): key j − query i, circular
    heads = []
    for delta in range(-(size // 2), size // 2 + 1):  # one head per kernel tap
        scores = torch.full((n, n), -math.inf, dtype=x.dtype).masked_fill(offset == delta % n, 0.0)
        heads.append(torch.softmax(scores, dim=-1) @ x)  # (n, c_in): token i + δ
    w_o = torch.cat([kernel[:, :, tap].T for tap in range(size)], dim=0)  # (K·c_in, c_out)
    return torch.cat(heads, dim=-1) @ w_o


def causal_attention_peak_bytes(n: int, d: int = 64, causal: bool = True, seed: int = 0) -> int:
    """Peak bytes of tensors alive at once while lesson 04's masked_attention runs on (n, d) float32."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, d, generator=g) for _ in range(3))
    mask = causal_mask(n) if causal else None  # built before measuring: the mask is an input
    return tensor_memory(masked_attention, q, k, v, mask).peak_bytes


@torch.no_grad()
def attention_vs_removal(model: torch.nn.Module, reviews: sentiment.Reviews) -> torch.Tensor:
    """Per layer and head of lesson 01's attention classifier, (L, H): the share of ``reviews`` in
    which the word [CLS] attends to most is the word whose removal moves the logit most.

    A word is removed by deleting it (the words after it move up one position).
    """
    ids, lengths = sentiment.encode(reviews.sentences, add_cls=True)  # (N, T), [CLS] first
    logits, maps = attention_forward(model, ids, lengths)  # (N,), L x (N, H, T, T)
    shortened = [words[:i] + words[i + 1:] for words in reviews.sentences for i in range(len(words))]
    cut_ids, cut_lengths = sentiment.encode(shortened, add_cls=True)
    cut_logits = model(cut_ids, cut_lengths, cls_only=True)  # same logits: last layer at [CLS] only
    moved = (cut_logits - logits.repeat_interleave(lengths - 1)).abs()  # (Σ n_words,)
    decisive = torch.stack([part.argmax() for part in moved.split((lengths - 1).tolist())])  # (N,)
    looked_at = torch.stack([m[:, :, 0, 1:].argmax(-1) for m in maps])  # (L, N, H): word index, no [CLS]
    return (looked_at == decisive[None, :, None]).double().mean(1)  # (L, H)


def plot_gradient_by_distance(curves: dict[str, torch.Tensor], ax=None):
    """Relative gradient size against distance from the end, one log-scale line per model."""
    if not curves:
        raise ValueError("need at least one curve, e.g. {'plain RNN': gradient_by_distance('rnn')}")
    ax = ax if ax is not None else plt.subplots(figsize=(6, 3.4), layout="constrained")[1]
    for (name, curve), colour in zip(curves.items(), ["#c44e52", "#dd8452", "#4c72b0", "#55a868"]):
        ax.plot(range(len(curve)), curve.numpy(), "-", color=colour, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("distance of the word from the end (positions)")
    ax.set_ylabel("gradient size, relative to the last word")
    ax.set_title("before training: how much can each word move the output?")
    ax.legend(fontsize=8)
    return ax
