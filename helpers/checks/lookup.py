"""Checks for lesson 02 (attention as a lookup): ``softmax``, ``attention``, ``self_attention``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import attention as ref
from .core import (
    RTOL,
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_shape,
    passed,
    quiet,
    with_course_callees,
)


def _softmax_mistakes(x: np.ndarray, axis: int) -> list[tuple[np.ndarray, str]]:
    """What the classic softmax mistakes return for ``x`` along ``axis``."""
    with quiet():
        e = np.exp(x - x.max())
        e_axis = np.exp(x - x.max(axis=axis, keepdims=True))
        other = 0 if axis % x.ndim != 0 else x.ndim - 1
        return [
            (x / x.sum(axis=axis, keepdims=True),
             "you normalised x itself — exponentiate first: exp(x) / sum(exp(x))"),
            (ref.softmax(x, axis=other),
             f"you normalised along axis {other}; softmax must run along `axis` (here {axis})"),
            (e / e.sum(),
             "you divided by the sum of the whole array — sum along `axis` only (keepdims=True)"),
            (e_axis / e_axis.sum(),
             "you divided by the sum of the whole array — sum along `axis` only (keepdims=True)"),
            (np.exp(x), "you return exp(x) without dividing by its sum"),
            (np.log(ref.softmax(x, axis=axis)),
             "this is log-softmax; return the probabilities themselves"),
        ]


def check_softmax(softmax: Callable, seed: int = 0, shape: tuple[int, int] = (4, 6),
                  verbose: bool = True) -> None:
    """Check a learner's ``softmax(x, axis=-1)`` on random inputs, large inputs and ``-inf``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=shape)
    context = f"seed={seed}, shape {shape}"

    original = x.copy()
    got = as_array(call(softmax, x, what="softmax(x)"), "softmax(x)")
    if not np.array_equal(x, original):
        raise CheckFailed("softmax changed its input array in place — compute on a copy "
                          "(x = x - x.max(...) instead of x -= x.max(...))")
    expect_shape(got, shape, "softmax(x)", "softmax returns one probability per input entry")
    expect_close(got, ref.softmax(x), "softmax(x) along the last axis",
                 _softmax_mistakes(x, -1), context)

    got0 = call(softmax, x, axis=0, what="softmax(x, axis=0)")
    expect_close(got0, ref.softmax(x, axis=0), "softmax(x, axis=0)",
                 [(ref.softmax(x, axis=-1),
                   "the `axis` argument is ignored — use it in both the max and the sum")]
                 + _softmax_mistakes(x, 0), context)

    vec = rng.normal(size=shape[1])
    expect_close(call(softmax, vec, what="softmax of a 1-D array"), ref.softmax(vec),
                 "softmax of a 1-D array", _softmax_mistakes(vec, -1), context)

    # Large logits: exp(1000) overflows float64, so only a max-shifted softmax survives.
    big = np.stack([1000.0 + x[0], -1000.0 + x[1]])
    got_big = as_array(call(softmax, big, what="softmax of logits near ±1000"),
                       "softmax of logits near ±1000")
    want_big = ref.softmax(big)
    if got_big.shape == want_big.shape and not np.all(np.isfinite(got_big)):
        if np.all(np.isfinite(got_big[0])):
            raise CheckFailed(
                "softmax of logits near -1000 gives NaN: you subtracted the maximum of the whole "
                "array; subtract each row's own maximum (np.max(x, axis=axis, keepdims=True))")
        raise CheckFailed("softmax of logits near +1000 gives NaN or inf: exp(1000) overflows — "
                          "subtract the maximum along `axis` before exponentiating")
    expect_close(got_big, want_big, "softmax of logits near ±1000", context=context)

    # -inf means "impossible": weight exactly 0, the rest renormalised.
    masked = x.copy()
    masked[:, ::2] = -np.inf
    got_inf = as_array(call(softmax, masked, what="softmax with -inf entries"),
                       "softmax with -inf entries")
    expect_close(got_inf, ref.softmax(masked), "softmax with -inf entries", context=context)
    passed("softmax matches the reference on random inputs, along both axes, for logits of "
           "±1000 and with -inf entries", verbose)


