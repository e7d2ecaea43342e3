"""The lesson 03 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles (other random generators, loops, torch) pass."""

import math
import warnings

import numpy as np
import pytest
import torch

from helpers import scaling as ref
from helpers.attention import softmax
from helpers.checks import check_entropy, check_score_std, check_softmax_jacobian
from helpers.checks.scaling import std_rel_error


def _passes(check, fn, capsys, **kwargs):
    """The check passes fn, says so, and neither warns nor writes to stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(fn, **kwargs)
    out = capsys.readouterr()
    assert "✓" in out.out and out.err == ""
    assert not caught, [str(w.message) for w in caught]


def _fails(check, fn, match, capsys, **kwargs):
    """The check fails fn with a message matching ``match``, silently."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AssertionError, match=match):
            check(fn, **kwargs)
    assert capsys.readouterr().err == "" and not caught


# ---------------------------------------------------------------- score_std


def std_legacy_transposed(d_k, n_pairs=10_000, seed=0):
    rs = np.random.RandomState(seed)  # the legacy generator, pairs as columns, ddof=0
    q, k = rs.randn(d_k, n_pairs), rs.randn(d_k, n_pairs)
    return float(np.einsum("dn,dn->n", q, k).std())


def std_one_draw_by_hand(d_k, n_pairs=10_000, seed=0):
    qk = np.random.default_rng(seed).normal(size=(2, n_pairs, d_k))
    s = (qk[0] * qk[1]).sum(-1)
    return math.sqrt(np.mean(s**2) - np.mean(s) ** 2)


def std_torch(d_k, n_pairs=10_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    return (q * k).sum(dim=1).std()  # a 0-d tensor


def std_two_generators(d_k, n_pairs=10_000, seed=0):
    q = np.random.default_rng([seed, 0]).standard_normal((n_pairs, d_k))
    k = np.random.default_rng([seed, 1]).standard_normal((n_pairs, d_k))
    return np.std(np.sum(q * k, axis=1), ddof=1)


def std_loop(d_k, n_pairs=10_000, seed=0):
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(n_pairs):  # one pair at a time
        q, k = rng.standard_normal(d_k), rng.standard_normal(d_k)
        scores.append(q @ k)
    return np.std(scores)


def std_float32(d_k, n_pairs=10_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_pairs, d_k), dtype=np.float32)  # float32 draws: another sample
    k = rng.standard_normal((n_pairs, d_k), dtype=np.float32)
    return float(np.std(np.einsum("nd,nd->n", q, k)))


@pytest.mark.parametrize("fn", [ref.score_std, std_legacy_transposed, std_one_draw_by_hand, std_torch,
                                std_two_generators, std_loop, std_float32])
def test_score_std_check_passes_correct_variants(fn, capsys):
    _passes(check_score_std, fn, capsys)
    _passes(check_score_std, fn, capsys, seed=12345, d_k=100, n_pairs=20_000)


def _scores(d_k, n_pairs, seed, draw="standard_normal", same=False):
    rng = np.random.default_rng(seed)
    q = getattr(rng, draw)(size=(n_pairs, d_k))
    k = q if same else getattr(rng, draw)(size=(n_pairs, d_k))
    return q, k


def std_variance(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.var(np.sum(q * k, axis=1)))


def std_uniform_01(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed, draw="random")
    return float(np.std(np.sum(q * k, axis=1)))


def std_uniform_pm1(d_k, n_pairs=10_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.uniform(-1, 1, size=(n_pairs, d_k)), rng.uniform(-1, 1, size=(n_pairs, d_k))
    return float(np.std(np.sum(q * k, axis=1)))


def std_already_scaled(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.std(np.sum(q * k, axis=1) / np.sqrt(d_k)))


def std_of_products(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.std(q * k))  # single products, never summed


def std_ignores_n_pairs(d_k, n_pairs=10_000, seed=0):
    return ref.score_std(d_k, n_pairs=10_000, seed=seed)


def std_fixed_seed(d_k, n_pairs=10_000, seed=0):
    return ref.score_std(d_k, n_pairs=n_pairs, seed=0)


def std_unseeded(d_k, n_pairs=10_000, seed=0):
    rng = np.random.default_rng()
    q, k = rng.standard_normal((n_pairs, d_k)), rng.standard_normal((n_pairs, d_k))
    return float(np.std(np.sum(q * k, axis=1)))


def std_formula(d_k, n_pairs=10_000, seed=0):
    return float(np.sqrt(d_k))


def std_same_vectors(d_k, n_pairs=10_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_pairs, d_k))
    k = np.random.default_rng(seed).standard_normal((n_pairs, d_k))  # the same numbers again
    return float(np.std(np.sum(q * k, axis=1)))


