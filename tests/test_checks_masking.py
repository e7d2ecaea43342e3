"""The lesson 04 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math
import re

import numpy as np
import pytest
import torch
from notebook_cells import notebook

from helpers import masking as ref
from helpers.checks.core import CheckFailed
from helpers.checks.masking import (
    check_attention_matrix_bytes,
    check_causal_attention_with_cache,
    check_causal_mask,
    check_masked_attention,
    check_padding_mask,
)

# ---------------------------------------------------------------- causal_mask


def causal_by_comparison(n):
    i = torch.arange(n)
    return i[None, :] <= i[:, None]  # key j (columns) ≤ query i (rows)


def causal_loops(n):
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def causal_not_future(n):
    return ~torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


@pytest.mark.parametrize("fn", [ref.causal_mask, causal_by_comparison, causal_loops, causal_not_future])
def test_causal_mask_check_passes_correct_variants(fn, capsys):
    check_causal_mask(fn)
    check_causal_mask(fn, seed=11, verbose=False)
    assert "✓" in capsys.readouterr().out


def _ones(n):
    return torch.ones(n, n, dtype=torch.bool)


@pytest.mark.parametrize("fn, message", [
    (lambda n: _ones(n).tril(-1), "diagonal is blocked"),
    (lambda n: _ones(n).tril(1), "one future key leaks in"),
    (lambda n: torch.arange(n)[None, :] < torch.arange(n)[:, None], "diagonal is blocked"),
    (lambda n: _ones(n).triu(), "upper triangle"),
    (lambda n: _ones(n).triu(1), "True marks the blocked"),
    (lambda n: torch.ones(n, n).tril(), "dtype torch.float32"),
    (lambda n: torch.tril(torch.ones(n, n, dtype=torch.int64)), "dtype torch.int64"),
    (lambda n: np.tril(np.ones((n, n), dtype=bool)), "NumPy"),
    (lambda n: _ones(n), "nothing is blocked"),
    (lambda n: None, "forget to `return`"),
    (lambda n: _ones(n + 1).tril(), "shape"),
    (lambda n: torch.eye(n, dtype=torch.bool), "wrong at index"),
])
def test_causal_mask_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_causal_mask(fn)


# ---------------------------------------------------------------- padding_mask


def padding_loops(lengths, max_len):
    return torch.tensor([[j < int(length) for j in range(max_len)] for length in lengths], dtype=torch.bool)


def padding_stack(lengths, max_len):
    return torch.stack([torch.arange(max_len) < length for length in torch.as_tensor(lengths)])


def padding_greater(lengths, max_len):
    return torch.as_tensor(lengths).unsqueeze(1) > torch.arange(max_len)


@pytest.mark.parametrize("fn", [ref.padding_mask, padding_loops, padding_stack, padding_greater])
def test_padding_mask_check_passes_correct_variants(fn):
    check_padding_mask(fn)
    check_padding_mask(fn, seed=5, verbose=False)


def _pos_len(lengths, max_len):
    return torch.arange(max_len)[None, :], torch.as_tensor(lengths)[:, None]


def padding_list_only(lengths, max_len):
    if isinstance(lengths, torch.Tensor):
        raise TypeError("expected a list")
    return ref.padding_mask(lengths, max_len)


@pytest.mark.parametrize("fn, message", [
    (lambda lengths, m: (lambda p, n: p <= n)(*_pos_len(lengths, m)), "one position too many"),
    (lambda lengths, m: (lambda p, n: p >= n)(*_pos_len(lengths, m)), "True marks the padding"),
    (lambda lengths, m: (lambda p, n: p < n - 1)(*_pos_len(lengths, m)), "one position too few"),
    (lambda lengths, m: ref.padding_mask(lengths, m).T, "transposed"),
    (lambda lengths, m: ref.padding_mask(lengths, int(max(lengths))), "max_len columns"),
    (lambda lengths, m: ref.padding_mask(lengths, m).float(), "dtype torch.float32"),
    (lambda lengths, m: ref.padding_mask(lengths, m).numpy(), "NumPy"),
    (padding_list_only, "raised TypeError"),
])
def test_padding_mask_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_padding_mask(fn)


def test_a_mask_of_lengths_that_takes_only_lists_gets_a_hint_for_both():
    with pytest.raises(CheckFailed) as err:
        check_padding_mask(padding_list_only)
    assert "torch.as_tensor" in err.value.fix and "torch.as_tensor" not in str(err.value)


# ---------------------------------------------------------------- masked_attention


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def masked_big_negative(q, k, v, mask=None):
    """-1e9 instead of -inf is fine as long as rows with no allowed key are zeroed."""
    s = _scores(q, k)
    if mask is None:
        w = torch.softmax(s, dim=-1)
    else:
        w = torch.softmax(s.masked_fill(~mask, -1e9), dim=-1) * mask.any(dim=-1, keepdim=True)
    return w @ v, w


def masked_manual_softmax(q, k, v, mask=None):
    s = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    total = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(total > 0, total, torch.ones_like(total))
    return torch.einsum("...ij,...jd->...id", w, v), w


def masked_renormalised(q, k, v, mask=None):
    """Zeroing after the softmax *and renormalising* is the same thing (up to rounding)."""
    w = torch.softmax(_scores(q, k), dim=-1)
    if mask is not None:
        w = w * mask
        w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    return w @ v, w


def masked_float32(q, k, v, mask=None):
    out, w = ref.masked_attention(q.float(), k.float(), v.float(), mask)
    return out, w


def masked_sdpa_inside(q, k, v, mask=None):
    s = _scores(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.nan_to_num(), w


@pytest.mark.parametrize("fn", [ref.masked_attention, masked_big_negative, masked_manual_softmax,
                                masked_renormalised, masked_float32, masked_sdpa_inside])
def test_masked_attention_check_passes_correct_variants(fn):
    check_masked_attention(fn)
    check_masked_attention(fn, seed=3, batch=(), n_q=5, n_k=2, d_k=7, d_v=4, verbose=False)
    check_masked_attention(fn, seed=4, batch=(3,), n_q=1, n_k=9, d_k=2, d_v=9, verbose=False)


def _masked(weights_fn, out_fn=lambda w, v: w @ v):
    def fn(q, k, v, mask=None):
        s = _scores(q, k)
        w = torch.softmax(s, dim=-1) if mask is None else weights_fn(s, mask, q, k)
        return out_fn(w, v), w

    return fn


NEG = float("-inf")
MASKED_MISTAKES = [
    (_masked(lambda s, m, q, k: torch.softmax(s.masked_fill(m, NEG), -1).nan_to_num()), "inverted"),
    (_masked(lambda s, m, q, k: torch.softmax(s, -1)), "mask is ignored"),
    (_masked(lambda s, m, q, k: torch.softmax(s, -1) * m), "after the softmax"),
    (_masked(lambda s, m, q, k: torch.softmax(s, -1).masked_fill(~m, NEG)), "-inf was written into"),
    (_masked(lambda s, m, q, k: torch.softmax(s * m, -1)), "set to 0, not -inf"),
    (_masked(lambda s, m, q, k: torch.softmax(s.masked_fill(~m, NEG), -2).nan_to_num()), "query axis"),
    (_masked(lambda s, m, q, k: torch.softmax(s.masked_fill(~m, NEG), -1)), "gives NaN"),
    (_masked(lambda s, m, q, k: torch.softmax(s.masked_fill(~m, -1e9), -1)), "equal weights 1/n_k"),
    (_masked(lambda s, m, q, k: torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~m, NEG), -1)
             .nan_to_num()), "√d_k"),
    (_masked(lambda s, m, q, k: ref.masked_attention(q, k, k, m)[1], out_fn=lambda w, v: 2 * (w @ v)),
     "look at the last step"),
]


@pytest.mark.parametrize("fn, message", MASKED_MISTAKES)
def test_masked_attention_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_masked_attention(fn)


def test_masked_attention_check_names_unscaled_scores_without_a_mask():
    def unscaled(q, k, v, mask=None):
        return ref.masked_attention(q * math.sqrt(q.size(-1)), k, v, mask)

    with pytest.raises(CheckFailed, match="not divided by √d_k"):
        check_masked_attention(unscaled)


@pytest.mark.parametrize("fn, message", [
    (lambda q, k, v, mask=None: ref.masked_attention(q, k, v, mask)[0], "must return a pair"),
    (lambda q, k, v, mask=None: ref.masked_attention(q, k, v, ~~mask), "mask=None"),
    (lambda q, k, v, mask=None: ref.masked_attention(q, k.T, v, mask), r"(?s)raised .*transpose\(-2, -1\)"),
    (lambda q, k, v, mask=None: (lambda w: (w @ v, w[(0,) * (w.ndim - 2)]))(
        ref.masked_attention(q, k, v, mask)[1]), "batch"),
])
def test_masked_attention_check_reports_crashes_and_shapes(fn, message):
    """The message says what went wrong; for a crash, the hint one step further says how it should go."""
    with pytest.raises(CheckFailed) as err:
        check_masked_attention(fn)
    assert re.search(message, f"{err.value}\n{err.value.fix}")


def test_masked_attention_check_reports_a_mask_changed_in_place():
    def flips(q, k, v, mask=None):
        if mask is None:
            return ref.masked_attention(q, k, v)
        blocked = mask.logical_not_()
        return ref.masked_attention(q, k, v, ~blocked)

    with pytest.raises(CheckFailed, match="in place"):
        check_masked_attention(flips)


# ---------------------------------------------------------------- causal_attention_with_cache


def cache_by_slicing(q, k, v):
    rows = [ref.masked_attention(q[..., t : t + 1, :], k[..., : t + 1, :], v[..., : t + 1, :])[0]
            for t in range(q.size(-2))]
    return torch.cat(rows, dim=-2)


def cache_preallocated(q, k, v):
    n = q.size(-2)
    cache_k, cache_v = torch.empty_like(k), torch.empty_like(v)
    out = torch.empty(*q.shape[:-1], v.size(-1), dtype=v.dtype)
    for t in range(n):
        cache_k[..., t, :], cache_v[..., t, :] = k[..., t, :], v[..., t, :]
        s = (cache_k[..., : t + 1, :] @ q[..., t, :, None])[..., 0] / math.sqrt(q.size(-1))  # (..., t + 1)
        w = torch.softmax(s, dim=-1)
        out[..., t, :] = (w[..., None] * cache_v[..., : t + 1, :]).sum(dim=-2)
    return out


def cache_stacked(q, k, v):
    outputs, keys, values = [], [], []
    for t in range(q.shape[-2]):
        keys.append(k[..., t, :])
        values.append(v[..., t, :])
        cache_k, cache_v = torch.stack(keys, dim=-2), torch.stack(values, dim=-2)
        w = torch.softmax(torch.einsum("...d,...jd->...j", q[..., t, :], cache_k) / q.shape[-1] ** 0.5, -1)
        outputs.append(torch.einsum("...j,...jd->...d", w, cache_v))
    return torch.stack(outputs, dim=-2)


def cache_float32(q, k, v):
    """Decoding in float32 (as on most accelerators), the result cast back to the input's dtype."""
    return ref.causal_attention_with_cache(q.float(), k.float(), v.float()).to(q.dtype)


