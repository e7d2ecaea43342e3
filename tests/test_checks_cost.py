"""The lesson 08 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from notebook_cells import notebook

from helpers import cost as ref
from helpers.checks.core import CheckFailed
from helpers.checks.cost import (
    blocked_variant,
    check_layer_macs,
    check_never_builds_scores,
    check_online_softmax_attention,
    check_score_share,
    growing_qkv,
)

# ---------------------------------------------------------------- layer_macs


def macs_by_shapes(n, d_model, d_ff):
    def mm(a, b, c):  # (a, b) @ (b, c)
        return a * b * c

    return {"projections": 4 * mm(n, d_model, d_model), "scores": mm(n, d_model, n),
            "mix": mm(n, n, d_model), "ffn": mm(n, d_model, d_ff) + mm(n, d_ff, d_model)}


def macs_numpy_ints(n, d_model, d_ff):
    n, d, f = np.int64(n), np.int64(d_model), np.int64(d_ff)
    return dict(ffn=2 * n * d * f, mix=n**2 * d, scores=n**2 * d, projections=4 * n * d**2)


@pytest.mark.parametrize("fn", [ref.layer_macs, macs_by_shapes, macs_numpy_ints])
def test_layer_macs_check_passes_correct_variants(fn, capsys):
    check_layer_macs(fn)
    check_layer_macs(fn, seed=9, verbose=False)
    assert "✓" in capsys.readouterr().out


def _macs(**override):
    def fn(n, d_model, d_ff):
        return {**ref.layer_macs(n, d_model, d_ff), **{k: f(n, d_model, d_ff) for k, f in override.items()}}

    return fn


def flops_as_papers_count(n, d_model, d_ff):
    """2 floating-point operations per multiply-add, as scaling-law papers count."""
    flops = lambda a, b, c: 2 * a * b * c  # noqa: E731 -- (a, b) @ (b, c)
    return {"projections": 4 * flops(n, d_model, d_model), "scores": flops(n, d_model, n),
            "mix": flops(n, n, d_model), "ffn": flops(n, d_model, d_ff) + flops(n, d_ff, d_model)}


FLOPS = r"that is FLOPs, twice the multiply-adds"


@pytest.mark.parametrize("fn, message", [
    (flops_as_papers_count, "^" + FLOPS + r".*\n  checked: .*\['projections'\] = \d+"),
    (_macs(ffn=lambda n, d, f: 4 * n * d * f), "^" + FLOPS + r".*\n  checked: .*\['ffn'\] = \d+"),
    (_macs(scores=lambda n, d, f: 2 * n * n * d, mix=lambda n, d, f: 2 * n * n * d), FLOPS),
    (_macs(projections=lambda n, d, f: 3 * n * d * d), "output projection W_O"),
    (_macs(scores=lambda n, d, f: n * d * d), "n·d² for Q Kᵀ"),
    (_macs(mix=lambda n, d, f: n * d * d), "n·d² for weights @ V"),
    (_macs(scores=lambda n, d, f: n * n), "each of the n² scores"),
    (_macs(ffn=lambda n, d, f: n * d * f), "one of the FFN's two"),
    (_macs(ffn=lambda n, d, f: 8 * n * d * d), "assumes d_ff = 4·d"),
    (_macs(ffn=lambda n, d, f: 2 * n * d * d), "d_ff is ignored"),
    (_macs(projections=lambda n, d, f: 4 * d * d), "number of weights"),
    (_macs(ffn=lambda n, d, f: 2.0 * n * d * f), "whole numbers"),
    (_macs(ffn=lambda n, d, f: 2 * n * d * f + 1), "expected"),
    (lambda n, d, f: {**ref.layer_macs(n, d, f), "softmax": n * n}, "unexpected"),
    (lambda n, d, f: {k: v for k, v in ref.layer_macs(n, d, f).items() if k != "mix"}, "missing"),
    (lambda n, d, f: list(ref.layer_macs(n, d, f).values()), "should be a dict"),
    (lambda n, d, f: None, "forget to `return`"),
    (lambda n, d, f: {k: torch.tensor(v) for k, v in ref.layer_macs(n, d, f).items()}, "should be a number"),
])
def test_layer_macs_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_layer_macs(fn)


# ---------------------------------------------------------------- score_share


def share_in_one_line(n, d_model, d_ff):
    return 2 * n * n * d_model / (4 * n * d_model**2 + 2 * n * n * d_model + 2 * n * d_model * d_ff)


def share_simplified(n, d_model, d_ff):
    return np.float64(n) / (n + 2 * d_model + d_ff)  # divide through by 2·n·d


def share_torch_float32(n, d_model, d_ff):
    """The four counts in a float32 tensor (torch's default): right to about 1e-7."""
    macs = torch.tensor(list(ref.layer_macs(n, d_model, d_ff).values()), dtype=torch.float32)
    return float((macs[1] + macs[2]) / macs.sum())


@pytest.mark.parametrize("fn", [ref.score_share, share_in_one_line, share_simplified, share_torch_float32])
def test_score_share_check_passes_correct_variants(fn):
    check_score_share(fn)
    check_score_share(fn, seed=4, verbose=False)


def _parts(n, d, f):
    m = ref.layer_macs(n, d, f)
    return m, sum(m.values()), m["scores"] + m["mix"]


@pytest.mark.parametrize("fn, message", [
    (lambda n, d, f: _parts(n, d, f)[0]["scores"] / _parts(n, d, f)[1], "only one of the two"),
    (lambda n, d, f: _parts(n, d, f)[0]["mix"] / _parts(n, d, f)[1], "only one of the two"),
    (lambda n, d, f: _parts(n, d, f)[2] / (_parts(n, d, f)[1] - _parts(n, d, f)[2]), "everything else"),
    (lambda n, d, f: 100 * ref.score_share(n, d, f), "percentage"),
    (lambda n, d, f: 1 - ref.score_share(n, d, f), r"\*but\*"),
    (lambda n, d, f: round(ref.score_share(n, d, f), 2), "expected"),
    (lambda n, d, f: "4%", "one number"),
    (lambda n, d, f: None, "forget to `return`"),
])
def test_score_share_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_score_share(fn)


# ---------------------------------------------------------------- online_softmax_attention


def online_normalised_output(q, k, v, block_size=64):
    """Keeps the output normalised after every block (rescaling by old_sum / new_sum)."""
    scale = q.size(-1) ** -0.5
    m = s = out = None
    for start in range(0, k.size(-2), block_size):
        scores = torch.einsum("...qd,...kd->...qk", q, k[..., start:start + block_size, :]) * scale
        block_max = scores.max(dim=-1, keepdim=True).values
        new_m = block_max if m is None else torch.maximum(m, block_max)
        p = (scores - new_m).exp()
        block_out = p @ v[..., start:start + block_size, :]
        if m is None:
            s, out = p.sum(-1, keepdim=True), block_out / p.sum(-1, keepdim=True)
        else:
            old = s * torch.exp(m - new_m)
            s = old + p.sum(-1, keepdim=True)
            out = (out * old + block_out) / s
        m = new_m
    return out


def online_logsumexp(q, k, v, block_size=64):
    """Carries log(sum) instead of the max and the sum, combining blocks with logaddexp."""
    lse, acc = None, None
    for start in range(0, k.size(-2), block_size):
        scores = q @ k[..., start:start + block_size, :].mT / math.sqrt(q.shape[-1])
        block_lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        block_out = torch.softmax(scores, dim=-1) @ v[..., start:start + block_size, :]
        if lse is None:
            lse, acc = block_lse, block_out
        else:
            new = torch.logaddexp(lse, block_lse)
            acc = acc * torch.exp(lse - new) + block_out * torch.exp(block_lse - new)
            lse = new
    return acc


def online_float64_inside(q, k, v, block_size=64):
    out = ref.online_softmax_attention(q.double(), k.double(), v.double(), block_size)
    return out.to(q.dtype)


def online_float32_inside(q, k, v, block_size=64):
    out = ref.online_softmax_attention(q.float(), k.float(), v.float(), block_size)
    return out.to(q.dtype)


@pytest.mark.parametrize("fn", [ref.online_softmax_attention, online_normalised_output, online_logsumexp,
                                online_float64_inside, online_float32_inside])
def test_online_check_passes_correct_variants(fn, capsys):
    check_online_softmax_attention(fn)
    check_online_softmax_attention(fn, seed=3, batch=(), n_q=2, n_k=13, d=5, d_v=7, verbose=False)
    assert "✓" in capsys.readouterr().out


def _variant(**mistake):
    return lambda q, k, v, block_size=64: blocked_variant(q, k, v, block_size, **mistake).to(q.dtype)


def online_no_max(q, k, v, block_size=64):
    s, acc = 0, 0
    for start in range(0, k.size(-2), block_size):
        p = torch.exp(q @ k[..., start:start + block_size, :].mT / math.sqrt(q.size(-1)))
        s, acc = s + p.sum(-1, keepdim=True), acc + p @ v[..., start:start + block_size, :]
    return acc / s


def online_all_at_once(q, k, v, block_size=64):
    return ref.naive_attention(q, k, v)  # block_size ignored: the full matrix is built


def online_via_torch(q, k, v, block_size=64):
    batch = q.shape[:-2]
    as_4d = [t.reshape(-1, 1, *t.shape[-2:]) for t in (q, k, v)]
    return F.scaled_dot_product_attention(*as_4d).reshape(*batch, q.size(-2), v.size(-1))


def online_cat_blocks(q, k, v, block_size=64):
    scores = torch.cat([q @ k[..., s:s + block_size, :].mT for s in range(0, k.size(-2), block_size)], -1)
    return torch.softmax(scores / math.sqrt(q.size(-1)), -1) @ v


def online_in_numpy(q, k, v, block_size=64):
    a, b, c = (t.detach().numpy() for t in (q, k, v))
    s = a @ np.swapaxes(b, -1, -2) / math.sqrt(a.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True) @ c)


