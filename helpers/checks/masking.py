"""Checks for lesson 04 (masking): ``causal_mask``, ``padding_mask``, ``masked_attention``,
``causal_attention_with_cache``, ``attention_matrix_bytes``.

Masks are compared entry by entry with the reference; attention results on random float64
inputs with tolerances. Each known mistake — the diagonal left out, the mask inverted or applied
after the softmax, NaN or uniform weights in a fully masked row, a cache that sees the future —
is computed, and named when the learner's result matches it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from .. import masking as ref
from .core import (
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_pair,
    expect_returned,
    expect_shape,
    passed,
    quiet,
    single_output,
    with_course_callees,
)
from .failure import hinted

INF = float("inf")
ATTENTION_FIX = ("scores = q @ k.transpose(-2, -1) / √d_k (…, n_q, n_k); blocked scores -> -inf where "
                  "the mask is False (mask=None: nothing blocked); softmax over the keys (dim=-1); output = "
                  "weights @ v. On batched tensors use .transpose(-2, -1): .T reverses every dimension")

# ----------------------------------------------------------------------------- masks


def _bool_mask(result, what: str, shape: tuple[int, ...], shape_mistakes: dict | None = None) -> torch.Tensor:
    """The learner's mask as a torch bool tensor of ``shape``, or a CheckFailed saying what is off."""
    expect_returned(result, what, "the mask")
    torch_fix = "build it with torch: torch.ones(…, dtype=torch.bool), torch.arange(…) < …"
    if isinstance(result, np.ndarray):
        raise CheckFailed(f"{what} is a NumPy array; the masks of this lesson are torch tensors",
                          torch_fix)
    if not isinstance(result, torch.Tensor):
        raise CheckFailed(f"{what} should be a torch bool tensor, got {type(result).__name__}",
                          torch_fix)
    got_shape = tuple(result.shape)
    if got_shape != tuple(shape):
        message = (shape_mistakes or {}).get(got_shape, "")
        raise CheckFailed(f"{what} has shape {got_shape}, expected {tuple(shape)}"
                          + (f" — {message}" if message else ""),
                          "size each dimension from the arguments (n, max_len, len(lengths)), "
                          "not from the data")
    if result.dtype != torch.bool:
        raise CheckFailed(f"{what} has dtype {result.dtype}; masks are boolean (True = may attend), and "
                          "masked_fill and ~ treat numbers differently",
                          "create it with dtype=torch.bool, compare with < or <=, or finish with .bool()")
    return result


def _expect_mask(got: torch.Tensor, want: torch.Tensor, what: str, mistakes: list[tuple], rule: str,
                 fix: str) -> None:
    """Fail unless ``got`` equals ``want``; name the mistake whose mask ``got`` equals.

    ``mistakes`` holds ``(mask, message, fix)``; ``fix`` is for a mask no known mistake gives.
    """
    if torch.equal(got, want):
        return
    for result, message, own_fix in mistakes:
        if torch.equal(got, result):
            raise CheckFailed(f"{what}: {message}", own_fix)
    idx = tuple(int(i) for i in torch.nonzero(got != want)[0])
    raise CheckFailed(f"{what} is wrong at index {idx}: you return {bool(got[idx])}, expected "
                      f"{bool(want[idx])} — {rule}", fix)


