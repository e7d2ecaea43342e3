"""Checks for lesson 06 (multi-head attention): ``split_heads``, ``merge_heads``,
``multi_head_attention``.

Each check runs the learner's function on random float64 tensors whose sizes all differ
(B, T, H, d_h, T_q ≠ T_kv), compares with the reference in ``helpers.heads``, and when the
result is wrong computes what each known mistake returns — a reshape without the transpose,
interleaved heads, heads in the wrong order, √D instead of √d_h, a missing W_O, transposed
weights, keys and values taken from the queries' input or projected with the wrong matrix, the
softmax over the queries, an inverted or ignored mask — and names the one it matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from .. import heads as ref
from .core import (
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_dtype,
    expect_pair,
    expect_shape,
    passed,
    quiet,
    same,
    swapped_pair,
    with_course_callees,
)
from .failure import hinted

SPLIT_FIX = ("x.reshape(B, T, H, D // H) cuts each token's features into H pieces; then "
             ".transpose(1, 2) puts the head axis before the tokens: (B, H, T, D/H)")
MERGE_FIX = ("undo split_heads in reverse order: x.transpose(1, 2) to (B, T, H, d_h), "
             "then .reshape(B, T, H * d_h)")


def _split(x: torch.Tensor, H: int, how: str = "ok") -> torch.Tensor:
    """split_heads done right ("ok") or with a known mistake: (B, T, D) -> (B, H, T, D/H)."""
    B, T, D = x.shape
    if how == "reshape":  # no transpose: consecutive chunks of the flat (T·D) numbers
        return x.reshape(B, H, T, D // H)
    if how == "interleave":  # head h takes features h, h + H, h + 2H, ...
        return x.reshape(B, T, D // H, H).permute(0, 3, 1, 2)
    if how == "reversed":
        return ref.split_heads(x, H).flip(1)
    return ref.split_heads(x, H)


def _merge(x: torch.Tensor, how: str = "ok") -> torch.Tensor:
    """merge_heads done right ("ok") or with a known mistake: (B, H, T, d_h) -> (B, T, H·d_h)."""
    B, H, T, d_h = x.shape
    if how == "reshape":
        return x.reshape(B, T, H * d_h)
    if how == "interleave":
        return x.permute(0, 2, 3, 1).reshape(B, T, H * d_h)
    if how == "reversed":
        return ref.merge_heads(x.flip(1))
    return ref.merge_heads(x)


# Each known mistake: (what it is and why it is wrong, how to fix it).
SPLIT_MISTAKES = {
    "reshape": ("you reshaped to (B, H, T, D/H) without a transpose: each 'head' now holds consecutive "
                "chunks of the flat numbers, mixing different tokens",
                "reshape to (B, T, H, D/H) first, then .transpose(1, 2)"),
    "interleave": ("your heads are interleaved: head h got features h, h+H, h+2H, …, but each head owns a "
                   "contiguous slice h·D/H … (h+1)·D/H − 1",
                   "reshape to (B, T, H, D/H), not (B, T, D/H, H), then .transpose(1, 2)"),
    "reversed": ("the heads come out in reverse order: head 0 must hold the first D/H features",
                 "no flip: reshape to (B, T, H, D/H) and .transpose(1, 2) keep the heads in order"),
}
MERGE_MISTAKES = {
    "reshape": ("you reshaped (B, H, T, d_h) straight to (B, T, H·d_h) without a transpose: token rows get "
                "pieces of other tokens", ".transpose(1, 2) first, then .reshape(B, T, H * d_h)"),
    "interleave": ("the heads' features are interleaved in the output: head h must fill the contiguous "
                   "columns h·d_h … (h+1)·d_h − 1",
                   "transpose to (B, T, H, d_h), not (B, T, d_h, H), then reshape"),
    "reversed": ("the heads are merged in the wrong order: head 0's output must come first",
                 "no flip: .transpose(1, 2), then .reshape(B, T, H * d_h)"),
}


def _expect(got: np.ndarray, want, what: str, context: str, fix: str, mistakes: Callable[..., list],
            *args, why: str = "") -> None:
    """expect_close, computing ``mistakes(*args)`` (the known mistakes' results) only when needed."""
    want = np.asarray(want, dtype=float)
    if not same(got, want):
        expect_close(got, want, what, mistakes(*args), context, fix=fix, why=why)


def _split_mistakes(x: torch.Tensor, H: int) -> list:
    return [(_split(x, H, how), *told) for how, told in SPLIT_MISTAKES.items()]


def _merge_mistakes(x: torch.Tensor) -> list:
    return [(_merge(x, how), *told) for how, told in MERGE_MISTAKES.items()]


def _unchanged(before: torch.Tensor, after: torch.Tensor, name: str) -> None:
    if not torch.equal(before, after):
        raise CheckFailed(f"{name} changed its input in place — the caller's x is overwritten",
                          "return a new tensor: reshape and transpose leave x alone, transpose_ and the "
                          "other methods ending in _ change it")


@hinted
def check_split_heads(split_heads: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``split_heads(x, n_heads)``: (B, T, D) -> (B, H, T, D/H)."""
    g = torch.Generator().manual_seed(seed)
    for B, T, D, H in ((2, 3, 12, 3), (1, 5, 8, 2), (3, 2, 6, 1), (2, 4, 6, 6)):
        x = torch.randn(B, T, D, generator=g, dtype=torch.float64)
        original = x.clone()
        what = f"split_heads(x of shape {(B, T, D)}, n_heads={H})"
        got = as_array(call(split_heads, x, H, what=what, fix=SPLIT_FIX), what)
        _unchanged(original, x, "split_heads")
        want = ref.split_heads(x, H)
        shapes = {(B, T, H, D // H): ("the head axis must come before the tokens", ".transpose(1, 2)"),
                  (B, H, D // H, T): ("the last two axes are swapped: each head holds (T, D/H), tokens as "
                                      "rows", "transpose(1, 2) of the (B, T, H, D/H) reshape, not "
                                              "transpose(-2, -1)")}
        if tuple(got.shape) != tuple(want.shape) and tuple(got.shape) in shapes:
            why, fix = shapes[tuple(got.shape)]
            raise CheckFailed(f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)} — {why}",
                              fix)
        expect_shape(got, tuple(want.shape), what, "(B, H, T, D/H)", SPLIT_FIX)
        _expect(got, want, what, f"seed={seed}", SPLIT_FIX, _split_mistakes, x, H)
    passed("split_heads gives (B, H, T, D/H) with head h holding features h·D/H … (h+1)·D/H − 1 of "
           "every token, for H = 1, 2, 3 and H = D", verbose)


@hinted
def check_merge_heads(merge_heads: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``merge_heads(x)``: (B, H, T, d_h) -> (B, T, H·d_h), the inverse of split_heads."""
    g = torch.Generator().manual_seed(seed)
    for B, H, T, d_h in ((2, 3, 5, 4), (1, 2, 3, 6), (2, 1, 4, 3), (3, 4, 2, 1)):
        x = torch.randn(B, H, T, d_h, generator=g, dtype=torch.float64)
        original = x.clone()
        what = f"merge_heads(x of shape {(B, H, T, d_h)})"
        got = as_array(call(merge_heads, x, what=what, fix=MERGE_FIX), what)
        _unchanged(original, x, "merge_heads")
        want = ref.merge_heads(x)
        if tuple(got.shape) == (B, H, T * d_h) and H != T:
            raise CheckFailed(f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)} — the "
                              "heads must be laid side by side for every token, not one after another",
                              "transpose(1, 2) first, then .reshape(B, T, H * d_h)")
        expect_shape(got, tuple(want.shape), what, "(B, T, H·d_h)", MERGE_FIX)
        _expect(got, want, what, f"seed={seed}", MERGE_FIX, _merge_mistakes, x)
        # The round trip: merging what the reference split gives x back.
        y = torch.randn(B, T, H * d_h, generator=g, dtype=torch.float64)
        back = as_array(call(merge_heads, ref.split_heads(y, H), what="merge_heads(split_heads(y))",
                             fix=MERGE_FIX),
                        "merge_heads(split_heads(y))")
        expect_close(back, y, "merge_heads(split_heads(y)) must give y back", context=f"seed={seed}",
                     fix=MERGE_FIX)
    passed("merge_heads lays the heads side by side, head 0 first, and undoes split_heads", verbose)


