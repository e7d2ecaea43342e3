"""Checks for lesson 03 (why divide by √d_k): ``score_std``, ``softmax_jacobian``, ``entropy``.

``score_std`` draws random numbers, and a correct answer may draw them differently from the
reference (another generator, another order, ``ddof=0``). So it is compared with the true
value √d_k within a tolerance that follows from the sample size, never with the reference's
exact output.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from .. import scaling as ref
from ..attention import softmax
from .core import CheckFailed, as_array, call, expect_close, expect_shape, passed, quiet, same
from .failure import hinted

# How many standard errors a sample statistic may miss its true value by. For a correct
# answer a 6-sigma miss has a probability of about 2e-9 per comparison.
Z = 6.0
JACOBIAN = "np.diag(p) − np.outer(p, p)"
ENTROPY_FIX = ("H = −Σ p log p along `axis`, natural log, terms with p = 0 count 0: "
               "-(p * np.log(np.where(p > 0, p, 1))).sum(axis=axis)")


def std_rel_error(d_k: int, n_pairs: int) -> float:
    """Relative standard error of the sample std of q·k over n_pairs pairs of width d_k.

    Var(s²) ≈ σ⁴ (2 + κ) / n, with κ the excess kurtosis of q·k: each product q_m k_m has
    excess kurtosis 6, a sum of d_k of them 6 / d_k. So s is off by ½ √((2 + 6/d_k) / n)
    relatively — about 1/√(2 n) for wide vectors.
    """
    return 0.5 * math.sqrt((2.0 + 6.0 / d_k) / n_pairs)


def _score_std_mistakes(d_k: int, n_pairs: int) -> list[tuple[float, float, str, str]]:
    """(value a mistake gives, relative tolerance, message, fix) for score_std(d_k, n_pairs)."""
    tol = Z * std_rel_error(d_k, n_pairs)
    normal = "q and k from rng.standard_normal((n_pairs, d_k)) (or rng.normal)"
    return [
        (1 / math.sqrt(d_k), 2 * tol,
         f"you drew the entries with variance 1/d_k (scale 1/√d_k, as a weight initialiser does): then q·k "
         f"has variance d_k · (1/d_k)² = 1/d_k and spread 1/√d_k = {1 / math.sqrt(d_k):.3g}; the exercise "
         "draws q, k ~ N(0, I), variance 1 per entry",
         "q and k from rng.standard_normal((n_pairs, d_k)), unit variance, with no 1/√d_k factor"),
        (float(d_k), 2 * tol,
         f"this is the variance of q·k (about d_k = {d_k}), not its standard deviation (about √d_k)",
         ".std(), not .var()"),
        (1.0, 2 * tol,
         "this is about 1, the spread of the *scaled* score q·k/√d_k (or of a single product "
         "q_m·k_m); the exercise asks for the raw dot products q·k",
         "one raw dot product per pair, summed over the d_k components: (q * k).sum(axis=1), then .std()"),
        (math.sqrt(2 * d_k), 3 * tol,
         f"this is about √(2 d_k) = {math.sqrt(2 * d_k):.3g}, the spread of q·q: q and k are the "
         "same vectors", "draw k separately: a second call of the same generator, not a fresh "
                         "generator with the same seed"),
        (math.sqrt(d_k) / 3, 2 * tol,
         "this is the spread for uniform draws on [-1, 1] (rng.uniform): q and k must be "
         "standard normal", normal),
        (math.sqrt(7 * d_k / 144), 2 * tol,
         "this is the spread for uniform draws on [0, 1) (rng.random / np.random.rand): q and k "
         "must be standard normal", normal),
        (math.sqrt(n_pairs), 0.5,
         "this is about √n_pairs: you summed over the pairs instead of over the d_k components",
         "one dot product per pair: (q * k).sum(axis=1) for q, k of shape (n_pairs, d_k)"),
    ]


def _one_number(x, what: str) -> float:
    """The learner's result as one float, or a CheckFailed that says what came back."""
    arr = as_array(x, what)
    if arr.size != 1:
        raise CheckFailed(f"{what} should be one number, got an array of shape {arr.shape}",
                          "compute the n_pairs dot products, then return their standard deviation: "
                          "float(scores.std())")
    return float(arr.reshape(()))


