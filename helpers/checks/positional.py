"""Checks for lesson 05 (where am I?): ``sinusoidal_encoding`` and ``rope``.

Both are compared with the reference in ``helpers.positional``. Properties alone are not
enough for ``rope``: a rotation of the wrong pairs, or in the wrong direction, also keeps
norms and makes ``rope(q)·rope(k)`` depend on the offset only, but it breaks the contract (and
any checkpoint trained with the other layout). So each check computes what the known mistakes
return and names the one the learner's result matches.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .. import positional as ref
from .core import CheckFailed, as_array, call, expect_close, expect_shape, passed, with_course_callees
from .failure import hinted

# float32 sines of angles up to ~100 radians, computed in another order than the reference.
RTOL, ATOL = 1e-4, 1e-4


def _tensor(result, what: str) -> np.ndarray:
    """The learner's result as an array, after checking it is a floating-point torch tensor."""
    if result is not None and not torch.is_tensor(result):
        raise CheckFailed(f"{what} must return a torch tensor, got {type(result).__name__}",
                          "build it with torch functions, or wrap a NumPy array in torch.from_numpy")
    if result is not None and not result.is_floating_point():
        raise CheckFailed(f"{what} returned a tensor of dtype {result.dtype}; it must be floating point",
                          "make the positions floating point: torch.arange(n, dtype=torch.float32), or "
                          ".float()")
    return as_array(result, what)


# ---------------------------------------------------------------- sinusoidal_encoding


def _encoding(positions: np.ndarray, freqs: np.ndarray, layout: str = "interleaved",
              first: str = "sin") -> np.ndarray:
    """sin/cos of positions (n,) × freqs (d/2,) laid out as asked: (n, d). A mistake factory."""
    angles = positions[:, None] * freqs[None, :]  # (n, d/2)
    a, b = (np.sin(angles), np.cos(angles)) if first == "sin" else (np.cos(angles), np.sin(angles))
    if layout == "half":
        return np.concatenate([a, b], axis=1)
    return np.stack([a, b], axis=2).reshape(len(positions), -1)


def _per_dim_encoding(positions: np.ndarray, freqs_per_dim: np.ndarray) -> np.ndarray:
    """sin on even dims, cos on odd dims, each dim with its own frequency: (n, d)."""
    angles = positions[:, None] * freqs_per_dim[None, :]
    out = np.cos(angles)
    out[:, 0::2] = np.sin(angles[:, 0::2])
    return out