# ----------------------------------------------------------------------------- multi-head attention


def _variant(x_q, x_kv, ws, H, mask=None, scale="head", split="ok", merge="ok", w_o=True,
             transpose_w=False, softmax_dim=-1, mask_mode="ok", kv_from_q=False,
             proj="qkv") -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention with one known mistake switched on; (output, weights) like the reference.

    ``proj`` names the matrix each of q, k, v is projected with ("kqv": w_q and w_k swapped).
    """
    w_q, w_k, w_v, w_out = (w.T if transpose_w else w for w in ws)
    w_for = {"q": w_q, "k": w_k, "v": w_v}
    D = x_q.shape[-1]
    source = x_q if kv_from_q else x_kv
    q, k, v = (_split(x @ w_for[name], H, split) for x, name in zip((x_q, source, source), proj))
    divisor = {"head": math.sqrt(D // H), "model": math.sqrt(D), "none": 1.0}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (B, H, T_q, T_kv)
    if mask is not None and mask_mode in ("ok", "inverted"):
        allowed = mask if mask_mode == "ok" else ~mask
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim).nan_to_num(0.0)
    if mask is not None and mask_mode == "after":
        weights = weights * mask
    heads = weights @ v  # (B, H, T_q, d_h)
    cat = _merge(heads, merge)  # (B, T_q, D)
    return (cat @ w_out if w_o else cat), weights


def _weight_mistakes(x_q, x_kv, ws, H, mask):
    """What the mistakes that change the weights return as weights (B, H, T_q, T_kv)."""
    split_message, split_fix = SPLIT_MISTAKES["reshape"]
    cases = [
        (dict(scale="model"), "you scaled the scores by √D (the model width); each head's scores are "
                              "scaled by √d_h = √(D/H), the width of one head's queries",
         "divide by math.sqrt(D // n_heads), which is q.size(-1) after split_heads"),
        (dict(scale="none"), "the scores are not scaled: each head's q kᵀ spreads over about ±√d_h and makes "
                             "the weights too peaked",
         "divide each head's scores by math.sqrt(D // n_heads)"),
        (dict(split="reshape"), "the heads are split without a transpose: " + split_message, split_fix),
        (dict(split="interleave"), *SPLIT_MISTAKES["interleave"]),
        (dict(split="reversed"), *SPLIT_MISTAKES["reversed"]),
        (dict(transpose_w=True), "the weights are applied transposed (x @ w.T); in this course they are "
                                 "(D_in, D_out), applied as x @ w",
         "x_q @ w_q, x_kv @ w_k, x_kv @ w_v — no .T"),
        (dict(softmax_dim=-2), "the softmax ran over the queries (dim=-2); each query's weights must sum "
                               "to 1 over the keys", "torch.softmax(scores, dim=-1)"),
        (dict(proj="kqv"), "w_q and w_k are swapped — the wrong projection matrices: the queries must be "
                           "x_q @ w_q and the keys x_kv @ w_k", "q from w_q, k from w_k"),
        (dict(proj="qqv"), "the keys were projected with w_q, not w_k — the wrong projection matrix: keys "
                           "and queries each have their own", "k = x_kv @ w_k"),
        (dict(proj="kkv"), "the queries were projected with w_k, not w_q — the wrong projection matrix: "
                           "queries and keys each have their own", "q = x_q @ w_q"),
    ]
    if x_q.shape == x_kv.shape:  # otherwise keys from x_q give weights of the wrong shape (see _unpack)
        cases.append((dict(kv_from_q=True), KV_FROM_Q, "k = x_kv @ w_k and v = x_kv @ w_v"))
    if mask is not None:
        before = "scores.masked_fill(~mask, float('-inf')) before the softmax"
        cases += [
            (dict(mask_mode="inverted"), "the mask is inverted: in this course True means *may attend*, but "
                                         "your weights go exactly to the keys the mask blocks", before),
            (dict(mask_mode="ignored"), "the mask is ignored: every key got weight, blocked ones included",
             "pass the mask on to the attention of every head: " + before),
            (dict(mask_mode="after"), "the mask was applied after the softmax: the remaining weights no "
                                      "longer sum to 1", before),
        ]
    with quiet():
        return [(_variant(x_q, x_kv, ws, H, mask, **kw)[1], *told) for kw, *told in cases]


def _output_mistakes(x_q, x_kv, ws, H, mask):
    """What the mistakes after the weights (merge, W_O) return as output (B, T_q, D)."""
    w_q, w_k, w_v, w_o = ws
    merge_message, merge_fix = MERGE_MISTAKES["reshape"]
    cases = [
        (dict(w_o=False), "you return the concatenated heads without the output projection w_o: it mixes "
                          "what the heads found", "merge_heads(heads) @ w_o at the end"),
        (dict(merge="reshape"), "the heads are merged without a transpose: " + merge_message, merge_fix),
        (dict(merge="interleave"), *MERGE_MISTAKES["interleave"]),
        (dict(merge="reversed"), *MERGE_MISTAKES["reversed"]),
        (dict(proj="qkq"), "the values were projected with w_q, not w_v — the wrong projection matrix: "
                           "values have their own", "v = x_kv @ w_v"),
        (dict(proj="qkk"), "the values were projected with w_k, not w_v — the wrong projection matrix: "
                           "values have their own", "v = x_kv @ w_v"),
    ]
    with quiet():
        found = [(_variant(x_q, x_kv, ws, H, mask, **kw)[0], *told) for kw, *told in cases]
        found.append((_variant(x_q, x_kv, (w_q, w_k, w_v, w_o.T), H, mask)[0],
                      "w_o is applied transposed (x @ w_o.T); course weights are (D_in, D_out), applied as "
                      "x @ w", "merged @ w_o, no .T"))
    return found


KV_FROM_Q = ("the keys and values come from x_q: each query must look at the tokens of x_kv (in "
             "cross-attention another sequence), so keys and values are projected from x_kv")


def to_torch_mha(ws, n_heads: int) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(bias=False, batch_first=True)`` holding the course weights (x @ w)."""
    w_q, w_k, w_v, w_o = ws
    D = w_q.shape[0]
    mha = nn.MultiheadAttention(D, n_heads, bias=False, batch_first=True).to(w_q.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))  # nn stores (3D, D) for x @ Wᵀ
        mha.out_proj.weight.copy_(w_o.T)
    return mha.eval()


