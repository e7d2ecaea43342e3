"""The lesson 06 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math

import pytest
import torch
from notebook_cells import notebook

from helpers import heads as ref
from helpers.checks.core import CheckFailed
from helpers.checks.heads import check_merge_heads, check_multi_head_attention, check_split_heads

# ---------------------------------------------------------------- split_heads / merge_heads


def split_view_permute(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, -1).permute(0, 2, 1, 3)


def split_chunks(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


def split_einops_style(x, n_heads):
    d_h = x.shape[-1] // n_heads
    return torch.stack([x[..., h * d_h:(h + 1) * d_h] for h in range(n_heads)], dim=1)


@pytest.mark.parametrize("fn", [ref.split_heads, split_view_permute, split_chunks, split_einops_style])
def test_split_check_passes_correct_variants(fn, capsys):
    check_split_heads(fn)
    check_split_heads(fn, seed=3, verbose=False)
    assert "✓" in capsys.readouterr().out


SPLIT_WRONG = [
    (lambda x, H: x.reshape(x.shape[0], H, x.shape[1], -1), "without a transpose"),
    (lambda x, H: x.reshape(x.shape[0], x.shape[1], -1, H).permute(0, 3, 1, 2), "interleaved"),
    (lambda x, H: torch.stack(x.chunk(H, dim=-1)[::-1], dim=1), "reverse order"),
    (lambda x, H: x.reshape(x.shape[0], x.shape[1], H, -1),
     "without a transpose|the head axis must come before"),  # (B, T, H, D/H) is (B, H, T, D/H) when T = H
    (lambda x, H: x.reshape(x.shape[0], x.shape[1], H, -1).permute(0, 2, 3, 1), "last two axes"),
    (lambda x, H: None, "forget to `return`"),
]


@pytest.mark.parametrize("fn, message", SPLIT_WRONG)
def test_split_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_split_heads(fn)


def test_split_check_reports_in_place_changes():
    def mutating(x, n_heads):
        out = ref.split_heads(x.clone(), n_heads)
        x.mul_(2)
        return out

    with pytest.raises(CheckFailed, match="in place"):
        check_split_heads(mutating)


def merge_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


@pytest.mark.parametrize("fn", [ref.merge_heads, merge_permute_flatten, merge_cat])
def test_merge_check_passes_correct_variants(fn):
    check_merge_heads(fn)
    check_merge_heads(fn, seed=9, verbose=False)


MERGE_WRONG = [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "without a transpose"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "interleaved"),
    (lambda x: torch.cat(x.unbind(1)[::-1], dim=-1), "wrong order"),
    (lambda x: x.reshape(x.shape[0], x.shape[1], -1), "side by side"),
]


@pytest.mark.parametrize("fn, message", MERGE_WRONG)
def test_merge_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_merge_heads(fn)


# ---------------------------------------------------------------- multi_head_attention


def mha_loop_over_heads(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """One head at a time with column slices of the weights, as the paper writes it."""
    D = x_q.shape[-1]
    d_h = D // n_heads
    outs, weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_h, (h + 1) * d_h)
        q, k, v = x_q @ w_q[:, cols], x_kv @ w_k[:, cols], x_kv @ w_v[:, cols]
        scores = q @ k.transpose(1, 2) / math.sqrt(d_h)
        if mask is not None:
            m = torch.broadcast_to(mask, (x_q.shape[0], n_heads, q.shape[1], k.shape[1]))[:, h]
            scores = torch.where(m, scores, torch.tensor(-math.inf, dtype=scores.dtype))
        w = torch.softmax(scores, -1)
        w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
        outs.append(w @ v)
        weights.append(w)
    return torch.cat(outs, -1) @ w_o, torch.stack(weights, 1)


def mha_via_sdpa_einsum(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T_q, D = x_q.shape
    q = torch.einsum("btd,de->bte", x_q, w_q).unflatten(-1, (n_heads, -1)).transpose(1, 2)
    k = torch.einsum("btd,de->bte", x_kv, w_k).unflatten(-1, (n_heads, -1)).transpose(1, 2)
    v = torch.einsum("btd,de->bte", x_kv, w_v).unflatten(-1, (n_heads, -1)).transpose(1, 2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -torch.inf)
    w = scores.softmax(-1).nan_to_num(0.0)
    return torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, T_q, D) @ w_o, w


def mha_float32(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Computed in float32, like nn.MultiheadAttention's default, and cast back to the input's dtype."""
    out, w = ref.multi_head_attention(*(t.float() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), n_heads, mask)
    return out.to(x_q.dtype), w.to(x_q.dtype)