def _encoding_mistakes(n: int, d: int, base: float) -> list[tuple[np.ndarray, str]]:
    """What the classic mistakes return for sinusoidal_encoding(n, d, base)."""
    p = np.arange(n, dtype=float)
    i = np.arange(d // 2, dtype=float)  # pair index
    j = np.arange(d, dtype=float)  # dimension index
    freqs = base ** (-2 * i / d)
    interleave = "pe[:, 0::2] = torch.sin(angles), pe[:, 1::2] = torch.cos(angles)"
    per_pair = ("one frequency per pair, exponents torch.arange(0, d, 2) / d, used for both pe[:, 0::2] "
                "and pe[:, 1::2]")
    found = [
        (_encoding(p, freqs, first="cos"),
         "sin and cos are swapped: even dims 2i hold sin(p ω_i), odd dims 2i+1 hold cos(p ω_i), so "
         "row 0 is [0, 1, 0, 1, …]", interleave),
        (_encoding(p, freqs, layout="half"),
         "you put all the sines in the first half and all the cosines in the second (the "
         "concatenated layout); this course interleaves them, sin on the even dims and cos on the odd",
         interleave),
        (_encoding(p, freqs, layout="half", first="cos"),
         "you put all the cosines in the first half and all the sines in the second; this course "
         "interleaves them, sin on the even dims and cos on the odd", interleave),
        (_encoding(p, base ** (-i / d)),
         "the frequency exponent is i/d with i the pair index; it is 2i/d, so ω_i = base^(−2i/d)",
         "exponents torch.arange(0, d, 2) / d"),
        (_encoding(p, base ** (-4 * i / d)),
         "the frequency exponent is twice too large (4i/d)",
         "torch.arange(0, d, 2) already counts 2i: do not multiply it by 2 again, and divide by d, not d/2"),
        (_per_dim_encoding(p, base ** (-j / d)),
         "the exponent uses the dimension index j (base^(j/d)), so dims 2i and 2i+1 turn at "
         "different frequencies; both dims of pair i share ω_i = base^(−2i/d)", per_pair),
        (_per_dim_encoding(p, base ** (-2 * j / d)),
         "the exponent uses 2j/d with j the dimension index, not the pair index i: both dims 2i "
         "and 2i+1 share ω_i = base^(−2i/d)", per_pair),
        (_encoding(p, base ** (2 * i / d)),
         "the frequencies grow along the dimensions; they must fall, from 1 radian per position to "
         "about 1/base", "divide the position by base^(2i/d): p / base^(2i/d), not p * base^(2i/d)"),
        (_encoding(p + 1, freqs),
         "your positions start at 1; they start at 0, so row 0 is [0, 1, 0, 1, …]",
         "positions torch.arange(n_positions)"),
        (_encoding(p, np.ones(d // 2)),
         "every pair turns at 1 radian per position: the exponent came out 0 — integer division "
         "(2 * i // d)?", "true division: 2 * i / d"),
    ]
    if base != ref.BASE:
        found.append((_encoding(p, ref.BASE ** (-2 * i / d)),
                      f"the `base` argument is ignored (this is base 10000, it was called with "
                      f"base={base:g})", "base ** (-torch.arange(0, d, 2) / d), with the base argument"))
    return found


@hinted
def check_sinusoidal_encoding(sinusoidal_encoding: Callable, seed: int = 0, n_positions: int = 50,
                              d_model: int = 16, verbose: bool = True) -> None:
    """Check a learner's ``sinusoidal_encoding(n_positions, d_model, base=10000.0)``."""
    rng = np.random.default_rng(seed)
    fix = ("row 0 must be [0, 1, 0, 1, …]; angles = positions (n, 1) * ω (1, d/2) with "
            "ω_i = base^(−2i/d); pe[:, 0::2] = sin(angles), pe[:, 1::2] = cos(angles)")

    def run(n, d, base=None):
        args, kwargs = (n, d), ({} if base is None else {"base": base})
        label = f"sinusoidal_encoding({n}, {d}" + ("" if base is None else f", base={base:g}") + ")"
        got = _tensor(call(sinusoidal_encoding, *args, what=label, fix=fix, **kwargs), label)
        if got.shape == (d, n) and n != d:
            raise CheckFailed(f"{label} has shape {got.shape}: transposed — one row per position, "
                              f"shape (n_positions, d_model) = ({n}, {d})",
                              "angles = positions[:, None] * frequencies[None, :], (n, 1) times (1, d/2)")
        expect_shape(got, (n, d), label, "one row per position, one column per dimension", fix)
        b = ref.BASE if base is None else base
        expect_close(got, ref.sinusoidal_encoding(n, d, b).double().numpy(), label,
                     _encoding_mistakes(n, d, b), f"seed={seed}", fix, rtol=RTOL, atol=ATOL)

    run(n_positions, d_model)
    n2, d2 = int(rng.integers(5, 40)), 2 * int(rng.integers(2, 17))
    base2 = float(np.round(rng.uniform(20.0, 2000.0), 1))  # never the default 10000
    run(n2, d2, base2)
    passed(f"sinusoidal_encoding matches the reference for ({n_positions}, {d_model}) and for "
           f"({n2}, {d2}) with base={base2:g}", verbose)


# ---------------------------------------------------------------- rope


def _rotate(x: torch.Tensor, angles_per_dim: torch.Tensor, half: bool = False,
            scatter_half: bool = False, sign: float = 1.0, swap: bool = False) -> np.ndarray:
    """A rotary embedding with the knobs its classic mistakes turn: (..., n, d) as float64 NumPy.

    ``angles_per_dim`` (n, d) is the angle each dimension's cos/sin uses; ``half`` pairs dim
    i with i + d/2; ``scatter_half`` writes interleaved pairs back as [evens, odds]; ``sign`` −1
    rotates the other way; ``swap`` exchanges cos and sin.
    """
    x = x.double()
    d = x.shape[-1]
    c, s = torch.cos(sign * angles_per_dim), torch.sin(sign * angles_per_dim)  # (n, d)
    if swap:
        c, s = s, c
    if half:
        a, b = x[..., : d // 2], x[..., d // 2:]
        ca, sa, cb, sb = c[:, : d // 2], s[:, : d // 2], c[:, d // 2:], s[:, d // 2:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        ca, sa, cb, sb = c[:, 0::2], s[:, 0::2], c[:, 1::2], s[:, 1::2]
    ra, rb = a * ca - b * sa, a * sb + b * cb  # (..., n, d/2) each
    if half or scatter_half:
        out = torch.cat([ra, rb], dim=-1)
    else:
        out = torch.stack([ra, rb], dim=-1).flatten(-2)
    return out.numpy()


def _angles(positions: torch.Tensor, freqs: torch.Tensor, layout: str = "pairs") -> torch.Tensor:
    """Angle of every dimension (n, d): each pair's angle twice, side by side or in two halves."""
    theta = positions.double()[:, None] * freqs[None, :]  # (n, d/2)
    if layout == "halves":
        return torch.cat([theta, theta], dim=-1)
    return theta.repeat_interleave(2, dim=-1)


def _rope_mistakes(x: torch.Tensor, positions: torch.Tensor, base: float,
                   explicit: bool) -> list[tuple[np.ndarray, str]]:
    """What the classic rotary-embedding mistakes return for x (..., n, d)."""
    n, d = x.shape[-2], x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    freqs = base ** (-2 * i / d)
    right = _angles(positions, freqs)
    direction = ("the contract turns (x_2i, x_2i+1) into (x_2i cos θ − x_2i+1 sin θ, "
                 "x_2i sin θ + x_2i+1 cos θ)")
    angle = "θ = p · base^(−2i/d) for pair i: exponents torch.arange(0, d, 2) / d"
    found = [
        (x.double().numpy(), "x came back unrotated: every pair (2i, 2i+1) at position p must "
                             "turn by θ = p · base^(−2i/d)", direction),
        (_rotate(x, _angles(positions, freqs, layout="halves"), half=True),
         "you paired dim i with dim i + d/2 (the 'rotate_half' layout of GPT-NeoX and Hugging "
         "Face Llama); this exercise pairs neighbours (2i, 2i+1)", "x[..., 0::2] with x[..., 1::2]"),
        (_rotate(x, right, sign=-1.0), "you rotated by −θ (the other direction)", direction),
        (_rotate(x, right, swap=True), "cos and sin are swapped", direction),
        (_rotate(x, right, scatter_half=True),
         "each pair is rotated correctly but written back as [all evens, all odds], not in its place",
         "out[..., 0::2] = …, out[..., 1::2] = …"),
        (_rotate(x, _angles(positions, freqs, layout="halves")),
         "the cos/sin tables are laid out in two halves (torch.cat((θ, θ)) or .repeat(2)), the "
         "layout of the rotate_half variant; with neighbour pairs each angle must serve dims 2i "
         "and 2i+1", "repeat_interleave(2), or work on the pairs x[..., 0::2], x[..., 1::2] directly"),
        (_rotate(x, _angles(positions, base ** (-i / d))),
         "the frequency exponent is i/d with i the pair index; it is 2i/d", angle),
        (_rotate(x, _angles(positions, base ** (-4 * i / d))),
         "the frequency exponent is twice too large (4i/d)",
         "torch.arange(0, d, 2) already counts 2i, and the denominator is d, not d/2"),
        (_rotate(x, _angles(positions, base ** (2 * i / d))),
         "the frequencies grow along the pairs; they must fall", "θ = p · base^(−2i/d) = p / base^(2i/d)"),
        (_rotate(x, _angles(positions + 1, freqs)),
         "your positions are shifted by one" + ("" if explicit else " — by default they start at 0"),
         "use positions as given, or torch.arange(n) when it is None"),
    ]
    if explicit:
        found.append((_rotate(x, _angles(torch.arange(n), freqs)), "the `positions` argument is ignored",
                      "rotate position k of the sequence by positions[k], not by k"))
    if base != ref.BASE:
        found.append((_rotate(x, _angles(positions, ref.BASE ** (-2 * i / d))),
                      f"the `base` argument is ignored (this is base 10000; it was called with "
                      f"base={base:g})", "base ** (-torch.arange(0, d, 2) / d), with the base argument"))
    return found


@with_course_callees("sinusoidal_encoding")
@hinted
def check_rope(rope: Callable, seed: int = 0, n: int = 6, d: int = 8, verbose: bool = True) -> None:
    """Check a learner's ``rope(x, positions=None, base=10000.0)`` against the reference."""
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    fix = ("for pair i = 0 … d/2 − 1 at position p: θ = p · base^(−2i/d); "
            "out[..., 0::2] = x[..., 0::2] cos θ − x[..., 1::2] sin θ, "
            "out[..., 1::2] = x[..., 0::2] sin θ + x[..., 1::2] cos θ; positions index the "
            "second-to-last axis (n)")

    def run(x, positions=None, base=None):
        kwargs = {}
        if positions is not None:
            kwargs["positions"] = positions
        if base is not None:
            kwargs["base"] = base
        label = (f"rope(x of shape {tuple(x.shape)}"
                 + ("" if positions is None else f", positions={positions.tolist()}")
                 + ("" if base is None else f", base={base:g}") + ")")
        original = x.clone()
        got = _tensor(call(rope, x, what=label, fix=fix, **kwargs), label)
        if not torch.equal(x, original):
            raise CheckFailed(f"{label} changed x in place — the caller's x is overwritten",
                              "write the rotated values into a new tensor (torch.empty_like(x), torch.stack, "
                              "torch.cat)")
        expect_shape(got, tuple(x.shape), label, "rope returns a tensor of the same shape as x", fix)
        pos = torch.arange(x.shape[-2]) if positions is None else positions
        b = ref.BASE if base is None else base
        want = ref.rope(x.double(), pos, b).numpy()
        expect_close(got, want, label, _rope_mistakes(x, pos, b, positions is not None),
                     f"seed={seed}", fix, rtol=RTOL, atol=ATOL)

    run(torch.randn(n, d, generator=gen))
    run(torch.randn(2, 3, n, d, generator=gen))  # (B, H, n, d)
    positions = torch.as_tensor(rng.choice(60, size=n, replace=False))  # int64, not 0 … n − 1
    base = float(np.round(rng.uniform(20.0, 2000.0), 1))
    run(torch.randn(n, d, generator=gen), positions=positions)
    run(torch.randn(2, 3, n, d, generator=gen), positions=positions, base=base)
    passed(f"rope matches the reference for x of shape ({n}, {d}) and (2, 3, {n}, {d}), "
           f"default and explicit positions, base 10000 and {base:g}", verbose)