def _unpack(result, what: str, B: int, H: int, T_q: int, T_kv: int, D: int):
    result = expect_pair(result, what, "output", "weights")
    out, w = as_array(result[0], f"{what} output"), as_array(result[1], f"{what} weights")
    if out.shape == (B, H, T_q, T_kv) and w.shape == (B, T_q, D):
        raise swapped_pair(what, "output", "weights")
    if w.shape == (B, H, T_q, T_q) and T_q != T_kv:
        raise CheckFailed(f"{what}: {KV_FROM_Q} — the weights have T_q = {T_q} columns where there are "
                          f"T_kv = {T_kv} keys", "k = x_kv @ w_k and v = x_kv @ w_v")
    if w.shape == (B, T_q, T_kv):
        raise CheckFailed(f"{what} weights have shape {w.shape}: return every head's weights "
                          f"(B, H, T_q, T_kv) = {(B, H, T_q, T_kv)}, not their average or one head's",
                          "return the weights as the softmax gives them, before any mean over the head axis")
    expect_shape(w, (B, H, T_q, T_kv), f"{what} weights", "one (T_q, T_kv) matrix per batch entry and head")
    expect_shape(out, (B, T_q, D), f"{what} output", "one row of width D per query token")
    return out, w


@with_course_callees("split_heads", "merge_heads")
@hinted
def check_multi_head_attention(multi_head_attention: Callable, seed: int = 0, B: int = 2, T_q: int = 3,
                               T_kv: int = 5, D: int = 12, n_heads: int = 3, verbose: bool = True) -> None:
    """Check a learner's ``multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)``."""
    g = torch.Generator().manual_seed(seed)
    H = n_heads
    x_q = torch.randn(B, T_q, D, generator=g, dtype=torch.float64)
    x_kv = torch.randn(B, T_kv, D, generator=g, dtype=torch.float64)
    ws = tuple(torch.randn(D, D, generator=g, dtype=torch.float64) / math.sqrt(D) for _ in range(4))
    context = f"seed={seed}, B={B}, T_q={T_q}, T_kv={T_kv}, D={D}, H={H}"
    fix = ("q = split_heads(x_q @ w_q, H), k and v likewise from x_kv; attention per head with "
           "scores / √(D/H); output = merge_heads(weights @ v) @ w_o")

    causal = torch.ones(T_q, T_kv, dtype=torch.bool).tril(T_kv - T_q)  # the last T_q keys causally
    holes = torch.rand(T_q, T_kv, generator=g) < 0.6
    holes[0] = False  # query 0 may attend to nothing: its weights and output must be zeros
    holes[1:, 0] = True  # every other query may attend to key 0
    lengths = torch.tensor([T_kv, 2] * B)[:B, None]  # (B, 1): the second sequence has 2 keys
    padding = (torch.arange(T_kv) < lengths)[:, None, None, :]  # (B, 1, 1, T_kv)
    cases = [(None, "without a mask"), (causal, "with a (T_q, T_kv) mask"),
             (holes, "with a mask whose first row allows no key"),
             (padding, "with a (B, 1, 1, T_kv) padding mask")]
    for mask, label in cases:
        inputs = [t.clone() for t in (x_q, x_kv, *ws)]
        what = f"multi_head_attention {label}"
        result = call(multi_head_attention, x_q, x_kv, *ws, H, mask=mask, what=what, fix=fix)
        if any(not torch.equal(a, b) for a, b in zip(inputs, (x_q, x_kv, *ws))):
            raise CheckFailed("multi_head_attention changed one of its inputs in place — the caller's "
                              "tensors are overwritten", "compute new tensors: no +=, no methods ending in _")
        out, w = _unpack(result, what, B, H, T_q, T_kv, D)
        for part, name in zip(result, ("output", "weights")):
            expect_dtype(part, x_q.dtype, f"{what}: the {name}", "the inputs x_q, x_kv and the weights")
        want_out, want_w = ref.multi_head_attention(x_q, x_kv, *ws, H, mask)
        if mask is not None:
            empty = ~mask.expand(B, H, T_q, T_kv).any(-1).numpy()  # (B, H, T_q): no allowed key
            if empty.any() and np.isnan(w[empty]).any():
                raise CheckFailed(f"{what}: a query with no allowed key gets NaN weights — its scores are "
                                  "all -inf, and their softmax is 0/0",
                                  "replace the NaN by 0 after the softmax: .nan_to_num(0.0)")
        _expect(w, want_w, f"{what}: weights", context, fix, _weight_mistakes, x_q, x_kv, ws, H, mask)
        _expect(out, want_out, f"{what}: output", context, "merge_heads(weights @ v) @ w_o",
                _output_mistakes, x_q, x_kv, ws, H, mask, why="the weights are right, so look after them")

    # The same numbers come out of PyTorch's module holding these weights (mask inverted for it),
    # on the queries that have an allowed key: PyTorch gives NaN to the others.
    mha = to_torch_mha(ws, H)
    live = causal.any(-1).numpy()  # (T_q,)
    with torch.no_grad(), quiet():
        torch_out, torch_w = mha(x_q, x_kv, x_kv, attn_mask=ref.torch_mask(causal), need_weights=True,
                                 average_attn_weights=False)
    out, w = _unpack(call(multi_head_attention, x_q, x_kv, *ws, H, mask=causal, what="multi_head_attention",
                          fix=fix),
                     "multi_head_attention", B, H, T_q, T_kv, D)
    expect_close(out[:, live], torch_out.numpy()[:, live], "multi_head_attention against "
                 "nn.MultiheadAttention(bias=False, batch_first=True) with the same weights", context=context,
                 fix=fix)
    expect_close(w[:, :, live], torch_w.numpy()[:, :, live], "multi_head_attention weights against "
                 "nn.MultiheadAttention's per-head weights", context=context, fix=fix)
    passed("multi_head_attention matches the reference and nn.MultiheadAttention (T_q ≠ T_kv), without "
           "a mask, with (T_q, T_kv) and (B, 1, 1, T_kv) masks, and gives zeros to a query with no key",
           verbose)
