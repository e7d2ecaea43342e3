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
    expect_numpy_precision,
    expect_pair,
    expect_shape,
    passed,
    quiet,
    swapped_pair,
    with_course_callees,
)
from .failure import hinted

SOFTMAX_FIX = ("e = np.exp(x - x.max(axis=axis, keepdims=True)); return e / e.sum(axis=axis, keepdims=True) "
               "— exp(-inf) is 0, so -inf entries need nothing special")


def _softmax_mistakes(x: np.ndarray, axis: int) -> list[tuple[np.ndarray, str]]:
    """What the classic softmax mistakes return for ``x`` along ``axis``."""
    with quiet():
        e = np.exp(x - x.max())
        e_axis = np.exp(x - x.max(axis=axis, keepdims=True))
        other = 0 if axis % x.ndim != 0 else x.ndim - 1
        whole = ("you divided by the sum of the whole array: the slices along `axis` must each sum to 1 "
                 "on their own", "sum along `axis` only, keeping it for broadcasting: "
                 "e.sum(axis=axis, keepdims=True)")
        return [
            (x / x.sum(axis=axis, keepdims=True),
             "you normalised x itself, without exponentiating: negative entries give negative "
             "'probabilities', and a sum near 0 blows the rest up",
             "exponentiate first, then normalise: exp(x) / sum(exp(x)), with the maximum subtracted"),
            (ref.softmax(x, axis=other),
             f"you normalised along axis {other}; softmax must run along `axis` (here {axis})",
             "pass `axis` to both the max and the sum (keepdims=True), never a fixed axis"),
            (e / e.sum(), *whole),
            (e_axis / e_axis.sum(), *whole),
            (np.exp(x), "you return exp(x) without dividing by its sum, so the entries do not sum to 1",
             "divide by the sum along `axis`: e / e.sum(axis=axis, keepdims=True)"),
            (np.log(ref.softmax(x, axis=axis)),
             "this is log-softmax: its entries are negative and do not sum to 1",
             "drop the log and return the probabilities exp(x - max) / sum(exp(x - max))"),
        ]


@hinted
def check_softmax(softmax: Callable, seed: int = 0, shape: tuple[int, int] = (4, 6),
                  verbose: bool = True) -> None:
    """Check a learner's ``softmax(x, axis=-1)`` on random inputs, large inputs and ``-inf``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=shape)
    context = f"seed={seed}, shape {shape}"

    original = x.copy()
    got = as_array(call(softmax, x, what="softmax(x)", fix=SOFTMAX_FIX), "softmax(x)")
    if not np.array_equal(x, original):
        raise CheckFailed("softmax changed its input array in place — the caller's x is overwritten",
                          "compute new arrays: x = x - x.max(...) instead of x -= x.max(...), and no out=x")
    expect_shape(got, shape, "softmax(x)", "softmax returns one probability per input entry",
                 "keep the summed axis with keepdims=True, then e / e.sum(...) has the shape of x")
    expect_close(got, ref.softmax(x), "softmax(x) along the last axis",
                 _softmax_mistakes(x, -1), context, SOFTMAX_FIX)

    got0 = call(softmax, x, axis=0, what="softmax(x, axis=0)", fix=SOFTMAX_FIX)
    expect_close(got0, ref.softmax(x, axis=0), "softmax(x, axis=0)",
                 [(ref.softmax(x, axis=-1),
                   "the `axis` argument is ignored: this is the softmax along the last axis",
                   "use `axis` in both the max and the sum: x.max(axis=axis, keepdims=True), "
                   "e.sum(axis=axis, keepdims=True)")]
                 + _softmax_mistakes(x, 0), context, SOFTMAX_FIX)

    vec = rng.normal(size=shape[1])
    expect_close(call(softmax, vec, what="softmax of a 1-D array", fix=SOFTMAX_FIX), ref.softmax(vec),
                 "softmax of a 1-D array", _softmax_mistakes(vec, -1), context, SOFTMAX_FIX)

    # Large logits: exp(1000) overflows float64, so only a max-shifted softmax survives.
    big = np.stack([1000.0 + x[0], -1000.0 + x[1]])
    got_big = as_array(call(softmax, big, what="softmax of logits near ±1000", fix=SOFTMAX_FIX),
                       "softmax of logits near ±1000")
    want_big = ref.softmax(big)
    if got_big.shape == want_big.shape and not np.all(np.isfinite(got_big)):
        if np.all(np.isfinite(got_big[0])):
            raise CheckFailed(
                "softmax of logits near -1000 gives NaN: you subtracted the maximum of the whole "
                "array; a row far below that maximum underflows to exp(-2000) = 0 and gives 0/0",
                "subtract each row's own maximum: np.max(x, axis=axis, keepdims=True)")
        raise CheckFailed("softmax of logits near +1000 gives NaN or inf: exp(1000) overflows float64",
                          "subtract the maximum along `axis` before exponentiating — softmax(x) equals "
                          "softmax(x - c) for any constant c, and exp of a number ≤ 0 cannot overflow")
    expect_close(got_big, want_big, "softmax of logits near ±1000", context=context, fix=SOFTMAX_FIX)

    # -inf means "impossible": weight exactly 0, the rest renormalised.
    masked = x.copy()
    masked[:, ::2] = -np.inf
    got_inf = as_array(call(softmax, masked, what="softmax with -inf entries", fix=SOFTMAX_FIX),
                       "softmax with -inf entries")
    expect_close(got_inf, ref.softmax(masked), "softmax with -inf entries", context=context,
                 fix=SOFTMAX_FIX)
    passed("softmax matches the reference on random inputs, along both axes, for logits of "
           "±1000 and with -inf entries", verbose)


def _unpack(result, what: str, n_q: int, n_k: int, d_v: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``(output, weights)`` and check both shapes, naming a swapped or transposed result."""
    result = expect_pair(result, what, "output", "weights")
    output, weights = as_array(result[0], f"{what} output"), as_array(result[1], f"{what} weights")
    if output.shape == (n_q, n_k) and weights.shape == (n_q, d_v) and (n_k != d_v):
        raise swapped_pair(what, "output", "weights")
    if weights.shape == (n_k, n_q) and n_k != n_q:
        raise CheckFailed(f"{what} weights have shape {weights.shape}, expected ({n_q}, {n_k}): "
                          "row i must hold query i's weights over the keys",
                          "scores = q @ k.T, not k @ q.T")
    expect_shape(weights, (n_q, n_k), f"{what} weights", "one row per query, one column per key",
                 "scores = q @ k.T is (n_q, n_k), and the softmax keeps that shape")
    expect_shape(output, (n_q, d_v), f"{what} output", "one row per query with d_v columns",
                 "output = weights (n_q, n_k) @ v (n_k, d_v)")
    return output, weights