def _unpack(result, what: str, n_q: int, n_k: int, d_v: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``(output, weights)`` and check both shapes, naming a swapped or transposed result."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CheckFailed(f"{what} must return a pair (output, weights), got {type(result).__name__}")
    output, weights = as_array(result[0], f"{what} output"), as_array(result[1], f"{what} weights")
    if output.shape == (n_q, n_k) and weights.shape == (n_q, d_v) and (n_k != d_v):
        raise CheckFailed(f"{what} returned (weights, output); return (output, weights)")
    if weights.shape == (n_k, n_q) and n_k != n_q:
        raise CheckFailed(f"{what} weights have shape {weights.shape}, expected ({n_q}, {n_k}): "
                          "row i holds query i's weights over the keys — q @ k.T, not k @ q.T")
    expect_shape(weights, (n_q, n_k), f"{what} weights", "one row per query, one column per key")
    expect_shape(output, (n_q, d_v), f"{what} output",
                 "one row per query with d_v columns: weights (n_q, n_k) @ v (n_k, d_v)")
    return output, weights


def _weight_mistakes(q: np.ndarray, k: np.ndarray, d_v: int, d_model: int | None = None):
    """What the classic scoring mistakes give as weights for queries q and keys k."""
    d_k = q.shape[1]
    raw = q @ k.T
    found = [
        (ref.softmax(raw), "the scores are not divided by √d_k: these are softmax(q kᵀ) — divide the "
         "scores by √d_k before the softmax"),
        (ref.softmax(raw / d_k), "you divided the scores by d_k; divide by √d_k (np.sqrt(d_k))"),
        (ref.softmax(raw / math.sqrt(d_k), axis=0),
         "the softmax ran over the query axis (axis 0): each row — one query — must sum to 1 "
         "over the keys (axis=-1)"),
        (ref.softmax(raw * math.sqrt(d_k)), "you multiplied the scores by √d_k; divide instead"),
    ]
    if d_v != d_k:
        found.append((ref.softmax(raw / math.sqrt(d_v)),
                      "you scaled by √d_v; the scale is √d_k, the width of queries and keys"))
    if d_model is not None and d_model != d_k:
        found.append((ref.softmax(raw / math.sqrt(d_model)),
                      "you scaled by √d_model; scale by √d_k, the width of x @ w_q"))
    return found


@with_course_callees("softmax")
def check_attention(attention: Callable, seed: int = 0, n_q: int = 3, n_k: int = 5, d_k: int = 4,
                    d_v: int = 2, verbose: bool = True) -> None:
    """Check a learner's ``attention(q, k, v)`` against the reference on random inputs."""
    rng = np.random.default_rng(seed)
    context = f"seed={seed}, n_q={n_q}, n_k={n_k}, d_k={d_k}, d_v={d_v}"
    hint = ("with tokens as rows: scores = q @ k.T (n_q, n_k), output = weights @ v (n_q, d_v); "
            "v.T has shape (d_v, n_k) and does not fit")

    def run(q, k, v, label, tol=None):
        originals = [a.copy() for a in (q, k, v)]
        result = call(attention, q, k, v, what=f"attention(q, k, v) {label}", hint=hint)
        if any(not np.array_equal(a, b) for a, b in zip((q, k, v), originals)):
            raise CheckFailed("attention changed q, k or v in place — compute new arrays instead")
        out, w = _unpack(result, "attention", q.shape[0], k.shape[0], v.shape[1])
        want_out, want_w = ref.attention(q, k, v)
        close = {} if tol is None else {"rtol": tol, "atol": tol}
        expect_close(w, want_w, f"attention weights {label}", _weight_mistakes(q, k, v.shape[1]),
                     context, **close)
        mistakes = []
        if v.shape[0] == v.shape[1]:  # only then does weights @ v.T run at all
            mistakes.append((want_w @ v.T, "you multiplied the weights by v.T; with tokens as "
                                           "rows the output is weights @ v"))
        expect_close(out, want_out, f"attention output {label}", mistakes, context,
                     hint="the weights are right, so look at the last step: output = weights @ v", **close)

    q, k, v = (rng.normal(size=s) for s in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    run(q, k, v, "on random inputs")

    # n_k == d_v: here weights @ v.T runs without an error but gives the wrong answer.
    sq = (rng.normal(size=(n_q, d_k)), rng.normal(size=(d_v + 1, d_k)), rng.normal(size=(d_v + 1, d_v + 1)))
    run(*sq, "with n_k = d_v")

    # Large scores: a softmax without the max shift overflows. A float32 score s is only known to
    # about s · 1.2e-7, and the weights carry that error: the tolerance grows with the scores.
    big_q, big_k = q * 40, k * 40
    largest = float(np.abs(big_q @ big_k.T).max()) / math.sqrt(d_k)
    run(big_q, big_k, v, "with scores in the thousands",
        tol=max(RTOL, 8 * float(np.finfo(np.float32).eps) * largest))
    passed("attention matches the reference on random inputs (n_q ≠ n_k, d_k ≠ d_v), "
           "with n_k = d_v and with very large scores", verbose)


@with_course_callees("attention", "softmax")
def check_self_attention(self_attention: Callable, seed: int = 0, n: int = 4, d_model: int = 6,
                         d_k: int = 3, d_v: int = 5, verbose: bool = True) -> None:
    """Check a learner's ``self_attention(x, w_q, w_k, w_v)`` against the reference."""
    rng = np.random.default_rng(seed)
    context = f"seed={seed}, n={n}, d_model={d_model}, d_k={d_k}, d_v={d_v}"
    x = rng.normal(size=(n, d_model))
    w_q, w_k = rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))
    w_v = rng.normal(size=(d_model, d_v))
    hint = ("project first — q = x @ w_q, k = x @ w_k, v = x @ w_v — then call attention(q, k, v); "
            "weights are applied as x @ w, never w @ x or x @ w.T")
    result = call(self_attention, x, w_q, w_k, w_v, what="self_attention(x, w_q, w_k, w_v)",
                  hint=hint)
    out, w = _unpack(result, "self_attention", n, n, d_v)
    want_out, want_w = ref.self_attention(x, w_q, w_k, w_v)
    q, k = x @ w_q, x @ w_k
    mistakes = [(ref.attention(k, q, x @ w_v)[1],
                 "queries and keys are swapped: queries come from x @ w_q, keys from x @ w_k"),
                (want_w.T, "the weights are transposed: row i holds query i's weights over the keys")]
    expect_close(w, want_w, "self_attention weights", mistakes + _weight_mistakes(q, k, d_v, d_model),
                 context)
    expect_close(out, want_out, "self_attention output", context=context,
                 hint="the weights are right, so look at the values: v = x @ w_v, output = weights @ v")
    passed("self_attention matches the reference with d_model, d_k and d_v all different", verbose)