@pytest.mark.parametrize("fn", [ref.multi_head_attention, mha_loop_over_heads, mha_via_sdpa_einsum,
                                mha_float32])
def test_mha_check_passes_correct_variants(fn):
    check_multi_head_attention(fn)
    check_multi_head_attention(fn, seed=4, B=1, T_q=5, T_kv=2, D=8, n_heads=4, verbose=False)
    check_multi_head_attention(fn, seed=5, B=3, T_q=1, T_kv=6, D=6, n_heads=1, verbose=False)


def _wrong(scale="head", split="ok", merge="ok", w_o=True, transpose=False, dim=-1, mask_mode="ok",
           nan=False, kv_from_q=False, proj="qkv"):
    """A multi-head attention written independently of the checks, with one mistake switched on.

    ``proj`` says which of w_q, w_k, w_v projects the queries, the keys and the values.
    """
    def fn(x_q, x_kv, w_q, w_k, w_v, w_out, n_heads, mask=None):
        x_kv = x_q if kv_from_q else x_kv
        by_name = dict(zip("qkv", (w_q, w_k, w_v)))
        ws = [w.T if transpose else w for w in (*(by_name[name] for name in proj), w_out)]
        B, T_q, D = x_q.shape
        H, d_h = n_heads, D // n_heads

        def sp(t):
            if split == "reshape":
                return t.reshape(B, H, t.shape[1], d_h)
            if split == "interleave":
                return t.reshape(B, t.shape[1], d_h, H).permute(0, 3, 1, 2)
            return t.reshape(B, t.shape[1], H, d_h).transpose(1, 2)

        q, k, v = sp(x_q @ ws[0]), sp(x_kv @ ws[1]), sp(x_kv @ ws[2])
        scores = q @ k.transpose(-2, -1) / {"head": math.sqrt(d_h), "model": math.sqrt(D)}[scale]
        if mask is not None and mask_mode != "after":
            scores = scores.masked_fill(mask if mask_mode == "inverted" else ~mask, -math.inf)
        w = torch.softmax(scores, dim)
        if not nan:
            w = w.nan_to_num(0.0)
        if mask is not None and mask_mode == "after":
            w = w * mask
        heads = w @ v
        if merge == "reshape":
            cat = heads.reshape(B, T_q, D)
        elif merge == "reversed":
            cat = heads.flip(1).transpose(1, 2).reshape(B, T_q, D)
        else:
            cat = heads.transpose(1, 2).reshape(B, T_q, D)
        return (cat @ ws[3] if w_o else cat), w
    return fn


