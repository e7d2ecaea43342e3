"""Checks for lesson 08 (what attention costs): ``layer_macs``, ``score_share``,
``online_softmax_attention``.

Counts are compared with the reference for random sizes (with ``d_ff ≠ 4·d_model``, so a
hard-coded FFN width shows). The blocked attention is compared with full attention on keys whose
scores grow along the sequence — every new block brings a larger maximum, so a running sum or
output that is not rescaled, or a maximum taken from the first block only, gives a wrong or
infinite result — and is watched by a ``TensorMeter`` that fails it if it builds an
``(n_q, n_k)``-sized tensor.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import torch

from .. import cost as ref
from ..masking import traced_peak_bytes
from ..runtime import threads
from .core import (
    ATOL,
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_returned,
    expect_shape,
    passed,
    quiet,
    single_output,
    with_course_callees,
)
from .failure import hinted

PARTS = ("projections", "scores", "mix", "ffn")
MACS = {"projections": "4 * n * d_model**2", "scores": "n**2 * d_model", "mix": "n**2 * d_model",
        "ffn": "2 * n * d_model * d_ff"}

# ----------------------------------------------------------------------------- layer_macs


def _macs_mistakes(n: int, d: int, d_ff: int) -> dict[str, list[tuple[int, str]]]:
    """For each key, what the classic counting mistakes give, with their messages (the fix of each is
    the key's count, ``MACS``)."""
    return {
        "projections": [
            (3 * n * d * d, "3·n·d² counts W_Q, W_K and W_V only, but the output projection W_O is a fourth "
                            "(n, d) @ (d, d) product"),
            (4 * n * d, "4·n·d: each projection is (n, d) @ (d, d), which is n·d·d multiply-adds"),
            (4 * d * d, "4·d² is the number of weights, not the cost of applying them to n tokens"),
        ],
        "scores": [
            (n * d * d, "n·d² for Q Kᵀ, but it is (n, d) @ (d, n): n² dot products of width d"),
            (n * n, "n² for Q Kᵀ, but each of the n² scores is a dot product of width d"),
        ],
        "mix": [
            (n * d * d, "n·d² for weights @ V, but it is (n, n) @ (n, d)"),
            (n * n, "n² for weights @ V, but each output row sums n value rows of width d"),
        ],
        "ffn": [
            (n * d * d_ff, "n·d·d_ff counts one of the FFN's two matrix products, "
                           "(n, d) @ (d, d_ff) and (n, d_ff) @ (d_ff, d)"),
            (8 * n * d * d, "8·n·d² assumes d_ff = 4·d, but d_ff is an argument"),
            (2 * n * d * d, "2·n·d²: d_ff is ignored"),
            (2 * d * d_ff, "2·d·d_ff is the number of FFN weights, not the cost of applying them to n "
                           "tokens"),
        ],
    }


def _macs_dict(result, what: str) -> dict:
    expect_returned(result, what, "the dict")
    fix = "return {" + ", ".join(f"'{p}': …" for p in PARTS) + "}, one count per part"
    if not isinstance(result, dict):
        raise CheckFailed(f"{what} should be a dict with keys {', '.join(PARTS)}, "
                          f"got {type(result).__name__}",
                          fix)
    missing = [p for p in PARTS if p not in result]
    extra = [key for key in result if key not in PARTS]
    if missing or extra:
        raise CheckFailed(f"{what} has keys {sorted(map(str, result))}; expected exactly {list(PARTS)}"
                          + (f" (missing {missing})" if missing else "")
                          + (f" (unexpected {extra})" if extra else ""),
                          fix)
    return result


@hinted
def check_layer_macs(layer_macs: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``layer_macs(n, d_model, d_ff)`` on ViT-Base and on random sizes."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(16, 200))
    cases = [(197, 768, 3072),
             (int(rng.integers(5, 500)), d, int(d * rng.integers(2, 7) + rng.integers(1, 9))),  # d_ff ≠ 4d
             (int(rng.integers(600, 5000)), int(rng.integers(8, 64)), int(rng.integers(10, 300)))]
    for n, d, d_ff in cases:
        what = f"layer_macs({n}, {d}, {d_ff})"
        got = _macs_dict(call(layer_macs, n, d, d_ff, what=what,
                              fix="the signature is layer_macs(n, d_model, d_ff)"), what)
        want = ref.layer_macs(n, d, d_ff)
        mistakes = _macs_mistakes(n, d, d_ff)
        for part in PARTS:
            value = got[part]
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise CheckFailed(f"{what}['{part}'] should be a number, got {type(value).__name__}",
                                  "plain Python arithmetic on n, d_model and d_ff: ints, not tensors or text")
            if value != want[part]:
                if math.isclose(float(value), 2 * want[part], rel_tol=1e-9):
                    raise CheckFailed(f"{what}['{part}'] = {value}: that is FLOPs, twice the multiply-adds — "
                                      "papers on scaling laws count a multiply-add as 2 floating-point "
                                      "operations, but this exercise counts each multiply-add once",
                                      f"{MACS[part]}, without the factor 2")
                for wrong, message in mistakes[part]:
                    if wrong != want[part] and math.isclose(float(value), wrong, rel_tol=1e-9):
                        raise CheckFailed(f"{what}['{part}'] = {value}: {message}", MACS[part])
                raise CheckFailed(f"{what}['{part}'] = {value}, expected {want[part]}", MACS[part])
            if not isinstance(value, numbers.Integral):
                raise CheckFailed(f"{what}['{part}'] = {value!r} is a {type(value).__name__}; counts are "
                                  "whole numbers", "keep to integer arithmetic (*, **), no / or floats")
    passed("layer_macs counts projections 4nd², scores and mix n²d each, FFN 2nd·d_ff — on ViT-Base and "
           "on random sizes with d_ff ≠ 4d", verbose)


# ----------------------------------------------------------------------------- score_share


def _share_mistakes(n: int, d: int, d_ff: int) -> list[tuple[float, str]]:
    m = ref.layer_macs(n, d, d_ff)
    total, square = sum(m.values()), m["scores"] + m["mix"]
    return [
        (m["scores"] / total, "you counted only one of the two n × n products: the share needs scores "
                              "(Q Kᵀ) + mix (weights @ V), which cost the same", SHARE),
        (square / (total - square), "this is (scores + mix) / (everything else), not a share of the total "
                                    "of all four parts", SHARE),
        (100 * square / total, "this is a percentage, not a fraction between 0 and 1", "drop the * 100"),
        (1 - square / total, "this is the share of everything *but* the n × n products", SHARE),
    ]


SHARE = "(m['scores'] + m['mix']) / sum(m.values()) with m = layer_macs(n, d_model, d_ff)"
# A share computed in float32 (a torch tensor of the counts, say) is right to about 1e-7.
SHARE_RTOL = 1e-6


@with_course_callees("layer_macs")
@hinted
def check_score_share(score_share: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``score_share(n, d_model, d_ff)`` against the reference."""
    rng = np.random.default_rng(seed)
    cases = [(197, 768, 3072), (4097, 768, 3072),
             (int(rng.integers(2, 3000)), int(rng.integers(8, 512)), int(rng.integers(16, 2048)))]
    for n, d, d_ff in cases:
        what = f"score_share({n}, {d}, {d_ff})"
        got = call(score_share, n, d, d_ff, what=what, fix="the signature is score_share(n, d_model, d_ff)")
        expect_returned(got, what, "the share")
        try:
            if isinstance(got, (bool, str, dict)):
                raise TypeError
            value = float(got)
        except (TypeError, ValueError):
            raise CheckFailed(f"{what} should return one number (a float), "
                              f"got {type(got).__name__}",
                              "return the share as a number: divide the two counts, no formatting") from None
        want = ref.score_share(n, d, d_ff)
        if not math.isclose(value, want, rel_tol=SHARE_RTOL, abs_tol=1e-12):
            for wrong, message, fix in _share_mistakes(n, d, d_ff):
                if math.isclose(value, wrong, rel_tol=SHARE_RTOL):
                    raise CheckFailed(f"{what} = {value:.6g}: {message}", fix)
            raise CheckFailed(f"{what} = {value:.6g}, expected (scores + mix) / total = {want:.6g}",
                              SHARE)
    passed("score_share gives (scores + mix) / total: 4.1% for ViT-Base at 224 px, 47.1% at 1024 px, and "
           "right on random sizes", verbose)


# ----------------------------------------------------------------------------- online softmax attention


def growing_qkv(batch: tuple[int, ...], n_q: int, n_k: int, d: int, d_v: int, rise: float,
                dtype=torch.float64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random q, k, v whose scores q·k/√d climb by about ``rise`` from the first key to the last.

    Every query has a positive first component and key j's first component grows with j, so each
    block of keys brings a larger maximum score than the blocks before it.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, n_q, d, generator=g, dtype=torch.float64)
    k = torch.randn(*batch, n_k, d, generator=g, dtype=torch.float64)
    v = torch.randn(*batch, n_k, d_v, generator=g, dtype=torch.float64)
    q[..., 0] = 1.0 + torch.rand(*batch, n_q, generator=g, dtype=torch.float64)  # in [1, 2)
    k[..., 0] += torch.linspace(0.0, rise * math.sqrt(d) / 1.5, n_k, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def blocked_variant(q, k, v, block_size: int, *, scale: float | None = None, rescale_sum: bool = True,
                    rescale_acc: bool = True, first_max_only: bool = False, divide: str = "end",
                    skip_tail: bool = False) -> torch.Tensor:
    """Blocked attention with a chosen mistake switched on (defaults: correct), in float64.

    ``divide``: "end" (right), "each_block" (acc = (acc·c + p v) / sum inside the loop),
    "block_mean"/"block_sum" (each block softmax-normalised on its own, then averaged/summed).
    """
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    n_k = k.size(-2)
    stop = (n_k // block_size) * block_size if skip_tail else n_k
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=torch.float64)
    s = torch.zeros_like(m)
    acc = torch.zeros((*q.shape[:-1], v.size(-1)), dtype=torch.float64)
    outputs = []
    for start in range(0, stop, block_size):
        scores = q @ k[..., start : start + block_size, :].transpose(-2, -1) * scale
        v_block = v[..., start : start + block_size, :]
        if divide in ("block_mean", "block_sum"):
            outputs.append(torch.softmax(scores, dim=-1) @ v_block)
            continue
        block_max = scores.amax(dim=-1, keepdim=True)
        new_m = block_max if (first_max_only and start == 0) else (m if first_max_only else
                                                                    torch.maximum(m, block_max))
        c = torch.exp(m - new_m)
        p = torch.exp(scores - new_m)
        s = (s * c if rescale_sum else s) + p.sum(dim=-1, keepdim=True)
        acc = (acc * c if rescale_acc else acc) + p @ v_block
        if divide == "each_block":
            acc = acc / s
        m = new_m
    if divide == "block_mean":
        return torch.stack(outputs).mean(dim=0)
    if divide == "block_sum":
        return torch.stack(outputs).sum(dim=0)
    return acc if divide == "each_block" else acc / s


def _online_mistakes(q, k, v, b: int) -> list[tuple[torch.Tensor, str]]:
    d_k = q.size(-1)
    once = "keep a running sum over all blocks and divide the accumulated output by it once, at the end"
    found = [
        (blocked_variant(q, k, v, b, rescale_sum=False, rescale_acc=False),
         "neither the running sum nor the accumulated output is rescaled when the maximum grows: what they "
         "hold was computed against the old maximum",
         "multiply both by exp(old_max − new_max) before adding the new block"),
        (blocked_variant(q, k, v, b, rescale_acc=False),
         "the running sum is rescaled but the accumulated output is not: the output still counts the "
         "old maximum", "when the maximum grows, multiply the accumulator by exp(old_max − new_max) too"),
        (blocked_variant(q, k, v, b, rescale_sum=False),
         "the accumulated output is rescaled but the running sum is not: the sum still counts the old "
         "maximum", "multiply the sum by exp(old_max − new_max) too"),
        (blocked_variant(q, k, v, b, scale=1.0), "the scores are not divided by √d_k",
         "scores = q @ k_block.transpose(-2, -1) / math.sqrt(d_k)"),
        (blocked_variant(q, k, v, b, scale=1.0 / d_k), "you divided the scores by d_k; the scale is √d_k",
         "divide by math.sqrt(d_k)"),
        (blocked_variant(q, k, v, b, divide="each_block"),
         "you divided by the running sum inside the loop: the earlier blocks are divided again and again",
         "keep the output unnormalised and divide by the sum once, after the last block"),
        (blocked_variant(q, k, v, b, divide="block_mean"),
         "each block was normalised by its own sum and the blocks averaged — blocks with larger scores "
         "deserve more weight", once),
        (blocked_variant(q, k, v, b, divide="block_sum"),
         "each block was normalised by its own sum and the blocks added, so the weights sum to the number "
         "of blocks", once),
    ]
    if k.size(-2) % b:
        found.append((blocked_variant(q, k, v, b, skip_tail=True),
                      f"the last, shorter block is skipped (n_k = {k.size(-2)} is not a multiple of "
                      f"block_size = {b})", "range(0, n_k, block_size) covers it, and slicing past the end "
                                            "of a tensor is fine"))
    return found


FIX = ("for each block of keys: scores = q @ k_blockᵀ / √d_k; new_max = max(old_max, block max); "
        "c = exp(old_max − new_max); p = exp(scores − new_max); sum = sum·c + p.sum(-1); "
        "acc = acc·c + p @ v_block; after the loop return acc / sum")


def _output(result, what: str, shape: tuple[int, ...]) -> np.ndarray:
    single_output(result, what, shape, ", no weights (there is no full weight matrix to return)")
    out = as_array(result, what)
    expect_shape(out, shape, what, "one row per query, d_v columns", "acc (…, n_q, d_v) / sum (…, n_q, 1)")
    return out


def _run_online(fn: Callable, q, k, v, block_size: int, label: str, context: str, atol: float) -> None:
    what = f"online_softmax_attention {label}"
    originals = [t.clone() for t in (q, k, v)]
    result = call(fn, q, k, v, block_size=block_size, what=what, fix=FIX)
    if any(not torch.equal(a, b) for a, b in zip((q, k, v), originals)):
        raise CheckFailed(f"{what} changed q, k or v in place — the caller's tensors are overwritten",
                          "compute new tensors instead")
    want = ref.naive_attention(q.to(torch.float64), k.to(torch.float64), v.to(torch.float64))
    out = _output(result, what, tuple(want.shape))
    expect_close(out, want, what, _online_mistakes(q, k, v, block_size), context, fix=FIX, atol=atol)


def check_never_builds_scores(fn: Callable, block_size: int = 8, n_q: int = 96, n_k: int = 160,
                              seed: int = 0) -> None:
    """Fail if fn creates an n_q·n_k-sized tensor or NumPy array, or calls torch's fused attention."""
    if min(n_q, n_k) < 4 * max(block_size, 4):
        raise ValueError("n_q and n_k must be far larger than block_size and d = 4: only a score matrix "
                         "may be that big")
    q, k, v = growing_qkv((), n_q, n_k, 4, 4, rise=6.0, seed=seed)  # d_v = d_k: torch may fuse
    meter = ref.TensorMeter()
    with threads(1), meter, quiet():
        call(fn, q, k, v, block_size=block_size, what="online_softmax_attention", fix=FIX)
    fused = sorted(name for name in meter.op_names if "scaled_dot_product" in name)
    if fused:
        raise CheckFailed(f"online_softmax_attention calls torch's fused attention ({fused[0]}) — the "
                          "exercise is the loop over key blocks itself", FIX)
    if meter.largest_numel >= n_q * n_k:
        raise CheckFailed(
            f"online_softmax_attention built a tensor of shape {meter.largest_shape} "
            f"(≥ n_q·n_k = {n_q}·{n_k} numbers) with block_size = {block_size}: that is the full score "
            "matrix, or as big",
            "compute the scores one block of keys at a time, (n_q, block_size), and keep only the running "
            "max, the running sum and the (n_q, d_v) accumulator between blocks")
    # NumPy arrays are invisible to the meter; tracemalloc sees them (and not torch's tensors).
    with threads(1), quiet():
        peak = traced_peak_bytes(call, fn, q, k, v, block_size=block_size,
                                 what="online_softmax_attention", fix=FIX)
    if peak >= n_q * n_k * 4:
        raise CheckFailed(
            f"online_softmax_attention allocated {peak / 1024:.0f} KiB of Python/NumPy memory at once — as "
            f"much as a float32 ({n_q}, {n_k}) score matrix. Did it build the scores in NumPy?",
            "stay in torch and compute one block of keys at a time")


@hinted
def check_online_softmax_attention(online_softmax_attention: Callable, seed: int = 0,
                                   batch: tuple[int, ...] = (2, 3), n_q: int = 5, n_k: int = 40,
                                   d: int = 8, d_v: int = 3, verbose: bool = True) -> None:
    """Check a learner's ``online_softmax_attention(q, k, v, block_size)``: exact, blocked, overflow-safe."""
    if n_k < 4:
        raise ValueError("the check needs n_k ≥ 4 to walk the keys in several blocks")
    with threads(1):  # tiny tensors: extra threads only wait for each other
        _check_online(online_softmax_attention, seed, batch, n_q, n_k, d, d_v)
    passed("online_softmax_attention equals full attention for block sizes that do and do not divide n_k "
           "(and 1, and ≥ n_k), with maxima that grow along the keys, in float64 and float32, and never "
           "builds the (n_q, n_k) matrix", verbose)


def _check_online(fn: Callable, seed: int, batch: tuple[int, ...], n_q: int, n_k: int, d: int,
                  d_v: int) -> None:
    q, k, v = growing_qkv(batch, n_q, n_k, d, d_v, rise=8.0, seed=seed)
    context = f"seed={seed}, q {tuple(q.shape)}, k {tuple(k.shape)}, keys whose scores grow along n_k"
    divides = next(b for b in range(2, n_k + 1) if n_k % b == 0)  # n_k itself if n_k is prime
    does_not = next(b for b in range(3, n_k) if n_k % b)
    for b in dict.fromkeys((does_not, divides, 1, n_k + 3)):
        label = f"with block_size = {b}" + (" (does not divide n_k)" if n_k % b else "")
        _run_online(fn, q, k, v, b, label, context, atol=ATOL)  # float32 arithmetic passes too

    # Scores that climb by ~1000 along the sequence: exp of a score minus a stale maximum overflows.
    qb, kb, vb = growing_qkv((), 4, 3 * 8 + 5, d, d_v, rise=1000.0, seed=seed + 1)
    what = "online_softmax_attention with scores that climb by ~1000 from the first key to the last"
    out = _output(call(fn, qb, kb, vb, block_size=8, what=what, fix=FIX), what, (4, d_v))
    if not np.all(np.isfinite(out)):
        raise CheckFailed(
            f"{what} returns inf or NaN: exp(score − max) overflowed. A maximum taken from the first block "
            "only, or no maximum at all, is not enough when later keys score higher",
            "update the maximum with every block: new_max = max(old_max, block max)")
    expect_close(out, ref.naive_attention(qb, kb, vb), what, _online_mistakes(qb, kb, vb, 8),
                 f"seed={seed}", fix=FIX)

    q32, k32, v32 = growing_qkv((3,), 6, 70, 16, 4, rise=8.0, dtype=torch.float32, seed=seed + 2)
    _run_online(fn, q32, k32, v32, 16, "in float32 (block_size = 16)", f"seed={seed}", atol=1e-5)

    check_never_builds_scores(fn, block_size=8, seed=seed + 3)