def std_mean(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.mean(np.sum(q * k, axis=1)))


def std_initialiser_scale(d_k, n_pairs=10_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(0.0, 1 / np.sqrt(d_k), size=(2, n_pairs, d_k))  # N(0, 1/d_k), as weights are drawn
    return float(np.std(np.einsum("nd,nd->n", q, k)))


def std_initialiser_scale_torch(d_k, n_pairs=10_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64) / math.sqrt(d_k)
    k = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64) / math.sqrt(d_k)
    return float((q * k).sum(-1).std())


def std_wrong_sum_axis(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.std(np.sum(q * k, axis=0)))


def std_returns_scores(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return np.sum(q * k, axis=1)


def std_crashes(d_k, n_pairs=10_000, seed=0):
    q, k = _scores(d_k, n_pairs, seed)
    return float(np.std(q @ k))  # (n, d) @ (n, d): shapes do not fit


@pytest.mark.parametrize("fn, match", [
    (std_variance, "variance of q·k"),
    (std_uniform_01, r"uniform draws on \[0, 1\)"),
    (std_uniform_pm1, r"uniform draws on \[-1, 1\]"),
    (std_already_scaled, r"\*scaled\* score q·k/√d_k"),
    (std_of_products, "single product"),
    (std_ignores_n_pairs, "`n_pairs` argument is ignored"),
    (std_fixed_seed, "`seed` argument is ignored"),
    (std_unseeded, "the same seed must give the same result"),
    (std_formula, "that is the formula"),
    (std_same_vectors, "q and k are the same vectors"),
    (std_mean, "the mean of q·k"),
    (std_initialiser_scale, r"^you drew the entries with variance 1/d_k.*\n  checked: .* = 0\.12\d*"),
    (std_initialiser_scale_torch, r"^you drew the entries with variance 1/d_k.*\n  checked: .* = 0\.12\d*"),
    (std_wrong_sum_axis, "summed over the pairs instead of over the d_k components"),
    (std_returns_scores, "should be one number"),
    (std_crashes, "raised ValueError"),
])
def test_score_std_check_names_each_mistake(fn, match, capsys):
    _fails(check_score_std, fn, match, capsys)


def test_score_std_check_tells_the_initialiser_scale_from_the_mean_at_every_hidden_width(capsys):
    """At d_k = 64, 1/√d_k = 0.125 lies within the spread of the mean of q·k: each is still named as
    itself for the widths and seeds the hidden tests draw."""
    rng = np.random.default_rng(1)
    for seed, d_k in zip(range(12), rng.integers(8, 129, size=12)):
        _fails(check_score_std, std_initialiser_scale, "variance 1/d_k", capsys, seed=seed, d_k=int(d_k))
        _fails(check_score_std, std_mean, "the mean of q·k", capsys, seed=seed, d_k=int(d_k))


def test_score_std_check_tolerance_follows_the_sample_size():
    # Relative error of a sample std of q·k: about 1/√(2n) for wide vectors, more for narrow ones.
    assert std_rel_error(10_000, 100_000) == pytest.approx(1 / math.sqrt(2 * 100_000), rel=1e-3)
    assert std_rel_error(1, 100_000) == pytest.approx(math.sqrt(2 / 100_000))
    # ... and it is honest: 200 seeds of the reference stay within 3 standard errors.
    d_k, n = 16, 2_000
    errors = [ref.score_std(d_k, n, seed) / math.sqrt(d_k) - 1 for seed in range(200)]
    assert np.std(errors) == pytest.approx(std_rel_error(d_k, n), rel=0.15)


def test_score_std_check_rejects_a_clear_miss_without_a_known_mistake():
    with pytest.raises(AssertionError, match=r"expected about √64 = 8"):
        check_score_std(lambda d_k, n_pairs=10_000, seed=0: 1.2 * ref.score_std(d_k, n_pairs, seed))


# ---------------------------------------------------------------- softmax_jacobian


def jacobian_loops(p):
    n = len(p)
    return [[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)] for i in range(n)]


