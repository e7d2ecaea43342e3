"""Checks for lesson 07 (the Transformer block): ``layer_norm``, ``feed_forward``, ``encoder_block``.

Every check runs on random float64 inputs and compares with ``helpers.block`` (itself tested
against ``nn.LayerNorm`` and ``nn.TransformerEncoderLayer``); ``check_encoder_block`` compares
with a real ``nn.TransformerEncoderLayer`` directly. Known mistakes — unbiased variance, the
batch axis, eps outside the square root or ignored, gamma and beta left out or swapped, GELU, the
wrong norm placement, a missing residual — are computed and named when the learner's result matches
one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import block as ref
from ..attention import scaled_dot_product_attention
from .core import (
    RTOL,
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_shape,
    passed,
    quiet,
    same,
    with_course_callees,
)
from .failure import hinted

LN_FIX = ("per token: mean and variance over the last dim (keepdim=True), biased variance "
          "(divide by D, unbiased=False / correction=0), (x − mean) / sqrt(var + eps), then * gamma + beta")


def _tensor(rng: np.random.Generator, *shape: int, scale: float = 1.0, loc: float = 0.0) -> torch.Tensor:
    return torch.from_numpy(rng.normal(loc, scale, size=shape))


# ---------------------------------------------------------------- layer_norm


def _normalise(x: torch.Tensor, dims, eps: float, unbiased: bool = False, eps_inside: bool = True):
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    return (x - mean) / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)


def _layer_norm_mistakes(x, gamma, beta, eps) -> list[tuple[torch.Tensor, str, str]]:
    """What the classic LayerNorm mistakes return for x (B, T, D), with their messages and fixes."""
    right = _normalise(x, -1, eps)
    affine = "normalised * gamma + beta"
    last_dim = "mean and variance over dim=-1 only, keepdim=True"
    eps_outside = _normalise(x, -1, eps, eps_inside=False) * gamma + beta
    eps_ignored = _normalise(x, -1, 0.0) * gamma + beta
    found = [
        (_normalise(x, -1, eps, unbiased=True) * gamma + beta,
         "you used the unbiased variance (divide by D − 1); LayerNorm divides by D, as nn.LayerNorm does",
         "x.var(-1, unbiased=False, keepdim=True), or ((x - mean)**2).mean(-1, keepdim=True)"),
        (_normalise(x, 0, eps) * gamma + beta,
         "you normalised over the batch (dim 0), as BatchNorm does; LayerNorm normalises each token "
         "over its own features, the last dim", last_dim),
        (_normalise(x, (0, 1), eps) * gamma + beta,
         "you normalised over the batch and the tokens (dims 0 and 1), as BatchNorm does; LayerNorm "
         "normalises each token over its own features, the last dim", last_dim),
        (_normalise(x, 1, eps) * gamma + beta,
         "you normalised over the wrong dim (the tokens, dim 1); LayerNorm normalises each token over its "
         "own features", last_dim),
        (_normalise(x, (1, 2), eps) * gamma + beta,
         "you normalised over the tokens and the features together; each token is normalised on its own",
         last_dim),
        (_normalise(x, -1, eps, unbiased=True, eps_inside=False) * gamma + beta,
         "eps is outside the square root and the variance is unbiased: x.std() divides by D − 1, and "
         "std + eps is not nn.LayerNorm's sqrt(var + eps)",
         "var = x.var(-1, unbiased=False, keepdim=True); (x - mean) / torch.sqrt(var + eps)"),
        (right * beta + gamma,
         "gamma and beta are swapped: you scaled by beta and shifted by gamma, but gamma is the learned "
         "scale and beta the learned shift", affine + ", in the order of the arguments (x, gamma, beta)"),
        (right, "gamma and beta are ignored: this is the plain normalised x, without LayerNorm's learned "
                "scale and shift", affine),
        (right * gamma, "beta is ignored: the learned shift is missing", affine),
        (right + beta, "gamma is ignored: the learned scale is missing", affine),
        ((right + beta) * gamma, "beta is added before multiplying by gamma, so gamma scales the shift too",
         affine),
        (x.std(-1, keepdim=True), "you return the standard deviation; LayerNorm returns the normalised x",
         "(x - mean) / torch.sqrt(var + eps) * gamma + beta"),
    ]
    # With a small eps the two eps mistakes can give the same numbers: only name one that is told apart.
    if not same(eps_outside, eps_ignored):
        found[5:5] = [
            (eps_outside, "eps is outside the square root: std + eps is not nn.LayerNorm's sqrt(var + eps), "
                          "and the two differ most for tokens with a small spread",
             "(x - mean) / torch.sqrt(var + eps)"),
            (eps_ignored, "eps is ignored: your result is that of eps = 0, where a token with no "
                          "spread would be divided by 0",
             "(x - mean) / torch.sqrt(var + eps), with the eps argument"),
        ]
    return found


@hinted
def check_layer_norm(layer_norm: Callable, seed: int = 0, shape: tuple[int, int, int] = (3, 5, 8),
                     verbose: bool = True) -> None:
    """Check a learner's ``layer_norm(x, gamma, beta, eps=1e-5)`` against ``nn.LayerNorm`` semantics."""
    rng = np.random.default_rng(seed)
    B, T, D = shape
    context = f"seed={seed}, x of shape {shape}"
    gamma, beta = _tensor(rng, D, loc=1.0, scale=0.5), _tensor(rng, D, scale=0.5)
    # Each token has its own mean and scale, so normalising over the wrong dims shows.
    x = _tensor(rng, B, T, D) * torch.from_numpy(rng.uniform(0.5, 3, (B, T, 1))) \
        + torch.from_numpy(rng.normal(0, 2, (B, T, 1)))
    # A small spread and a large eps first: there where eps sits shows, and each eps mistake is told apart.
    cases = [(0.2 * x, 0.1, "eps=0.1 on inputs with a small spread"),
             (x, 1e-5, "default eps, called without eps")]
    for inputs, eps, label in cases:
        original = inputs.clone()
        args = (inputs, gamma, beta) if label.startswith("default") else (inputs, gamma, beta, eps)
        got = as_array(call(layer_norm, *args, what=f"layer_norm ({label})", fix=LN_FIX),
                       f"layer_norm ({label})")
        if not torch.equal(inputs, original):
            raise CheckFailed("layer_norm changed x in place — the caller's x is overwritten",
                              "compute new tensors: x - mean, not x -= mean")
        expect_shape(got, (B, T, D), f"layer_norm ({label})", "the output has the shape of x",
                     "keepdim=True keeps the mean and variance (…, 1), broadcastable against x")
        want = F.layer_norm(inputs, (D,), gamma, beta, eps)
        mistakes = _layer_norm_mistakes(inputs, gamma, beta, eps)
        if len(args) == 3 and not same(got, want):
            explicit = as_array(call(layer_norm, inputs, gamma, beta, 1e-5, what=f"layer_norm ({label})",
                                     fix=LN_FIX), f"layer_norm ({label})")
            if same(explicit, want):
                raise CheckFailed(f"layer_norm ({label}) ({context}): the default eps is not 1e-5: called "
                                  "without eps, your layer_norm gives another result than with eps=1e-5, "
                                  "nn.LayerNorm's default", "def layer_norm(x, gamma, beta, eps=1e-5)")
        expect_close(got, want, f"layer_norm ({label})", mistakes, context, fix=LN_FIX)
    vec = _tensor(rng, D, loc=3.0)
    expect_close(as_array(call(layer_norm, vec, gamma, beta, what="layer_norm of one token (D,)", fix=LN_FIX),
                          "layer_norm of one token"),
                 F.layer_norm(vec, (D,), gamma, beta), "layer_norm of one token of shape (D,)",
                 context=context, fix="use dim=-1, which works for any number of leading dims")
    passed("layer_norm matches nn.LayerNorm (per token, biased variance, eps inside the root, "
           "gamma and beta), for 3-D and 1-D inputs", verbose)