@pytest.mark.parametrize("fn", [ref.causal_attention_with_cache, cache_by_slicing, cache_preallocated,
                                cache_stacked, cache_float32])
def test_cache_check_passes_correct_variants(fn):
    check_causal_attention_with_cache(fn)
    check_causal_attention_with_cache(fn, seed=2, batch=(4,), n=1, d_k=3, d_v=2, verbose=False)


def _per_step(keys):
    """Decoding where ``keys(t, n)`` picks the positions step t attends to."""
    def fn(q, k, v):
        rows = []
        for t in range(q.size(-2)):
            idx = keys(t, q.size(-2))
            rows.append(ref.masked_attention(q[..., t : t + 1, :], k[..., idx, :], v[..., idx, :])[0])
        return torch.cat(rows, dim=-2)

    return fn


@pytest.mark.parametrize("fn, message", [
    (_per_step(lambda t, n: list(range(n))), "whole sequence"),
    (_per_step(lambda t, n: [t]), "only to its own token"),
    (_per_step(lambda t, n: list(range(t))), "only the earlier tokens"),
    (lambda q, k, v: ref.masked_attention(q, k, v, ref.causal_mask(q.size(-2)))[0], r"full \(n, n\) score"),
    (lambda q, k, v: ref.masked_attention(q, k, v, ref.causal_mask(q.size(-2))), "return only the output"),
    (lambda q, k, v: ref.causal_attention_with_cache(q, k, v)[..., -1:, :], "one output row per query"),
    (lambda q, k, v: ref.causal_attention_with_cache(q * math.sqrt(q.size(-1)), k, v), "√d_k"),
])
def test_cache_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_causal_attention_with_cache(fn)