def jacobian_broadcast(p):
    p = np.asarray(p, dtype=float)
    return p[:, None] * (np.eye(len(p)) - p[None, :])


def jacobian_autograd(p):
    z = torch.log(torch.as_tensor(p, dtype=torch.float64))  # softmax(log p) = p
    return torch.autograd.functional.jacobian(lambda t: torch.softmax(t, dim=0), z)


def jacobian_float32(p):
    p = np.asarray(p, dtype=np.float32)
    return np.diag(p) - np.outer(p, p)


@pytest.mark.parametrize("fn", [ref.softmax_jacobian, jacobian_loops, jacobian_broadcast, jacobian_autograd,
                                jacobian_float32])
def test_softmax_jacobian_check_passes_correct_variants(fn, capsys):
    _passes(check_softmax_jacobian, fn, capsys)
    _passes(check_softmax_jacobian, fn, capsys, seed=7, n=9)


def jacobian_in_place(p):
    result = np.diag(p) - np.outer(p, p)
    p[:] = 0.0  # "clean up" the caller's array
    return result


def jacobian_eye_minus_outer_torch(p):
    p = torch.as_tensor(p)
    return torch.eye(len(p), dtype=p.dtype) - torch.outer(p, p)


@pytest.mark.parametrize("fn, match", [
    (lambda p: np.diag(p * (1 - p)), "only the diagonal p_i"),
    (lambda p: np.outer(p, p) - np.diag(p), "the sign is flipped"),
    (lambda p: np.diag(p), r"the −p_i p_j term is missing"),
    (lambda p: -np.outer(p, p), "the δ_ij term is missing"),
    (lambda p: p[:, None] * (1 - p[None, :]), r"δ_ij is missing: off the diagonal"),
    (lambda p: p[None, :] * (1 - p[:, None]), r"p_j\(1 − p_i\): transposed"),
    (lambda p: np.diag(p) - p[:, None] ** 2, "row i subtracts p_i²"),
    (lambda p: np.diag(p) - p[None, :] ** 2, "transposed and squares one factor"),
    (lambda p: np.eye(len(p)) - p[None, :], "the factor p_i is missing"),
    (lambda p: np.eye(len(p)) - p[:, None], "the factor p_i is missing and the matrix is transposed"),
    (lambda p: ref.softmax_jacobian(softmax(p)), "you applied softmax to p first"),
    (lambda p: np.eye(len(p)) - np.outer(p, p), "δ_ij − p_i p_j, the identity minus the outer product"),
    (lambda p: np.identity(p.size) - np.einsum("i,j->ij", p, p), "the identity minus the outer product"),
    (jacobian_eye_minus_outer_torch, "the identity minus the outer product"),
    (lambda p: p * (1 - p), "not only its diagonal"),
    (lambda p: np.diag(p) - np.outer(p, p[:-1]), "raised ValueError"),
    (jacobian_in_place, "changed p in place"),
])
def test_softmax_jacobian_check_names_each_mistake(fn, match, capsys):
    _fails(check_softmax_jacobian, fn, match, capsys)


def test_softmax_jacobian_transpose_of_the_right_answer_is_right(capsys):
    # ∂p_i/∂z_j = p_i δ_ij − p_i p_j is symmetric, so a transposed correct Jacobian is correct:
    # the check must not fail it. Transposes of the non-symmetric mistakes are named above.
    _passes(check_softmax_jacobian, lambda p: ref.softmax_jacobian(p).T, capsys)


# ---------------------------------------------------------------- entropy