def _weight_mistakes(q: np.ndarray, k: np.ndarray, d_v: int, d_model: int | None = None):
    """What the classic scoring mistakes give as weights for queries q and keys k."""
    d_k = q.shape[1]
    raw = q @ k.T
    found = [
        (ref.softmax(raw), "the scores are not divided by √d_k: these are softmax(q kᵀ), whose scores "
         "spread over about ±√d_k and make the weights too peaked",
         "divide the scores by np.sqrt(d_k) before the softmax, with d_k = q.shape[-1]"),
        (ref.softmax(raw / d_k), "you divided the scores by d_k; that shrinks them √d_k times too much "
         "and flattens the weights", "divide by the square root: np.sqrt(d_k)"),
        (ref.softmax(raw / math.sqrt(d_k), axis=0),
         "the softmax ran over the query axis (axis 0): each row — one query — must sum to 1 "
         "over the keys", "softmax(scores, axis=-1)"),
        (ref.softmax(raw * math.sqrt(d_k)), "you multiplied the scores by √d_k; that makes the spread "
         "larger, not smaller", "divide the scores by np.sqrt(d_k)"),
        (ref.softmax((raw / math.sqrt(d_k)).ravel()).reshape(raw.shape),
         "the softmax ran over the whole score matrix: all the weights together sum to 1, but each row — "
         "one query — must sum to 1 on its own", "softmax(scores, axis=-1)"),
    ]
    if d_v != d_k:
        found.append((ref.softmax(raw / math.sqrt(d_v)),
                      "you scaled by √d_v; the scale is √d_k, the width of queries and keys",
                      "d_k = q.shape[-1] (or k.shape[-1]), not v.shape[-1]"))
    if d_model is not None and d_model != d_k:
        found.append((ref.softmax(raw / math.sqrt(d_model)),
                      "you scaled by √d_model; the scale is √d_k, the width of the projected queries",
                      "take d_k from q = x @ w_q after the projection: q.shape[-1], not x.shape[-1]"))
    return found