@hinted
def check_causal_mask(causal_mask: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``causal_mask(n)``: bool (n, n), True where key j ≤ query i."""
    rng = np.random.default_rng(seed)
    for n in (4, 1, int(rng.integers(5, 13))):
        what = f"causal_mask({n})"
        fix = "the lower triangle with its diagonal: torch.ones(n, n, dtype=torch.bool).tril()"
        got = _bool_mask(call(causal_mask, n, what=what, fix=fix), what, (n, n))
        ones = torch.ones(n, n, dtype=torch.bool)
        mistakes = [
            (ones.tril(-1), "the diagonal is blocked, but a position may attend to itself (True where key "
                            "j ≤ query i)", "torch.tril with the default diagonal=0, or j <= i, not j < i"),
            (ones.tril(1), "one future key leaks in: True at key j = i + 1 lets each position see the next "
                           "token", "torch.tril with the default diagonal=0: True where j ≤ i"),
            (ones.triu(), "this is the upper triangle (True where key j ≥ query i): each position would "
                          "see the future instead of the past", "the lower triangle: torch.tril"),
            (ones.triu(1), "True marks the blocked (future) keys, but in this course True means *may "
                           "attend*",
             "return the opposite of your mask: the lower triangle with its diagonal"),
            (ones, "every entry is True: nothing is blocked, so each position sees the future",
             "keep only keys j ≤ query i: torch.tril"),
            (~ones, "every entry is False: nothing may be attended to",
             "True where key j ≤ query i: torch.tril"),
        ]
        _expect_mask(got, ref.causal_mask(n), what, mistakes,
                     "row i is query i, column j is key j; True where j ≤ i", fix)
    passed("causal_mask is a bool (n, n) lower triangle with its diagonal, for n = 1 and larger", verbose)


@hinted
def check_padding_mask(padding_mask: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``padding_mask(lengths, max_len)`` with a list and with tensors of lengths."""
    rng = np.random.default_rng(seed)
    max_len = int(rng.integers(6, 10))
    lengths = rng.integers(1, max_len, size=4).tolist()
    lengths[int(rng.integers(4))] = max_len  # one sequence fills the batch
    cases = [
        (lengths, max_len, "lengths as a list"),
        (torch.tensor(lengths), max_len + 2, "lengths as a tensor, max_len longer than every sequence"),
        (torch.tensor([0, 2, 5], dtype=torch.int32), 5, "an int32 tensor of lengths with a length 0"),
    ]
    for lens, width, label in cases:
        what = f"padding_mask({list(map(int, lens))}, max_len={width}) ({label})"
        fix = ("torch.arange(max_len)[None, :] < torch.as_tensor(lengths)[:, None] — positions (1, max_len) "
               "against lengths (B, 1); torch.as_tensor accepts a list and a tensor alike")
        result = call(padding_mask, lens, width, what=what, fix=fix)
        n_seq, longest = len(lens), int(max(lens))
        got = _bool_mask(result, what, (n_seq, width), {
            (width, n_seq): "transposed: one row per sequence, one column per position (B, max_len)",
            (n_seq, longest): "it has max(lengths) columns; it must have max_len columns even when "
                              "every sequence is shorter",
        })
        pos = torch.arange(width)[None, :]  # (1, max_len)
        length = torch.as_tensor(lens, dtype=torch.int64)[:, None]  # (B, 1)
        mistakes = [
            (pos <= length, "one position too many: positions 0 … length−1 hold real tokens, and position "
                            "length is already padding", "True where position < length, not ≤"),
            (pos >= length, "True marks the padding, but in this course True means *may attend* (a real "
                            "token)", "True where position < length"),
            (pos < length - 1, "one position too few: a sequence of length L has real tokens at 0 … L−1, "
                               "the last one included", "True where position < length"),
        ]
        _expect_mask(got, ref.padding_mask(lens, width), what, mistakes,
                     "row b is sequence b; True at positions < lengths[b]", fix)
    passed("padding_mask is a bool (B, max_len) mask of the real tokens, for lengths as a list or a "
           "tensor (length 0 included)", verbose)


# ----------------------------------------------------------------------------- masked attention


def _weights(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax of scores with blocked entries at -inf; fully masked rows -> 0."""
    return torch.softmax(scores.masked_fill(~mask, -INF), dim=dim).nan_to_num(0.0)


def _weight_mistakes(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> list:
    """What the classic mistakes give as weights for q (..., n_q, d_k), k (..., n_k, d_k) and mask."""
    d_k = q.size(-1)
    raw = q @ k.transpose(-2, -1)  # (..., n_q, n_k)
    scaled = raw / math.sqrt(d_k)
    scale = [
        ("the scores are not divided by √d_k: these are softmax(q kᵀ), whose scores spread over about "
         "±√d_k and make the weights too peaked", "divide the scores by math.sqrt(d_k), d_k = q.size(-1)"),
        ("you divided the scores by d_k; that shrinks them √d_k times too much and flattens the weights",
         "divide by the square root: math.sqrt(d_k)"),
        ("the softmax ran over the query axis (dim=-2); each query's weights must sum to 1 over the keys",
         "torch.softmax(scores, dim=-1)"),
    ]
    if mask is None:
        return [(torch.softmax(raw, -1), *scale[0]), (torch.softmax(raw / d_k, -1), *scale[1]),
                (torch.softmax(scaled, -2), *scale[2])]
    before = "set the blocked *scores* to -inf before the softmax: scores.masked_fill(~mask, float('-inf'))"
    return [
        (_weights(scaled, ~mask),
         "the mask is inverted: True means *may attend*, but your weights go exactly to the keys the mask "
         "blocks", "block where the mask is False: scores.masked_fill(~mask, float('-inf')), not "
                   "masked_fill(mask, …)"),
        (torch.softmax(scaled, -1), "the mask is ignored: every key got weight, blocked ones included",
         before),
        (torch.softmax(scaled, -1) * mask,
         "the mask was applied after the softmax: the rows no longer sum to 1, and the blocked keys still "
         "took their share of the normaliser (the future leaks in)", before),
        (torch.softmax(scaled, -1).masked_fill(~mask, -INF),
         "-inf was written into the weights after the softmax: weights must be probabilities, and the "
         "blocked keys still took their share of the normaliser", before),
        (torch.softmax(scaled * mask, -1),
         "the blocked scores were set to 0, not -inf (scores * mask): exp(0) = 1 still gives them weight",
         "fill the blocked scores with float('-inf'): scores.masked_fill(~mask, float('-inf'))"),
        (_weights(raw, mask), *scale[0]),
        (_weights(raw / d_k, mask), *scale[1]),
        (_weights(scaled, mask, dim=-2), *scale[2]),
    ]


def _fully_masked_rows(out: np.ndarray, w: np.ndarray, dead: np.ndarray, what: str) -> None:
    """Rows of queries with no allowed key must hold zero weights and a zero output."""
    w_dead, out_dead = w[dead], out[dead]  # (m, n_k), (m, d_v)
    if not (np.all(np.isfinite(w_dead)) and np.all(np.isfinite(out_dead))):
        raise CheckFailed(
            f"{what}: a fully masked row (a query with no allowed key) gives NaN — the softmax of a row of "
            "-inf is 0/0. The course convention is all-zero weights and a zero output",
            "weights.nan_to_num(0.0) after the softmax, or zero the rows where mask.any(-1) is False")
    n_k = w.shape[-1]
    if np.allclose(w_dead, 1.0 / n_k):
        raise CheckFailed(
            f"{what}: a fully masked row got equal weights 1/n_k = {1 / n_k:.3g}. With a large negative "
            "number (like -1e9) instead of -inf, a query with no allowed key spreads its weight evenly over "
            "keys it may not see; it must get all-zero weights",
            "fill with float('-inf') and finish with weights.nan_to_num(0.0), or zero the rows where "
            "mask.any(-1) is False")
    if not (np.allclose(w_dead, 0.0) and np.allclose(out_dead, 0.0)):
        raise CheckFailed(f"{what}: a fully masked row must give all-zero weights and a zero output; one "
                          f"of yours has weights {np.round(w_dead[0], 4)} and output "
                          f"{np.round(out_dead[0], 4)}",
                          "after the softmax, weights.nan_to_num(0.0) turns the 0/0 of such a row into "
                          "zeros, and weights @ v is then zero too")


def _pair(result, what: str) -> tuple[np.ndarray, np.ndarray]:
    output, weights = expect_pair(result, what, "output", "weights")
    return as_array(output, f"{what} output"), as_array(weights, f"{what} weights")


def _run_masked(masked_attention: Callable, q, k, v, mask, label: str, context: str) -> None:
    """Call the learner's masked_attention once and compare with the reference."""
    what = f"masked_attention {label}"
    args = (q, k, v) if mask is None else (q, k, v, mask)
    originals = [a.clone() for a in args]
    result = call(masked_attention, *args, what=what, fix=ATTENTION_FIX)
    if any(not torch.equal(a, b) for a, b in zip(args, originals)):
        raise CheckFailed(f"{what} changed q, k, v or the mask in place — the caller's tensors are "
                          "overwritten",
                          "use masked_fill, not masked_fill_, and compute new tensors")
    out, w = _pair(result, what)
    want_out, want_w = ref.masked_attention(q, k, v, mask)
    expect_shape(w, want_w.shape, f"{what} weights", "one row per query and one column per key, batch "
                 "dimensions kept",
                 "q @ k.transpose(-2, -1); .T reverses every dimension of a batched tensor")
    expect_shape(out, want_out.shape, f"{what} output", "one row per query, d_v columns",
                 "weights (…, n_q, n_k) @ v (…, n_k, d_v)")
    if mask is not None:
        dead = np.broadcast_to((~mask).all(-1).numpy(), want_w.shape[:-1])  # queries with no allowed key
        if dead.any():
            _fully_masked_rows(out, w, dead, what)
    expect_close(w, want_w, f"{what}: weights", _weight_mistakes(q, k, mask), context, ATTENTION_FIX)
    mistakes = []
    if v.size(-2) == v.size(-1):  # only then does weights @ vᵀ run at all
        mistakes.append((want_w @ v.transpose(-2, -1),
                         "you multiplied the weights by vᵀ; each output row must mix the rows of v, the "
                         "values",
                         "output = weights @ v"))
    expect_close(out, want_out, f"{what}: output", mistakes, context, fix="output = weights @ v",
                 why="the weights are right, so look at the last step")


def _random_mask(g: torch.Generator, n_q: int, n_k: int, dead_rows=()) -> torch.Tensor:
    """Bool (n_q, n_k): every row has an allowed and a blocked key, except ``dead_rows`` (all blocked)."""
    mask = torch.rand(n_q, n_k, generator=g) < 0.5
    rows = torch.arange(n_q)
    allowed = torch.randint(n_k, (n_q,), generator=g)
    blocked = (allowed + torch.randint(1, n_k, (n_q,), generator=g)) % n_k  # another key of the same row
    mask[rows, allowed], mask[rows, blocked] = True, False
    mask[list(dead_rows)] = False
    return mask


@hinted
def check_masked_attention(masked_attention: Callable, seed: int = 0, batch: tuple[int, ...] = (2, 3),
                           n_q: int = 4, n_k: int = 6, d_k: int = 5, d_v: int = 3,
                           verbose: bool = True) -> None:
    """Check a learner's ``masked_attention(q, k, v, mask=None)`` without, with and with dead rows."""
    if n_k < 2 or n_q < 1:
        raise ValueError("the check needs n_k ≥ 2 (an allowed and a blocked key per row) and n_q ≥ 1")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, n_q, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(*batch, n_k, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(*batch, n_k, d_v, generator=g, dtype=torch.float64)
    context = f"seed={seed}, q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"

    _run_masked(masked_attention, q, k, v, None, "without a mask", context)
    mask = _random_mask(g, n_q, n_k)
    _run_masked(masked_attention, q, k, v, mask, f"with a random ({n_q}, {n_k}) mask", context)
    if batch:
        lengths = torch.randint(1, n_k + 1, (batch[0],), generator=g)
        lengths[0] = int(torch.randint(1, n_k, (1,), generator=g))  # one sequence at least is padded
        keys = ref.padding_mask(lengths, n_k).reshape(batch[0], *[1] * len(batch), n_k)  # (B, 1, …, 1, n_k)
        _run_masked(masked_attention, q, k, v, keys, f"with a padding mask of shape {tuple(keys.shape)}",
                    context)
    dead = _random_mask(g, n_q, n_k, dead_rows=range(0, n_q, 2))
    _run_masked(masked_attention, q, k, v, dead, "with fully masked rows", context)
    passed("masked_attention matches the reference without a mask, with a random mask, with a broadcast "
           "padding mask, and gives zeros (not NaN) for fully masked rows", verbose)


# ----------------------------------------------------------------------------- decoding with a cache


class _FullScoreSpy(TorchFunctionMode):
    """Notes whether any floating tensor of shape (…, n, n) is built while the mode is active."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.seen = n, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if (isinstance(t, torch.Tensor) and t.is_floating_point() and t.ndim >= 2
                    and tuple(t.shape[-2:]) == (self.n, self.n)):
                self.seen = True
        return out


def _cache_output(result, what: str, shape: tuple[int, ...]) -> np.ndarray:
    single_output(result, what, "(…, n, d_v)")
    out = as_array(result, what)
    expect_shape(out, shape, what, "one output row per query position",
                 "collect the n step outputs and join them along the token axis: torch.cat(outputs, dim=-2)")
    return out


@with_course_callees("masked_attention", "causal_mask")
@hinted
def check_causal_attention_with_cache(causal_attention_with_cache: Callable, seed: int = 0,
                                      batch: tuple[int, ...] = (2, 3), n: int = 6, d_k: int = 4,
                                      d_v: int = 5, verbose: bool = True) -> None:
    """Check a learner's ``causal_attention_with_cache(q, k, v)`` against causal masked attention."""
    g = torch.Generator().manual_seed(seed)
    fix = ("for t = 0 … n−1: append k[..., t:t+1, :] and v[..., t:t+1, :] to the caches (torch.cat along "
            "dim=-2), attend with q[..., t:t+1, :] to the caches, keep the (…, 1, d_v) result; finally "
            "torch.cat the n results along dim=-2")
    for shape in ((), tuple(batch)):
        q = torch.randn(*shape, n, d_k, generator=g, dtype=torch.float64)
        k = torch.randn(*shape, n, d_k, generator=g, dtype=torch.float64)
        v = torch.randn(*shape, n, d_v, generator=g, dtype=torch.float64)
        what = f"causal_attention_with_cache on q {tuple(q.shape)}, v {tuple(v.shape)}"
        originals = [a.clone() for a in (q, k, v)]
        result = call(causal_attention_with_cache, q, k, v, what=what, fix=fix)
        if any(not torch.equal(a, b) for a, b in zip((q, k, v), originals)):
            raise CheckFailed(f"{what} changed q, k or v in place — the caller's tensors are overwritten",
                              "build new cache tensors with torch.cat instead of writing into q, k or v")
        want = ref.masked_attention(q, k, v, ref.causal_mask(n))[0]
        out = _cache_output(result, what, tuple(want.shape))
        strict = torch.ones(n, n, dtype=torch.bool).tril(-1)
        mistakes = [
            (ref.masked_attention(q, k, v)[0],
             "each query attended to the whole sequence, future included: at step t the cache holds keys "
             "0 … t only", "append the new key and value, then attend to the cache, not to all of k"),
            (v, "each query attended only to its own token (the output equals v): the cache must keep every "
                "earlier key and value", "torch.cat the new row onto the cache instead of replacing it"),
            (ref.masked_attention(q, k, v, strict)[0],
             "each query saw only the earlier tokens, not itself",
             "append the current key and value to the cache *before* attending"),
            (ref.masked_attention(q * math.sqrt(d_k), k, v, ref.causal_mask(n))[0],
             "the scores are not divided by √d_k", "divide the scores by math.sqrt(d_k), d_k = q.size(-1)"),
        ]
        expect_close(out, want, what, mistakes, f"seed={seed}", fix=fix)

    n_spy = 7  # differs from every other size below, so a (…, 7, 7) tensor can only be a score matrix
    q, k = (torch.randn(2, n_spy, 3, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, n_spy, 5, generator=g, dtype=torch.float64)
    spy = _FullScoreSpy(n_spy)
    with spy, quiet():
        call(causal_attention_with_cache, q, k, v, what="causal_attention_with_cache", fix=fix)
    if spy.seen:
        raise CheckFailed(
            "causal_attention_with_cache builds a full (n, n) score matrix at once — that is the parallel "
            "computation used in training, not decoding with a cache",
            "decode one query position at a time: at step t, query t against a cache of t + 1 keys, scores "
            "of shape (…, 1, t + 1)")
    passed("causal_attention_with_cache equals causal masked attention, unbatched and batched, and never "
           "builds the (n, n) score matrix", verbose)


# ----------------------------------------------------------------------------- the n² bill


def _bytes_mistakes(n: int, h: int, b: int) -> list[tuple[float, str]]:
    full = n * n * h * b
    found = [
        (n * n * b, "the heads are missing: every head has its own n × n matrix", "multiply by n_heads"),
        (full * 8, "these are bits: bytes_per_element already counts bytes", "do not multiply by 8"),
        (full / 8, "you divided by 8: bytes_per_element is already in bytes", "drop the division by 8"),
        (n * h * b, "n instead of n²: each head's score matrix has n × n entries", "n_tokens ** 2"),
        (n * n * h, "you counted numbers, not bytes", "multiply by bytes_per_element"),
        (full / 2**20, "this is in MiB, not bytes", "return plain bytes: no division by 2**20"),
        (full / 2**30, "this is in GiB, not bytes", "return plain bytes: no division by 2**30"),
        (2 * full, "twice too much: count one n × n score matrix per head",
         "n_tokens ** 2 * n_heads * bytes_per_element"),
    ]
    return [found_one for found_one in found if found_one[0] != full]


@hinted
def check_attention_matrix_bytes(attention_matrix_bytes: Callable, seed: int = 0,
                                 verbose: bool = True) -> None:
    """Check a learner's ``attention_matrix_bytes(n_tokens, n_heads=1, bytes_per_element=2)``."""
    rng = np.random.default_rng(seed)
    n, h = int(rng.integers(100, 3000)), int(rng.integers(3, 17))
    cases = [  # (positional args, keyword args, n, h, b); explicit arguments first, then the defaults
        ((n,), {"n_heads": h, "bytes_per_element": 4}, n, h, 4),
        ((), {"n_tokens": n + 1, "n_heads": h + 1, "bytes_per_element": 1}, n + 1, h + 1, 1),
        ((4096,), {}, 4096, 1, 2),
        ((4096, 32), {}, 4096, 32, 2),
    ]
    for args, kwargs, n_, h_, b_ in cases:
        shown = ", ".join([*map(str, args), *(f"{key}={val}" for key, val in kwargs.items())])
        what = f"attention_matrix_bytes({shown})"
        got = call(attention_matrix_bytes, *args, **kwargs, what=what,
                   fix="the signature is attention_matrix_bytes(n_tokens, n_heads=1, bytes_per_element=2)")
        want = n_ * n_ * h_ * b_
        expect_returned(got, what, "the number of bytes")
        try:
            value = float(got)
        except (TypeError, ValueError):
            raise CheckFailed(f"{what} should return one integer number of bytes, got "
                              f"{type(got).__name__}",
                              "return the count itself, an int: no text, no tensor") from None
        if value != want:
            mistakes = _bytes_mistakes(n_, h_, b_)
            if not kwargs:  # the defaults are in use
                mistakes.insert(0, (n_ * n_ * h_ * 4, "the default bytes_per_element must be 2 (fp16), not 4",
                                    "def attention_matrix_bytes(n_tokens, n_heads=1, bytes_per_element=2)"))
            for result, message, fix in mistakes:
                if math.isclose(value, result, rel_tol=1e-9):
                    raise CheckFailed(f"{what} = {got}: {message}", fix)
            raise CheckFailed(f"{what} returned {got}, expected {want} = n_tokens² · n_heads · "
                              "bytes_per_element")
        if isinstance(got, bool) or not isinstance(got, numbers.Integral):
            raise CheckFailed(f"{what} returned {got!r} of type {type(got).__name__}; a number of bytes is "
                              "an int",
                              "integer arithmetic (*, **) stays exact; or wrap the result in int(…)")
    passed("attention_matrix_bytes counts n² numbers per head, in bytes, with the defaults n_heads=1 and "
           "bytes_per_element=2", verbose)