# ---------------------------------------------------------------- feed_forward


@hinted
def check_feed_forward(feed_forward: Callable, seed: int = 0, shape: tuple[int, int, int] = (2, 5, 6),
                       d_ff: int = 10, verbose: bool = True) -> None:
    """Check a learner's ``feed_forward(x, w1, b1, w2, b2)``: relu(x w1 + b1) w2 + b2."""
    rng = np.random.default_rng(seed)
    D = shape[-1]
    context = f"seed={seed}, x {shape}, w1 ({D}, {d_ff}), w2 ({d_ff}, {D})"
    x = _tensor(rng, *shape)
    w1, b1 = _tensor(rng, D, d_ff), _tensor(rng, d_ff)
    w2, b2 = _tensor(rng, d_ff, D), _tensor(rng, D)
    fix = "x @ w1 + b1 is (…, d_ff); relu; then @ w2 + b2 gives (…, D). Weights are applied as x @ w"
    got = as_array(call(feed_forward, x, w1, b1, w2, b2, what="feed_forward(x, w1, b1, w2, b2)", fix=fix),
                   "feed_forward")
    expect_shape(got, shape, "feed_forward(x, …)", "the output has the shape of x: (…, D)", fix)
    h = x @ w1 + b1
    recipe = "relu(x @ w1 + b1) @ w2 + b2"
    mistakes = [
        (F.gelu(h) @ w2 + b2, "you used GELU (BERT, GPT, ViT); this exercise, like the original "
                              "Transformer, uses ReLU", "torch.relu(x @ w1 + b1)"),
        (h @ w2 + b2, "there is no non-linearity: two linear layers in a row are just one linear layer",
         recipe),
        (torch.relu(torch.relu(h) @ w2 + b2),
         "ReLU after both layers: the second layer is the FFN's output, and a ReLU there clips it to ≥ 0 "
         "(the residual x + FFN(x) could then only grow)", "one relu, after the first layer only: " + recipe),
        (torch.relu(h @ w2 + b2), "relu is applied after the second layer, which clips the output to ≥ 0",
         recipe),
        (torch.relu(h) @ w2, "b2 is missing: the second layer's bias is never added", recipe),
        (torch.relu(x @ w1) @ w2 + b2, "b1 is missing: the first layer's bias is never added", recipe),
        (torch.relu(h @ w2) + b2, "the relu is in the wrong place: after the second product instead of the "
                                  "first", recipe),
        (torch.sigmoid(h) @ w2 + b2, "you used a sigmoid; the FFN uses relu", "torch.relu(x @ w1 + b1)"),
        (F.gelu(h, approximate="tanh") @ w2 + b2, "you used GELU (tanh approximation); the FFN uses relu",
         "torch.relu(x @ w1 + b1)"),
    ]
    want = ref.feed_forward(x, w1, b1, w2, b2)
    # An output near 0 is a sum of terms as large as the largest output: float32 rounding is
    # relative to those terms, not to the small sum.
    expect_close(got, want, "feed_forward", mistakes, context, fix=fix,
                 atol=RTOL * float(want.abs().max()))
    passed("feed_forward equals relu(x w1 + b1) w2 + b2 on random inputs", verbose)