@with_course_callees("softmax")
@hinted
def check_attention(attention: Callable, seed: int = 0, n_q: int = 3, n_k: int = 5, d_k: int = 4,
                    d_v: int = 2, verbose: bool = True) -> None:
    """Check a learner's ``attention(q, k, v)`` against the reference on random inputs."""
    rng = np.random.default_rng(seed)
    context = f"seed={seed}, n_q={n_q}, n_k={n_k}, d_k={d_k}, d_v={d_v}"
    fix = ("with tokens as rows: scores = q @ k.T (n_q, n_k), output = weights @ v (n_q, d_v); "
           "v.T has shape (d_v, n_k) and does not fit")

    def run(q, k, v, label, tol=None):
        originals = [a.copy() for a in (q, k, v)]
        result = call(attention, q, k, v, what=f"attention(q, k, v) {label}", fix=fix)
        if any(not np.array_equal(a, b) for a, b in zip((q, k, v), originals)):
            raise CheckFailed("attention changed q, k or v in place — the caller's arrays are overwritten",
                              "compute new arrays: q = q / …, not q /= …")
        out, w = _unpack(result, "attention", q.shape[0], k.shape[0], v.shape[1])
        want_out, want_w = ref.attention(q, k, v)
        close = {} if tol is None else {"rtol": tol, "atol": tol}
        expect_close(w, want_w, f"attention weights {label}", _weight_mistakes(q, k, v.shape[1]),
                     context, fix, **close)
        mistakes = []
        if v.shape[0] == v.shape[1]:  # only then does weights @ v.T run at all
            mistakes.append((want_w @ v.T, "you multiplied the weights by v.T; with tokens as rows, each "
                             "output row must mix the rows of v, the values", "output = weights @ v"))
        expect_close(out, want_out, f"attention output {label}", mistakes, context,
                     fix="output = weights @ v", why="the weights are right, so look at the last step",
                     **close)
        for name, returned in zip(("output", "weights"), result):  # as returned, before as_array
            expect_numpy_precision(returned, (q, k, v), f"attention {name} {label}")

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
@hinted
def check_self_attention(self_attention: Callable, seed: int = 0, n: int = 4, d_model: int = 6,
                         d_k: int = 3, d_v: int = 5, verbose: bool = True) -> None:
    """Check a learner's ``self_attention(x, w_q, w_k, w_v)`` against the reference."""
    rng = np.random.default_rng(seed)
    context = f"seed={seed}, n={n}, d_model={d_model}, d_k={d_k}, d_v={d_v}"
    x = rng.normal(size=(n, d_model))
    w_q, w_k = rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))
    w_v = rng.normal(size=(d_model, d_v))
    fix = ("project first — q = x @ w_q, k = x @ w_k, v = x @ w_v — then call attention(q, k, v); "
           "weights are applied as x @ w, never w @ x or x @ w.T")
    result = call(self_attention, x, w_q, w_k, w_v, what="self_attention(x, w_q, w_k, w_v)", fix=fix)
    if (isinstance(result, (tuple, list)) and len(result) == 2 and d_v not in (d_k, n)
            and np.shape(result[0]) == (n, d_k)):
        raise CheckFailed("self_attention output: the values were projected with w_q or w_k — the wrong "
                          "projection matrix: the output is as wide as the queries and keys (d_k), while "
                          "the values have their own matrix w_v, of width d_v", "v = x @ w_v")
    out, w = _unpack(result, "self_attention", n, n, d_v)
    want_out, want_w = ref.self_attention(x, w_q, w_k, w_v)
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    mistakes = [(ref.attention(k, q, v)[1],
                 "queries and keys are swapped: you passed the keys where attention expects the queries",
                 "attention(q, k, v) with q = x @ w_q first and k = x @ w_k second"),
                (ref.attention(q, q, v)[1],
                 "the keys were projected with w_q, not w_k — the wrong projection matrix: a token's key "
                 "says what it offers and its query what it looks for, so each has its own matrix",
                 "k = x @ w_k"),
                (ref.attention(k, k, v)[1],
                 "the queries were projected with w_k, not w_q — the wrong projection matrix: a token's "
                 "query says what it looks for and its key what it offers, so each has its own matrix",
                 "q = x @ w_q"),
                (want_w.T, "the weights are transposed: row i must hold query i's weights over the keys",
                 "return the weights as attention returns them, without .T")]
    expect_close(w, want_w, "self_attention weights", mistakes + _weight_mistakes(q, k, d_v, d_model),
                 context, fix)
    wrong_values = [(want_w @ (x @ w), f"the values were projected with {name}, not w_v — the wrong "
                     "projection matrix: a token's value is what it hands over, with a matrix of its own",
                     "v = x @ w_v") for name, w in (("w_q", w_q), ("w_k", w_k)) if w.shape == w_v.shape]
    expect_close(out, want_out, "self_attention output", wrong_values, context=context,
                 fix="v = x @ w_v, output = weights @ v", why="the weights are right, so look at the values")
    passed("self_attention matches the reference with d_model, d_k and d_v all different", verbose)