MHA_WRONG = [
    (_wrong(scale="model"), "√D"),
    (_wrong(w_o=False), "without the output projection"),
    (_wrong(split="reshape"), "split without a transpose"),
    (_wrong(merge="reshape"), "merged without a transpose"),
    (_wrong(split="interleave"), "interleaved"),
    (_wrong(transpose=True), r"transposed \(x @ w.T\)"),
    (_wrong(merge="reversed"), "wrong order"),
    (_wrong(dim=-2), "over the queries"),
    (_wrong(mask_mode="inverted"), "mask is inverted"),
    (_wrong(mask_mode="after"), "after the softmax"),
    (_wrong(nan=True), "NaN"),
    (lambda *a, mask=None: ref.multi_head_attention(*a)[0], "must return a pair"),
    (lambda *a, mask=None: ref.multi_head_attention(*a, mask=mask)[::-1], r"returned \(weights, output\)"),
    (lambda *a, mask=None: (lambda o, w: (o, w.mean(1)))(*ref.multi_head_attention(*a, mask=mask)),
     "not their average"),
    (lambda *a, mask=None: ref.multi_head_attention(*a), "mask"),
    (_wrong(kv_from_q=True), "the keys and values come from x_q"),
    (_wrong(proj="kqv"), "w_q and w_k are swapped"),
    (_wrong(proj="qqv"), "the keys were projected with w_q, not w_k"),
    (_wrong(proj="kkv"), "the queries were projected with w_k, not w_q"),
    (_wrong(proj="qkq"), "the values were projected with w_q, not w_v"),
    (_wrong(proj="qkk"), "the values were projected with w_k, not w_v"),
]


@pytest.mark.parametrize("fn, message", MHA_WRONG)
def test_mha_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_multi_head_attention(fn)


def test_mha_check_names_keys_and_values_from_x_q_also_when_both_inputs_have_one_length():
    """T_q = T_kv: the weights have the right shape, and only their values show the mistake."""
    with pytest.raises(CheckFailed, match="the keys and values come from x_q"):
        check_multi_head_attention(_wrong(kv_from_q=True), T_q=4, T_kv=4)
    check_multi_head_attention(ref.multi_head_attention, T_q=4, T_kv=4, verbose=False)


def test_unfinished_exercises_are_not_failures():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (check_split_heads, check_merge_heads, check_multi_head_attention):
        with pytest.raises(NotImplementedError):
            check(stub)


def test_checks_write_nothing_to_stderr(capsys):
    with pytest.raises(CheckFailed):
        check_multi_head_attention(_wrong(nan=True))
    with pytest.raises(CheckFailed):
        check_multi_head_attention(_wrong(dim=-2))
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: split_heads and merge_heads reshape without the transpose, and
# multi_head_attention is right but calls both.
NOTEBOOK = """
import math
import torch

def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)

def merge_heads(x):
    B, H, T, d_h = x.shape
    return x.reshape(B, T, H * d_h)

def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q, n_heads)
    k, v = split_heads(x_kv @ w_k, n_heads), split_heads(x_kv @ w_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return merge_heads(weights @ v) @ w_o, weights
"""


def test_multi_head_attention_is_checked_with_the_course_split_and_merge(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["split_heads"], nb["merge_heads"]
    with pytest.raises(CheckFailed, match="without a transpose"):
        check_split_heads(nb["split_heads"])
    with pytest.raises(CheckFailed, match="without a transpose"):
        check_merge_heads(nb["merge_heads"])
    mha = nb["multi_head_attention"]
    with pytest.raises(CheckFailed):  # with the learner's split and merge: charged a second time
        check_multi_head_attention.__wrapped__(mha)
    check_multi_head_attention(mha)
    out = capsys.readouterr().out
    assert "costs points only in split_heads_tests or merge_heads_tests" in out and "✓" in out
    assert (nb["split_heads"], nb["merge_heads"]) == learners


def test_a_wrong_multi_head_attention_still_fails_with_the_course_split_and_merge():
    nb = notebook(NOTEBOOK.replace("merge_heads(weights @ v) @ w_o", "merge_heads(weights @ v)"))
    mha = nb["multi_head_attention"]
    with pytest.raises(CheckFailed, match="without the output projection"):
        check_multi_head_attention(mha)


def mha_in_float32(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Computes in float32 and forgets to cast back: the result does not keep the inputs' dtype."""
    return ref.multi_head_attention(*(t.float() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), n_heads, mask)


def test_mha_check_names_a_result_that_loses_the_inputs_dtype():
    with pytest.raises(CheckFailed, match="has dtype torch.float32, but the inputs"):
        check_multi_head_attention(mha_in_float32, verbose=False)