# ---------------------------------------------------------------- encoder_block


def random_encoder_layer(d_model: int, n_heads: int, d_ff: int, norm_first: bool, seed: int,
                         eps: float = 1e-5) -> nn.TransformerEncoderLayer:
    """A float64 ``nn.TransformerEncoderLayer`` (dropout 0, ReLU, batch_first, LayerNorms with ``eps``)
    with every weight random, LayerNorm and bias terms included, so that leaving any of them out shows."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, activation="relu",
                                           layer_norm_eps=eps, batch_first=True,
                                           norm_first=norm_first).double()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("bias") or "norm" in name:
                centre = 1.0 if "norm" in name and name.endswith("weight") else 0.0  # gamma near 1
                p.copy_(torch.randn_like(p) * 0.5 + centre)
    return layer.train()  # train mode with dropout 0: the plain path, no fused fast path


def run_layer(layer: nn.TransformerEncoderLayer, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The nn layer's output; ``mask`` uses the course convention and is inverted for nn (True = blocked)."""
    with quiet(), torch.no_grad():
        if mask is None:
            return layer(x)
        if mask.ndim == 2:  # (T, T): a causal or other attention mask
            return layer(x, src_mask=~mask)
        return layer(x, src_key_padding_mask=~mask[:, 0, 0, :])  # (B, 1, 1, T) -> (B, T)