# ---------------------------------------------------------------- attention_matrix_bytes


def bytes_prod(n_tokens, n_heads=1, bytes_per_element=2):
    return math.prod([n_tokens, n_tokens, n_heads, bytes_per_element])


def bytes_numpy(n_tokens, n_heads=1, bytes_per_element=2):
    return np.int64(n_tokens) ** 2 * n_heads * bytes_per_element


@pytest.mark.parametrize("fn", [ref.attention_matrix_bytes, bytes_prod, bytes_numpy])
def test_bytes_check_passes_correct_variants(fn):
    check_attention_matrix_bytes(fn)
    check_attention_matrix_bytes(fn, seed=9, verbose=False)


def _bytes(formula, default_b=2):
    """attention_matrix_bytes written as formula(n, h, b)."""
    def fn(n_tokens, n_heads=1, bytes_per_element=default_b):
        return formula(n_tokens, n_heads, bytes_per_element)

    return fn


@pytest.mark.parametrize("fn, message", [
    (_bytes(lambda n, h, b: n**2 * b), "heads are missing"),
    (_bytes(lambda n, h, b: n**2 * h * b * 8), "bits"),
    (_bytes(lambda n, h, b: n * h * b), "n instead of n²"),
    (_bytes(lambda n, h, b: n**2 * h), "numbers, not bytes"),
    (_bytes(lambda n, h, b: n**2 * h * b / 2**20), "MiB"),
    (_bytes(lambda n, h, b: n**2 * h * b, default_b=4), "default bytes_per_element must be 2"),
    (_bytes(lambda n, h, b: 2 * n**2 * h * b), "twice too much"),
    (_bytes(lambda n, h, b: math.pow(n, 2) * h * b), "is an int"),
    (_bytes(lambda n, h, b: torch.tensor(n**2 * h * b)), "is an int"),
    (lambda n, heads=1, bpe=2: n * n * heads * bpe, "unexpected keyword argument"),
    (_bytes(lambda n, h, b: None), "forget to `return` the number of bytes"),
    (_bytes(lambda n, h, b: f"{n**2 * h * b} bytes"), "one integer number of bytes"),
])
def test_bytes_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_attention_matrix_bytes(fn)