@hinted
def check_score_std(score_std: Callable, seed: int = 0, d_k: int = 64, n_pairs: int = 100_000,
                    verbose: bool = True) -> None:
    """Check a learner's ``score_std(d_k, n_pairs=10_000, seed=0)`` statistically and for seeding."""
    fix = ("draw q and k of shape (n_pairs, d_k) from np.random.default_rng(seed), take one dot "
            "product per pair — (q * k).sum(axis=1), not q @ k.T, which is (n_pairs, n_pairs) — "
            "and return the standard deviation of those n_pairs numbers")

    def run(d, n, s):
        what = f"score_std({d}, n_pairs={n}, seed={s})"
        return what, _one_number(call(score_std, d, n_pairs=n, seed=s, what=what, fix=fix), what)

    for d in (d_k, 4):
        what, got = run(d, n_pairs, seed)
        want, tol = math.sqrt(d), Z * std_rel_error(d, n_pairs)
        if math.isfinite(got) and abs(got / want - 1) <= tol:
            continue
        # The named mistakes first: 1/√d_k (entries of variance 1/d_k) lies within the mean's spread.
        for value, rel, message, own_fix in _score_std_mistakes(d, n_pairs):
            if math.isfinite(got) and abs(got / value - 1) <= rel:
                raise CheckFailed(f"{what} = {got:.4g}: {message}", own_fix)
        if math.isfinite(got) and abs(got) <= Z * want / math.sqrt(n_pairs):
            raise CheckFailed(f"{what} = {got:.4g}: this is about 0, the mean of q·k, not its standard "
                              "deviation", ".std() of the dot products, not .mean()")
        raise CheckFailed(f"{what} = {got:.4g}, expected about √{d} = {want:.4g}, the standard deviation of "
                          f"q·k: a sample of {n_pairs} pairs lands within ±{tol:.1%} of it", fix)

    small, large = 50, 5_000
    what, a = run(d_k, small, seed)
    _, again = run(d_k, small, seed)
    if a != again:
        raise CheckFailed(f"{what} gave {a:.6g} and then {again:.6g}: the same seed must give the "
                          "same result",
                          "make the generator from the seed, rng = np.random.default_rng(seed), and draw "
                          "everything from it")
    _, other = run(d_k, small, seed + 1)
    if a == other:
        if a == math.sqrt(d_k):
            raise CheckFailed(f"{what} returns exactly √d_k = {a:g}: that is the formula; the exercise "
                              "asks you to *measure* the spread from random samples", fix)
        raise CheckFailed(f"score_std gives {a:.6g} for seed={seed} and for seed={seed + 1}: the "
                          "`seed` argument is ignored", "rng = np.random.default_rng(seed)")
    _, b = run(d_k, large, seed)
    if a == b:
        raise CheckFailed(f"score_std gives {a:.6g} for n_pairs={small} and for n_pairs={large}: the "
                          "`n_pairs` argument is ignored", "draw q and k of shape (n_pairs, d_k)")
    passed(f"score_std measures √d_k within the sampling error for d_k = {d_k} and 4 "
           f"({n_pairs} pairs), and uses its `seed` and `n_pairs`", verbose)