def entropy_loops(p, axis=-1):
    p = np.moveaxis(np.asarray(p, dtype=float), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(p.shape[:-1]):
        out[idx] = -sum(x * math.log(x) for x in p[idx] if x > 0)
    return out


def entropy_log_where(p, axis=-1):
    p = np.asarray(p, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)  # log only where p > 0
    return -(p * logs).sum(axis=axis)


def entropy_silenced_nan_to_num(p, axis=-1):
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.nan_to_num(p * np.log(p))  # 0·(−inf) = NaN -> 0
    return -terms.sum(axis=axis)


def entropy_torch(p, axis=-1):
    return torch.special.entr(torch.as_tensor(p)).sum(dim=axis)


def entropy_float32(p, axis=-1):
    p = torch.as_tensor(p, dtype=torch.float32)  # torch's default dtype
    return -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum(dim=axis)


@pytest.mark.parametrize("fn", [ref.entropy, entropy_loops, entropy_log_where, entropy_silenced_nan_to_num,
                                entropy_torch, entropy_float32])
def test_entropy_check_passes_correct_variants(fn, capsys):
    _passes(check_entropy, fn, capsys)
    _passes(check_entropy, fn, capsys, seed=3, shape=(5, 5))


def entropy_bits(p, axis=-1):
    return ref.entropy(p, axis) / math.log(2)


def entropy_log10(p, axis=-1):
    return ref.entropy(p, axis) / math.log(10)


def entropy_nan(p, axis=-1):
    return -np.sum(p * np.log(p), axis=axis)


def entropy_warns(p, axis=-1):
    return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=axis)


def entropy_in_place(p, axis=-1):
    zeros = p == 0
    p[zeros] = 1.0  # log 1 = 0 ... in the caller's array
    h = -np.sum(np.where(zeros, 0.0, p * np.log(p)), axis=axis)
    return h


@pytest.mark.parametrize("fn, match", [
    (entropy_bits, r"in bits \(log base 2\)"),
    (entropy_log10, "log base 10"),
    (lambda p, axis=-1: -ref.entropy(p, axis), "the sign is flipped"),
    (entropy_nan, "contains NaN where p has zeros"),
    (lambda p, axis=-1: ref.entropy(p, axis=0), "you summed along axis 0"),
    (lambda p, axis=-1: ref.entropy(p, axis=-1), "the `axis` argument is ignored"),
    (lambda p, axis=-1: ref.entropy(p, axis=None), "summed over the whole array"),
    (lambda p, axis=-1: ref.entropy(p, axis) / np.shape(p)[axis], "you took the mean"),
    (lambda p, axis=-1: -p * np.log(np.where(p > 0, p, 1.0)), "entry by entry"),
    (entropy_in_place, "changed p in place"),
])
def test_entropy_check_names_each_mistake(fn, match, capsys):
    _fails(check_entropy, fn, match, capsys)


def test_entropy_wrong_axis_is_named_on_square_input(capsys):
    # With as many rows as columns, the shapes agree and only the values tell the axes apart.
    _fails(check_entropy, lambda p, axis=-1: ref.entropy(p, axis=0), "you summed along axis 0", capsys,
           shape=(5, 5))


def test_checks_let_not_implemented_through():
    def todo(*args, **kwargs):
        raise NotImplementedError

    for check in (check_score_std, check_softmax_jacobian, check_entropy):
        with pytest.raises(NotImplementedError):
            check(todo)


def entropy_nansum(p, axis=-1):
    return -np.nansum(p * np.log(p), axis=axis)  # 0·(−inf) = NaN, which nansum skips


def entropy_masked_after(p, axis=-1):
    terms = p * np.log(p)
    terms[p == 0] = 0.0
    return -terms.sum(axis=axis)


@pytest.mark.parametrize("fn", [entropy_warns, entropy_nansum, entropy_masked_after])
def test_entropy_that_warns_fails_by_name(fn, capsys):
    """The exercise asks for zeros without a warning: right numbers that make NumPy warn at p = 0 fail,
    in the visible check and in the hidden tests' silent calls alike."""
    for verbose in (True, False):
        _fails(check_entropy, fn, r"^the numbers are right, but your code still computes log\(0\).*"
                    r"\n  checked: entropy\(p\) makes NumPy warn at p = 0 \('divide by zero", capsys,
               verbose=verbose)
