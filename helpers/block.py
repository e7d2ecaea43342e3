"""The Transformer block of lesson 07: references, the weights of ``nn`` layers as plain dicts,
and the post-norm / pre-norm gradient measurement.

Weights are applied as ``x @ w`` (the course's convention); ``nn.Linear`` stores the transpose,
so ``encoder_params`` and ``decoder_params`` transpose every matrix they copy.

``encoder_params(layer)`` returns, for an ``nn.TransformerEncoderLayer`` (or lesson 01's
``models.EncoderLayer``, which has the same parameter names) of width D and inner width F:

=============================  =========  ==============================================
key                            shape      role
=============================  =========  ==============================================
``w_q``, ``w_k``, ``w_v``      (D, D)     query, key and value projections, all heads side by side
``b_q``, ``b_k``, ``b_v``      (D,)       their biases
``w_o``, ``b_o``               (D, D), (D,)  output projection after the heads are merged
``ln1_gamma``, ``ln1_beta``    (D,)       LayerNorm of the attention sub-layer (``norm1``)
``ln2_gamma``, ``ln2_beta``    (D,)       LayerNorm of the feed-forward sub-layer (``norm2``)
``w1``, ``b1``                 (D, F), (F,)  first FFN layer (``linear1``)
``w2``, ``b2``                 (F, D), (D,)  second FFN layer (``linear2``)
``eps``                        float      the LayerNorms' epsilon
=============================  =========  ==============================================
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product_attention

ATTENTION_KEYS = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
ENCODER_KEYS = (*ATTENTION_KEYS, "ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta",
                "w1", "b1", "w2", "b2", "eps")


# ---------------------------------------------------------------- the pieces


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise each token over its features (last dim, biased variance), then scale and shift. (..., D)."""
    if gamma.shape != x.shape[-1:] or beta.shape != x.shape[-1:]:
        raise ValueError(f"gamma and beta must have shape ({x.shape[-1]},), the last dim of x "
                         f"{tuple(x.shape)}; got {tuple(gamma.shape)} and {tuple(beta.shape)}")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: divide by D, as nn.LayerNorm does
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> torch.Tensor:
    """relu(x w1 + b1) w2 + b2, token by token. x (..., D), w1 (D, F), w2 (F, D) -> (..., D)."""
    if w1.shape[0] != x.shape[-1] or w2.shape[0] != w1.shape[1]:
        raise ValueError(f"need x (..., D), w1 (D, F), w2 (F, D); got x {tuple(x.shape)}, "
                         f"w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)}")
    return torch.relu(x @ w1 + b1) @ w2 + b2