def _jacobian_mistakes(p: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """What the classic mistakes return as the softmax Jacobian of probabilities p (n,)."""
    n = len(p)
    diag, outer = np.diag(p), np.outer(p, p)
    return [
        (np.diag(p * (1 - p)),
         "only the diagonal p_i(1 − p_i) is filled in: off the diagonal ∂p_i/∂z_j = −p_i p_j "
         "(raising one score lowers every other weight)", JACOBIAN),
        (outer - diag, "the sign is flipped: ∂p_i/∂z_j = p_i(δ_ij − p_j) is positive on the diagonal",
         JACOBIAN),
        (diag, "the −p_i p_j term is missing", "subtract np.outer(p, p) from np.diag(p)"),
        (-outer, "the δ_ij term is missing", "add p_i on the diagonal: np.diag(p) − np.outer(p, p)"),
        (np.eye(n) - outer,
         "this is δ_ij − p_i p_j, the identity minus the outer product: the factor p_i multiplies δ_ij "
         "too, so the diagonal is p_i(1 − p_i), not 1 − p_i²",
         "put p, not ones, on the diagonal: " + JACOBIAN),
        (p[:, None] * (1 - p[None, :]),
         "δ_ij is missing: off the diagonal the entry is −p_i p_j, not p_i(1 − p_j)", JACOBIAN),
        (p[None, :] * (1 - p[:, None]),
         "this is p_j(1 − p_i): transposed (row i is output p_i, column j is input z_j), and δ_ij is "
         "missing", JACOBIAN),
        (diag - p[:, None] ** 2,
         "row i subtracts p_i² in every column: the subtracted term is p_i p_j", JACOBIAN),
        (diag - p[None, :] ** 2,
         "this is transposed and squares one factor: column j subtracts p_j², but the subtracted "
         "term is p_i p_j", JACOBIAN),
        (np.eye(n) - p[None, :], "the factor p_i is missing: p_i(δ_ij − p_j), not δ_ij − p_j", JACOBIAN),
        (np.eye(n) - p[:, None],
         "this is δ_ij − p_i: the factor p_i is missing and the matrix is transposed (row i for p_i, "
         "column j for z_j)", JACOBIAN),
        (ref.softmax_jacobian(softmax(p)),
         "you applied softmax to p first: the argument already is the probability vector",
         "use p as it is: " + JACOBIAN),
    ]



@hinted
def check_softmax_jacobian(softmax_jacobian: Callable, seed: int = 0, n: int = 5,
                           verbose: bool = True) -> None:
    """Check a learner's ``softmax_jacobian(p)`` against p_i(δ_ij − p_j) on random probabilities."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(scale=1.5, size=n))
    context = f"seed={seed}, n={n}"
    original = p.copy()
    what = "softmax_jacobian(p)"
    fix = "∂p_i/∂z_j = p_i(δ_ij − p_j): " + JACOBIAN
    got = as_array(call(softmax_jacobian, p, what=what, fix=fix), what)
    if not np.array_equal(p, original):
        raise CheckFailed("softmax_jacobian changed p in place — the caller's p is overwritten",
                          "build a new matrix and leave p alone")
    if got.shape == (n,):
        raise CheckFailed(f"{what} has shape ({n},): the Jacobian is the full ({n}, {n}) matrix "
                          "∂p_i/∂z_j, not only its diagonal", fix)
    expect_shape(got, (n, n), what, "one row per output p_i, one column per input z_j", fix)
    expect_close(got, ref.softmax_jacobian(p), what, _jacobian_mistakes(p), context, fix=fix)

    for label, special in (("uniform p", np.full(n, 1.0 / n)), ("one-hot p", np.eye(n)[n // 2])):
        got = call(softmax_jacobian, special, what=f"softmax_jacobian of a {label}", fix=fix)
        expect_close(got, ref.softmax_jacobian(special), f"softmax_jacobian of a {label}",
                     _jacobian_mistakes(special), context, fix=fix)
    passed(f"softmax_jacobian matches p_i(δ_ij − p_j) for random, uniform and one-hot p (n={n})",
           verbose)


def _entropy_mistakes(p: np.ndarray, axis: int) -> list[tuple[np.ndarray, str]]:
    """What the classic entropy mistakes return for probabilities p along axis."""
    h = ref.entropy(p, axis=axis)
    with quiet():
        terms = -p * np.log(np.where(p > 0, p, 1.0))
    other = 0 if axis % p.ndim != 0 else p.ndim - 1
    return [
        (h / math.log(2), "this is the entropy in bits (log base 2), not in nats", "the natural log: np.log"),
        (h / math.log(10), "this uses log base 10, not the natural log", "the natural log: np.log"),
        (-h, "the sign is flipped: entropy is −Σ p log p, never negative", "-(p * log p).sum(axis=axis)"),
        (ref.entropy(p, axis=other),
         f"you summed along axis {other}; the entropy runs along `axis` (here {axis})",
         "pass `axis` to the sum"),
        (np.sum(terms), "you summed over the whole array: each slice along `axis` has its own entropy",
         "sum along `axis` only"),
        (terms, "you return −p log p entry by entry, not its sum", "sum it along `axis`"),
        (h / p.shape[axis], "you took the mean along `axis`; the entropy is the sum", ".sum(axis=axis)"),
    ]


def _expect_entropy(got, p: np.ndarray, axis: int, what: str, context: str) -> None:
    """Compare one entropy result with the reference, NaN at p = 0 named first."""
    got = as_array(got, what)
    want = ref.entropy(p, axis=axis)
    if got.shape == want.shape and np.any(np.isnan(got)):
        raise CheckFailed(
            f"{what} ({context}) contains NaN where p has zeros: log(0) = −inf and 0·(−inf) = NaN, but "
            "0·log 0 must count as 0", "take the log of np.where(p > 0, p, 1) (log 1 = 0)")
    expect_close(got, want, what, _entropy_mistakes(p, axis), context, fix=ENTROPY_FIX)



def _numpy_warnings(fn: Callable, *args, **kwargs) -> list[str]:
    """The NumPy RuntimeWarnings ``fn(*args, **kwargs)`` raises under NumPy's default settings."""
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
        warnings.simplefilter("always")
        try:
            fn(*args, **kwargs)
        except Exception:  # the values were checked already; only the warnings matter here
            pass
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@hinted
def check_entropy(entropy: Callable, seed: int = 0, shape: tuple[int, int] = (4, 6),
                  verbose: bool = True) -> None:
    """Check a learner's ``entropy(p, axis=-1)`` on random rows with zeros, a one-hot and a uniform row."""
    rng = np.random.default_rng(seed)
    n_rows, n = shape
    p = softmax(rng.normal(scale=2.0, size=shape))
    p[0, : n // 2] = 0.0  # some exact zeros
    p[1] = np.eye(n)[rng.integers(n)]  # one-hot: entropy 0
    p[2] = 1.0 / n  # uniform: entropy log n
    p /= p.sum(axis=-1, keepdims=True)
    context = f"seed={seed}, shape {shape}, zeros in row 0, one-hot row 1, uniform row 2"
    original = p.copy()

    got = call(entropy, p, what="entropy(p)", fix=ENTROPY_FIX)
    if not np.array_equal(p, original):
        raise CheckFailed("entropy changed p in place (e.g. p[p == 0] = 1): the caller's "
                          "probabilities must stay as they were", "work on np.where(...) instead")
    _expect_entropy(got, p, -1, "entropy(p) along the last axis", context)

    pt = p.T.copy()  # the same distributions as columns
    got0 = as_array(call(entropy, pt, axis=0, what="entropy(p, axis=0)", fix=ENTROPY_FIX),
                    "entropy(p, axis=0)")
    if same(got0, ref.entropy(pt, axis=-1)):
        raise CheckFailed("entropy(p, axis=0): the `axis` argument is ignored", "pass it to the sum")
    _expect_entropy(got0, pt, 0, "entropy(p, axis=0)", context)

    row = p[0]
    _expect_entropy(call(entropy, row, what="entropy of a 1-D p", fix=ENTROPY_FIX), row, -1,
                    "entropy of a 1-D p", context)

    noise = _numpy_warnings(entropy, p)
    if noise:  # the exercise asks for zeros without a warning: every learner's later cell would print it
        raise CheckFailed(f"entropy(p) makes NumPy warn at p = 0 ({noise[0]!r}): the numbers are right, but "
                          "your code still computes log(0) and throws the −inf or NaN away afterwards "
                          "(np.nansum, np.where(…, p * np.log(p), 0) and masks all do), and the exercise "
                          "asks for zeros without a warning",
                          "never hand log a zero: give it a stand-in whose log is 0 — "
                          "-(p * np.log(np.where(p > 0, p, 1))).sum(axis=axis)")
    passed("entropy matches −Σ p log p in nats along both axes, with zeros, one-hot and uniform "
           "rows, without NaN and without a warning", verbose)