# ---------------------------------------------------------------- every check


@pytest.mark.parametrize("check, args", [
    (check_causal_mask, 1), (check_padding_mask, 2), (check_masked_attention, 4),
    (check_causal_attention_with_cache, 3), (check_attention_matrix_bytes, 3),
])
def test_unfinished_exercise_is_not_a_failure(check, args):
    def stub(*_args, **_kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        check(stub)


def test_checks_write_nothing_to_stderr(capsys):
    """Any stderr text scores a grade cell 0: noisy wrong answers fail by their message only."""
    with pytest.raises(CheckFailed):
        check_masked_attention(lambda q, k, v, mask=None: ref.masked_attention(q, k.T, v, mask))
    with pytest.raises(CheckFailed):
        check_padding_mask(lambda lengths, m: torch.tensor(lengths)[:, None] > torch.arange(m) - 1)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: masked_attention forgets the √d_k, causal_mask is off by one (the diagonal
# is blocked), and the decoding loop is right but calls masked_attention at every step.
NOTEBOOK = """
import math
import torch

def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(-1)

def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights

def causal_attention_with_cache(q, k, v):
    cache_k, cache_v, rows = k[..., :0, :], v[..., :0, :], []
    for t in range(q.size(-2)):
        cache_k = torch.cat([cache_k, k[..., t : t + 1, :]], dim=-2)
        cache_v = torch.cat([cache_v, v[..., t : t + 1, :]], dim=-2)
        rows.append(masked_attention(q[..., t : t + 1, :], cache_k, cache_v)[0])
    return torch.cat(rows, dim=-2)
"""


def test_decoding_is_checked_with_the_course_masked_attention_and_causal_mask(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["masked_attention"], nb["causal_mask"]
    with pytest.raises(CheckFailed, match="√d_k"):
        check_masked_attention(nb["masked_attention"])
    with pytest.raises(CheckFailed, match="diagonal"):
        check_causal_mask(nb["causal_mask"])
    decode = nb["causal_attention_with_cache"]
    with pytest.raises(CheckFailed, match="√d_k"):  # with the learner's masked_attention: charged again
        check_causal_attention_with_cache.__wrapped__(decode)
    check_causal_attention_with_cache(decode)
    out = capsys.readouterr().out
    assert "costs points only in masked_attention_tests or causal_mask_tests" in out and "✓" in out
    assert (nb["masked_attention"], nb["causal_mask"]) == learners


def test_wrong_decoding_still_fails_with_the_course_masked_attention():
    nb = notebook(NOTEBOOK.replace("rows.append(masked_attention(q[..., t : t + 1, :], cache_k, cache_v)[0])",
                                   "rows.append(masked_attention(q[..., t : t + 1, :], k, v)[0])"))
    decode = nb["causal_attention_with_cache"]
    with pytest.raises(CheckFailed, match="future included"):
        check_causal_attention_with_cache(decode)


def only_square_masks(q, k, v, mask=None):
    """Applies a mask only when it is one (n_q, n_k) matrix: a broadcast padding mask is ignored."""
    return ref.masked_attention(q, k, v, mask if mask is not None and mask.dim() == 2 else None)


# 49, 125, 128, 133: seeds on which the two random lengths once both came out full, so that the
# padding case blocked nothing and a function ignoring broadcast masks passed
@pytest.mark.parametrize("seed", [*range(10), 49, 125, 128, 133])
def test_masked_attention_check_always_pads_some_sequence(seed):
    """The padding case blocks at least one key on every seed: ignoring it is always caught."""
    with pytest.raises(CheckFailed, match="padding mask"):
        check_masked_attention(only_square_masks, seed=seed, verbose=False)