def multi_head(x_q: torch.Tensor, x_kv: torch.Tensor, p: dict, n_heads: int,
               mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention with biases, weights from ``p`` (keys ``ATTENTION_KEYS``).

    x_q (B, T_q, D), x_kv (B, T_kv, D); mask bool broadcastable to (B, H, T_q, T_kv), True = may
    attend. Returns the output (B, T_q, D) and the weights (B, H, T_q, T_kv).
    """
    B, T_q, D = x_q.shape
    if D % n_heads:
        raise ValueError(f"the width D = {D} must be divisible by n_heads = {n_heads}")

    def heads(t: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, H, T, D/H)
        return t.view(t.shape[0], t.shape[1], n_heads, D // n_heads).transpose(1, 2)

    q = heads(x_q @ p["w_q"] + p["b_q"])
    k = heads(x_kv @ p["w_k"] + p["b_k"])
    v = heads(x_kv @ p["w_v"] + p["b_v"])
    out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, D/H), (B, H, T_q, T_kv)
    out = out.transpose(1, 2).reshape(B, T_q, D)  # heads side by side again
    return out @ p["w_o"] + p["b_o"], weights


def encoder_layer(x: torch.Tensor, params: dict, n_heads: int, norm_first: bool = True,
                  mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One encoder layer and its attention weights: (B, T, D) -> ((B, T, D), (B, H, T, T))."""
    eps = params["eps"]

    def ln1(t):
        return layer_norm(t, params["ln1_gamma"], params["ln1_beta"], eps)

    def ln2(t):
        return layer_norm(t, params["ln2_gamma"], params["ln2_beta"], eps)

    def ffn(t):
        return feed_forward(t, params["w1"], params["b1"], params["w2"], params["b2"])

    if norm_first:  # pre-norm (GPT-2, ViT): the residual path x -> x + ... is never normalised
        h = ln1(x)
        attended, weights = multi_head(h, h, params, n_heads, mask)
        x = x + attended
        return x + ffn(ln2(x)), weights
    attended, weights = multi_head(x, x, params, n_heads, mask)  # post-norm (the original, BERT)
    x = ln1(x + attended)
    return ln2(x + ffn(x)), weights


def encoder_block(x: torch.Tensor, params: dict, n_heads: int, norm_first: bool = True,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """One encoder layer (B, T, D) -> (B, T, D); mask bool, broadcastable to (B, H, T, T), True = attend."""
    return encoder_layer(x, params, n_heads, norm_first, mask)[0]


# ---------------------------------------------------------------- weights of nn layers as dicts


def _attention_params(attn: nn.MultiheadAttention, prefix: str = "") -> dict:
    D = attn.embed_dim
    w, b = attn.in_proj_weight.detach(), attn.in_proj_bias.detach()  # (3D, D), (3D,): q, k, v stacked
    return {f"{prefix}w_q": w[:D].T, f"{prefix}w_k": w[D:2 * D].T, f"{prefix}w_v": w[2 * D:].T,
            f"{prefix}b_q": b[:D], f"{prefix}b_k": b[D:2 * D], f"{prefix}b_v": b[2 * D:],
            f"{prefix}w_o": attn.out_proj.weight.detach().T, f"{prefix}b_o": attn.out_proj.bias.detach()}


def _ffn_params(layer: nn.Module) -> dict:
    return {"w1": layer.linear1.weight.detach().T, "b1": layer.linear1.bias.detach(),
            "w2": layer.linear2.weight.detach().T, "b2": layer.linear2.bias.detach()}


def encoder_params(layer: nn.Module) -> dict:
    """The weights of an encoder layer as the dict ``encoder_block`` takes (keys in the module docstring)."""
    for name in ("self_attn", "linear1", "linear2", "norm1", "norm2"):
        if not hasattr(layer, name):
            raise ValueError(f"expected an nn.TransformerEncoderLayer (with .{name}), "
                             f"got {type(layer).__name__}")
    if layer.self_attn.in_proj_bias is None:
        raise ValueError("the layer's attention has no biases (bias=False); encoder_params expects them")
    return {**_attention_params(layer.self_attn), **_ffn_params(layer),
            "ln1_gamma": layer.norm1.weight.detach(), "ln1_beta": layer.norm1.bias.detach(),
            "ln2_gamma": layer.norm2.weight.detach(), "ln2_beta": layer.norm2.bias.detach(),
            "eps": layer.norm1.eps}


def decoder_params(layer: nn.TransformerDecoderLayer) -> dict:
    """The weights of an ``nn.TransformerDecoderLayer``: ``self_*`` and ``cross_*`` attention keys,
    ``ln1``..``ln3`` (self-attention, cross-attention, FFN), ``w1``..``b2`` and ``eps``."""
    if not isinstance(layer, nn.TransformerDecoderLayer):
        raise ValueError(f"expected an nn.TransformerDecoderLayer, got {type(layer).__name__}")
    found = {**_attention_params(layer.self_attn, "self_"),
             **_attention_params(layer.multihead_attn, "cross_"), **_ffn_params(layer),
             "eps": layer.norm1.eps}
    for i in (1, 2, 3):
        norm = getattr(layer, f"norm{i}")
        found[f"ln{i}_gamma"], found[f"ln{i}_beta"] = norm.weight.detach(), norm.bias.detach()
    return found


def _sub(params: dict, prefix: str) -> dict:
    """The attention weights stored under ``prefix`` (``self_`` or ``cross_``), without it."""
    return {key: params[prefix + key] for key in ATTENTION_KEYS}


def decoder_block(y: torch.Tensor, memory: torch.Tensor, params: dict, n_heads: int,
                  norm_first: bool = False, mask: torch.Tensor | None = None,
                  memory_mask: torch.Tensor | None = None) -> torch.Tensor:
    """One decoder layer: masked self-attention, cross-attention to ``memory``, FFN.

    y (B, T, D) the target so far, memory (B, S, D) the encoder's output; mask (self-attention,
    usually causal) and memory_mask (cross) are bool, True = may attend. Returns (B, T, D).
    """
    eps = params["eps"]
    lns = [(params[f"ln{i}_gamma"], params[f"ln{i}_beta"]) for i in (1, 2, 3)]
    sublayers = [
        lambda t: multi_head(t, t, _sub(params, "self_"), n_heads, mask)[0],  # looks back at y only
        # cross-attention: queries from y, keys and values from the encoder's memory
        lambda t: multi_head(t, memory, _sub(params, "cross_"), n_heads, memory_mask)[0],
        lambda t: feed_forward(t, params["w1"], params["b1"], params["w2"], params["b2"]),
    ]
    for sublayer, (gamma, beta) in zip(sublayers, lns):
        if norm_first:
            y = y + sublayer(layer_norm(y, gamma, beta, eps))
        else:
            y = layer_norm(y + sublayer(y), gamma, beta, eps)
    return y


# ---------------------------------------------------------------- sizes


def transformer_parameters(d_model: int = 512, d_ff: int = 2048, n_encoder: int = 6, n_decoder: int = 6,
                           vocab: int = 37_000) -> dict[str, int]:
    """Parameters of an encoder-decoder Transformer: the layers (as ``nn.Transformer``) and one
    shared embedding matrix (vocab, d_model), as in Vaswani et al. 2017 (base: about 37,000 tokens)."""
    d = d_model
    attention = 4 * d * d + 4 * d  # W_Q, W_K, W_V, W_O and their biases
    ffn = 2 * d * d_ff + d_ff + d
    encoder = n_encoder * (attention + ffn + 2 * 2 * d) + 2 * d  # two LayerNorms each, a final one
    decoder = n_decoder * (2 * attention + ffn + 3 * 2 * d) + 2 * d
    return {"encoder": encoder, "decoder": decoder, "embedding": vocab * d,
            "total": encoder + decoder + vocab * d}


# ---------------------------------------------------------------- post-norm vs pre-norm at initialisation


@dataclass(frozen=True)
class GradientStudy:
    """Gradient norms at initialisation: per layer of one deep stack, and of its top layer by depth."""

    n_layers: int
    per_layer: dict[str, np.ndarray]  # "post-norm"/"pre-norm" -> (n_layers,)
    depths: tuple[int, ...]
    top_layer: dict[str, np.ndarray]  # "post-norm"/"pre-norm" -> (len(depths),)


def layer_gradient_norms(norm_first: bool, n_layers: int, d_model: int = 64, n_heads: int = 4,
                         batch: int = 4, length: int = 16, seed: int = 0) -> np.ndarray:
    """L2 norm of the gradient of each layer's weights (LayerNorms left out), (n_layers,).

    A fresh stack of ``nn.TransformerEncoderLayer`` (dropout 0, FFN 4 x d_model) on random
    inputs; the loss is the mean squared distance of the output to a random target. A pre-norm
    stack ends in a LayerNorm, as GPT-2 and ViT do.
    """
    if n_layers < 1:
        raise ValueError(f"n_layers must be at least 1, got {n_layers}")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layers = nn.ModuleList(nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0,
                                                          batch_first=True, norm_first=norm_first)
                               for _ in range(n_layers))
    final = nn.LayerNorm(d_model) if norm_first else nn.Identity()
    x = torch.randn(batch, length, d_model)  # (B, T, D)
    target = torch.randn(batch, length, d_model)
    h = x
    for layer in layers:
        h = layer(h)
    F.mse_loss(final(h), target).backward()
    return np.array([torch.cat([p.grad.flatten() for name, p in layer.named_parameters()
                                if "norm" not in name]).norm().item() for layer in layers])


def gradient_study(n_layers: int = 24, depths: tuple[int, ...] = (3, 6, 12, 24),
                   seed: int = 0) -> GradientStudy:
    """Measure post-norm and pre-norm stacks: per layer at depth ``n_layers``, top layer at each depth."""
    per_layer, top = {}, {}
    for name, norm_first in (("post-norm", False), ("pre-norm", True)):
        runs = {L: layer_gradient_norms(norm_first, L, seed=seed) for L in sorted({*depths, n_layers})}
        per_layer[name] = runs[n_layers]
        top[name] = np.array([runs[L][-1] for L in depths])
    return GradientStudy(n_layers, per_layer, tuple(depths), top)


_STYLE = {"post-norm": {"color": "#c44e52", "marker": "o"}, "pre-norm": {"color": "#4c72b0", "marker": "s"}}


def plot_gradient_study(study: GradientStudy, axes=None):
    """Two panels: gradient norm per layer of the deep stack; the top layer's gradient norm by depth."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")[1]
    for name, norms in study.per_layer.items():
        axes[0].plot(np.arange(1, len(norms) + 1), norms, label=name, ms=4, **_STYLE[name])
        axes[1].plot(study.depths, study.top_layer[name], label=name, **_STYLE[name])
    axes[0].set_xlabel("layer (1 = nearest the input)")
    axes[0].set_ylabel("‖∂loss/∂weights of the layer‖")
    axes[0].set_title(f"{study.n_layers} layers at initialisation")
    axes[0].set_ylim(bottom=0)
    axes[1].set_xscale("log", base=2)
    axes[1].set_xticks(study.depths, [str(d) for d in study.depths])
    axes[1].set_xlabel("number of layers L")
    axes[1].set_ylabel("gradient norm of the top layer")
    axes[1].set_title("the top layer, as the stack gets deeper")
    axes[1].set_ylim(bottom=0)
    for ax in axes:
        ax.legend(fontsize=8)
    return axes