def online_with_weights(q, k, v, block_size=64):
    return ref.online_softmax_attention(q, k, v, block_size), None


def online_in_place(q, k, v, block_size=64):
    out = ref.online_softmax_attention(q, k, v, block_size)
    q.mul_(1.0)
    k[..., 0, 0] = 0.0
    return out


@pytest.mark.parametrize("fn, message", [
    (_variant(rescale_sum=False, rescale_acc=False), "neither the running sum nor the accumulated"),
    (_variant(rescale_acc=False), "running sum is rescaled but the accumulated output is not"),
    (_variant(rescale_sum=False), "accumulated output is rescaled but the running sum is not"),
    (_variant(scale=1.0), "not divided by √d_k"),
    (lambda q, k, v, block_size=64: blocked_variant(q, k, v, block_size, scale=1 / q.size(-1)),
     "divided the scores by d_k"),
    (_variant(first_max_only=True), "overflowed"),
    (online_no_max, "overflowed"),
    (_variant(divide="each_block"), "inside the loop"),
    (_variant(divide="block_mean"), "averaged"),
    (_variant(divide="block_sum"), "added"),
    (_variant(skip_tail=True), "last, shorter block is skipped"),
    (online_all_at_once, "full score matrix"),
    (online_cat_blocks, "full score matrix"),
    (online_via_torch, "fused attention"),
    (online_in_numpy, "NumPy"),
    (online_with_weights, "return only the output"),
    (online_in_place, "in place"),
    (lambda q, k, v, block_size=64: ref.online_softmax_attention(q, k, v, block_size).mT, "shape"),
])
def test_online_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_online_softmax_attention(fn)