def _ln_variant(kind: str) -> Callable:
    def wrong(x, gamma, beta, eps=1e-5):
        if kind == "unbiased":
            return _normalise(x, -1, eps, unbiased=True) * gamma + beta
        if kind == "batch":
            return _normalise(x, 0, eps) * gamma + beta
        if kind == "tokens":
            return _normalise(x, 1, eps) * gamma + beta
        if kind == "eps":
            return _normalise(x, -1, eps, eps_inside=False) * gamma + beta
        if kind == "swapped":
            return _normalise(x, -1, eps) * beta + gamma
        return _normalise(x, -1, eps)  # "affine": gamma and beta ignored
    return wrong


def _heads_attention(t, p, n_heads, mask, split_transpose: bool, merge_transpose: bool) -> torch.Tensor:
    """Multi-head self-attention with biases, the heads split and merged with or without the transpose."""
    B, T, D = t.shape

    def heads(u):  # (B, T, D) -> (B, H, T, D/H)
        if split_transpose:
            return u.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)
        return u.reshape(B, n_heads, T, D // n_heads)  # consecutive chunks of the flat numbers

    q, k, v = (heads(t @ p[f"w_{n}"] + p[f"b_{n}"]) for n in "qkv")
    out = scaled_dot_product_attention(q, k, v, mask)[0]  # (B, H, T, D/H)
    merged = out.transpose(1, 2).reshape(B, T, D) if merge_transpose else out.reshape(B, T, D)
    return merged @ p["w_o"] + p["b_o"]


def _variant(x, p, n_heads, norm_first, mask, ln=ref.layer_norm, act=torch.relu,
             residual=(True, True), split_transpose=True, merge_transpose=True, relu_out=False,
             norm_output=False) -> torch.Tensor:
    """The encoder layer with one piece swapped: what a learner's mistake computes.

    ``relu_out`` puts a ReLU after the FFN's second layer too; ``norm_output`` writes each sub-layer
    as x + LN(f(x)), normalising the sub-layer's output."""
    eps = p["eps"]

    def attn(t):
        return _heads_attention(t, p, n_heads, mask, split_transpose, merge_transpose)

    def ffn(t):
        out = act(t @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return torch.relu(out) if relu_out else out

    def norm(t, i):
        return ln(t, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], eps)

    skip1, skip2 = (1.0 if r else 0.0 for r in residual)
    if norm_output:
        x = skip1 * x + norm(attn(x), 1)
        return skip2 * x + norm(ffn(x), 2)
    if norm_first:
        x = skip1 * x + attn(norm(x, 1))
        return skip2 * x + ffn(norm(x, 2))
    x = norm(skip1 * x + attn(x), 1)
    return norm(skip2 * x + ffn(x), 2)


def _block_mistakes(x, p, n_heads, norm_first, mask) -> list[tuple[torch.Tensor, str, str]]:
    placement = ("pre-norm (norm_first=True): x + attention(LayerNorm(x)), then x + FFN(LayerNorm(x))"
                 if norm_first else
                 "post-norm (norm_first=False): LayerNorm(x + attention(x)), then LayerNorm(x + FFN(x))")
    ln = ("call layer_norm(h, params['ln1_gamma'], params['ln1_beta'], params['eps']) (ln2_… for the "
          "second) — the course's layer_norm is in place while this check runs")
    no_bias = {**p, **{f"b_{n}": torch.zeros_like(p[f"b_{n}"]) for n in "qkvo"}}
    layout = ("split: (B, T, D) → (B, T, H, D/H) → .transpose(1, 2) → (B, H, T, D/H); "
              "merge: .transpose(1, 2) back to (B, T, H, D/H), then .reshape(B, T, D)")
    found = [
        (_variant(x, p, n_heads, not norm_first, mask),
         f"the LayerNorms are in the other place — this is {'post' if norm_first else 'pre'}-norm, but "
         f"norm_first={norm_first} asks for {'pre' if norm_first else 'post'}-norm", placement),
        (_variant(x, p, n_heads, norm_first, mask, norm_output=True),
         "you wrote x + LN(f(x)): the LayerNorm normalises each sub-layer's output, which is neither "
         "pre-norm, x + f(LN(x)), nor post-norm, LN(x + f(x))", placement),
        *((_variant(x, {**p, "eps": fixed}, n_heads, norm_first, mask),
           f"the LayerNorms ignore params['eps'] (= {p['eps']:g} here): your result is that of a fixed small "
           "eps such as nn.LayerNorm's default 1e-5, but each layer brings its own eps in params",
           "layer_norm(h, params['ln1_gamma'], params['ln1_beta'], params['eps']), and the same eps for ln2")
          for fixed in (1e-5, 1e-6, 1e-12)),  # nn's default, a common other, BERT's
        (_variant(x, p, n_heads, norm_first, mask, split_transpose=False),
         "the heads are split without a transpose: (B, T, D) reshaped straight to (B, H, T, D/H) fills each "
         "head's rows with consecutive chunks of the flat numbers, pieces of different tokens", layout),
        (_variant(x, p, n_heads, norm_first, mask, merge_transpose=False),
         "the heads are merged without a transpose: (B, H, T, D/H) reshaped straight to (B, T, D) fills each "
         "token's row with pieces of other tokens", layout),
        (_variant(x, p, n_heads, norm_first, mask, split_transpose=False, merge_transpose=False),
         "the heads are split and merged without a transpose: reshaping (B, T, D) straight to (B, H, T, D/H) "
         "and back mixes different tokens inside each head", layout),
        (_variant(x, p, n_heads, norm_first, mask, residual=(False, True)),
         "the residual around the attention sub-layer is missing: the sub-layer's input is never added back",
         placement),
        (_variant(x, p, n_heads, norm_first, mask, residual=(True, False)),
         "the residual around the feed-forward sub-layer is missing: the sub-layer's input is never added "
         "back", placement),
        (_variant(x, p, n_heads, norm_first, mask, residual=(False, False)),
         "both residual connections are missing: neither sub-layer's input is added back", placement),
        (_variant(x, no_bias, n_heads, norm_first, mask),
         "the attention's biases are left out: q, k, v and the output each add their own (params['b_q'], "
         "params['b_k'], params['b_v'], params['b_o'])", "q = x @ params['w_q'] + params['b_q'], and so on"),
        (_variant(x, p, n_heads, norm_first, mask, act=F.gelu),
         "the FFN uses GELU; nn.TransformerEncoderLayer here (and this exercise) uses ReLU",
         "feed_forward(h, params['w1'], params['b1'], params['w2'], params['b2']), which uses relu"),
        (_variant(x, p, n_heads, norm_first, mask, relu_out=True),
         "ReLU after both FFN layers: the second layer is the FFN's output, and a ReLU there clips it to ≥ 0",
         "feed_forward(h, params['w1'], params['b1'], params['w2'], params['b2']): one relu, after the first "
         "layer"),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("unbiased")),
         "LayerNorm uses the unbiased variance (D − 1), but nn.LayerNorm uses the biased one", ln),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("batch")),
         "LayerNorm normalises over the batch (dim 0), but each token is normalised over its own features",
         ln),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("tokens")),
         "LayerNorm normalises over the tokens (dim 1), but each token is normalised over its own features",
         ln),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("eps")),
         "LayerNorm has eps outside the square root: std + eps is not nn.LayerNorm's sqrt(var + eps)", ln),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("swapped")),
         "the LayerNorms' gamma and beta are swapped: gamma is the learned scale, beta the learned shift",
         ln),
        (_variant(x, p, n_heads, norm_first, mask, ln=_ln_variant("affine")),
         "the LayerNorms ignore their gamma and beta (params['ln1_gamma'], …)", ln),
    ]
    if mask is not None:
        found += [
            (_variant(x, p, n_heads, norm_first, None),
             "the mask is ignored: the real tokens also attended to the padding",
             "pass the mask to the attention: blocked scores -> -inf before the softmax (True = may attend)"),
            (_variant(x, p, n_heads, norm_first, ~mask),
             "the mask is inverted: in this course True means *may attend*, but your attention went to the "
             "padding only", "block where the mask is False: scores.masked_fill(~mask, float('-inf'))"),
        ]
    return found