def test_unfinished_exercises_are_not_failures():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (check_layer_macs, check_score_share, check_online_softmax_attention):
        with pytest.raises(NotImplementedError):
            check(stub)


def test_spy_rejects_sizes_where_blocks_are_as_big_as_the_matrix():
    with pytest.raises(ValueError, match="far larger"):
        check_never_builds_scores(ref.online_softmax_attention, block_size=64, n_q=96, n_k=160)
    check_never_builds_scores(ref.online_softmax_attention, block_size=16, n_q=200, n_k=300)


def test_growing_keys_raise_the_maximum_of_every_block():
    q, k, _ = growing_qkv((2,), 5, 48, 8, 3, rise=8.0, seed=1)
    scores = q @ k.mT / math.sqrt(8)  # (2, 5, 48)
    block_max = scores.reshape(2, 5, 6, 8).amax(-1)  # (2, 5, 6)
    assert (block_max.diff(dim=-1) > 0).float().mean() > 0.9
    rise = (scores[..., -1] - scores[..., 0]).mean()
    assert 4 < rise < 20
    q32 = growing_qkv((), 3, 10, 4, 2, rise=1.0, dtype=torch.float32)[0]
    assert q32.dtype == torch.float32


def test_blocked_variant_defaults_are_exact():
    q, k, v = growing_qkv((3,), 4, 23, 6, 2, rise=8.0, seed=2)
    torch.testing.assert_close(blocked_variant(q, k, v, 5), ref.naive_attention(q, k, v))


def test_checks_write_nothing_to_stderr(capsys):
    with pytest.raises(CheckFailed):
        check_online_softmax_attention(online_no_max)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: layer_macs counts the scores as n·d² (the projections' shape), and
# score_share is right but calls it.
NOTEBOOK = """
def layer_macs(n, d_model, d_ff):
    return {"projections": 4 * n * d_model * d_model, "scores": n * d_model * d_model,
            "mix": n * n * d_model, "ffn": 2 * n * d_model * d_ff}

def score_share(n, d_model, d_ff):
    macs = layer_macs(n, d_model, d_ff)
    return (macs["scores"] + macs["mix"]) / sum(macs.values())
"""


def test_score_share_is_checked_with_the_course_layer_macs(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["layer_macs"]
    with pytest.raises(CheckFailed):
        check_layer_macs(learners)
    with pytest.raises(CheckFailed):  # with the learner's layer_macs: charged a second time
        check_score_share.__wrapped__(nb["score_share"])
    check_score_share(nb["score_share"])
    out = capsys.readouterr().out
    assert "costs points only in layer_macs_tests" in out and "✓" in out
    assert nb["layer_macs"] is learners


def test_a_wrong_score_share_still_fails_with_the_course_layer_macs():
    nb = notebook(NOTEBOOK.replace('(macs["scores"] + macs["mix"])', '100 * (macs["scores"] + macs["mix"])'))
    with pytest.raises(CheckFailed, match="percentage"):
        check_score_share(nb["score_share"])