@with_course_callees("layer_norm", "feed_forward")
@hinted
def check_encoder_block(encoder_block: Callable, seed: int = 0, batch: int = 3, length: int = 5,
                        d_model: int = 8, n_heads: int = 2, d_ff: int = 12, eps: float = 0.1,
                        verbose: bool = True) -> None:
    """Check a learner's ``encoder_block(x, params, n_heads, norm_first=True, mask=None)`` against
    ``nn.TransformerEncoderLayer`` for pre-norm and post-norm, without and with a padding mask.

    The layers' LayerNorms use ``eps``, far from nn's default 1e-5, so an eps not read from
    ``params`` shows."""
    rng = np.random.default_rng(seed)
    x = _tensor(rng, batch, length, d_model)
    lengths = torch.from_numpy(rng.integers(1, length + 1, size=batch))
    lengths[0] = length
    lengths[-1] = int(rng.integers(1, length))  # a padded sequence, so that a mask left out shows
    keep = (torch.arange(length)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    fix = ("pre-norm: h = x + attention(LN1(x)); out = h + FFN(LN2(h)). "
           "post-norm: h = LN1(x + attention(x)); out = LN2(h + FFN(h)). "
           "Attention: q = x @ w_q + b_q (…), split into heads, scaled dot-product "
           "with the mask, merge the heads, @ w_o + b_o")
    for norm_first in (True, False):
        layer = random_encoder_layer(d_model, n_heads, d_ff, norm_first, seed, eps)
        params = ref.encoder_params(layer)
        for mask in (None, keep):
            label = (f"norm_first={norm_first}, " + ("no mask" if mask is None else
                     f"padding mask of lengths {lengths.tolist()}"))
            original = x.clone()
            kwargs = {"norm_first": norm_first} if mask is None else {"norm_first": norm_first, "mask": mask}
            got = as_array(call(encoder_block, x, params, n_heads, what=f"encoder_block ({label})", fix=fix,
                                **kwargs), f"encoder_block ({label})")
            if not torch.equal(x, original):
                raise CheckFailed("encoder_block changed x in place — the caller's x is overwritten",
                                  "write x = x + …, not x += …")
            expect_shape(got, tuple(x.shape), f"encoder_block ({label})", "the output has the shape of x",
                         fix)
            want = run_layer(layer, x, mask)
            # Padded positions hold no token: compare only the real ones (nn may zero the others).
            real = (keep[:, 0, 0, :, None].expand_as(x) if mask is not None
                    else torch.ones_like(x, dtype=torch.bool)).numpy()
            mistakes = [(np.where(real, m.numpy(), 0.0), *told)
                        for m, *told in _block_mistakes(x, params, n_heads, norm_first, mask)]
            expect_close(np.where(real, got, 0.0), np.where(real, want.numpy(), 0.0),
                         f"encoder_block ({label})", mistakes,
                         f"seed={seed}, B={batch}, T={length}, D={d_model}, H={n_heads}, eps={eps:g}",
                         fix=fix)
    passed(f"encoder_block equals nn.TransformerEncoderLayer (dropout 0, ReLU, batch_first, eps={eps:g}) "
           "for norm_first True and False, with and without a padding mask", verbose)

