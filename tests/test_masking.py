"""Lesson 04 helpers: the references agree with PyTorch, the measurements measure, the figures draw."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from helpers import masking as ref  # noqa: E402


def _qkv(*batch, n_q=5, n_k=5, d_k=4, d_v=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*batch, n_q, d_k, generator=g, dtype=torch.float64),
            torch.randn(*batch, n_k, d_k, generator=g, dtype=torch.float64),
            torch.randn(*batch, n_k, d_v, generator=g, dtype=torch.float64))


# ---------------------------------------------------------------- masks


def test_causal_mask_is_torch_tril_and_bool():
    for n in (0, 1, 5):
        mask = ref.causal_mask(n)
        assert mask.dtype == torch.bool and mask.shape == (n, n)
        assert torch.equal(mask, torch.tril(torch.ones(n, n)).bool())
    with pytest.raises(ValueError, match="non-negative integer"):
        ref.causal_mask(-1)


def test_padding_mask_accepts_lists_and_tensors():
    want = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    for lengths in ([2, 0, 3], torch.tensor([2, 0, 3]), torch.tensor([2, 0, 3], dtype=torch.int32)):
        got = ref.padding_mask(lengths, 3)
        assert got.dtype == torch.bool and torch.equal(got, want)


@pytest.mark.parametrize("lengths, max_len, message", [
    ([4, 1], 3, "0..max_len = 3"),
    ([-1, 1], 3, "0..max_len"),
    ([[1, 2]], 3, "1-D tensor of integers"),
    ([1.5, 2.0], 3, "1-D tensor of integers"),
])
def test_padding_mask_rejects_bad_lengths(lengths, max_len, message):
    with pytest.raises(ValueError, match=message):
        ref.padding_mask(lengths, max_len)


# ---------------------------------------------------------------- attention under a mask


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
def test_masked_attention_matches_torch_sdpa_on_random_masks(batch):
    q, k, v = _qkv(*batch, n_q=6, n_k=7)
    g = torch.Generator().manual_seed(1)
    mask = torch.rand(*batch, 6, 7, generator=g) < 0.6
    mask[..., 2, :] = False  # one query with no allowed key
    out, w = ref.masked_attention(q, k, v, mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    live = mask.any(-1)
    torch.testing.assert_close(out[live], want[live])  # sdpa may give NaN on dead rows
    assert torch.all(w[~live] == 0) and torch.all(out[~live] == 0)
    torch.testing.assert_close(w[live].sum(-1), torch.ones(int(live.sum()), dtype=w.dtype))


def test_masked_attention_broadcasts_padding_and_causal_masks():
    q, k, v = _qkv(2, 3, n_q=4, n_k=4)
    pad = ref.padding_mask([4, 2], 4)[:, None, None, :]  # (B, 1, 1, T)
    both = pad & ref.causal_mask(4)  # (B, 1, T, T)
    out, w = ref.masked_attention(q, k, v, both)
    assert w.shape == (2, 3, 4, 4)
    assert torch.all(w[1, :, :, 2:] == 0) and torch.all(w.triu(1) == 0)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=both)
    torch.testing.assert_close(out, want)


def test_masked_attention_rejects_bad_shapes_and_masks():
    q, k, v = _qkv(n_q=2, n_k=3)
    with pytest.raises(ValueError, match="same width d_k"):
        ref.masked_attention(q, k[..., :2], v)
    with pytest.raises(ValueError, match="one row per key"):
        ref.masked_attention(q, k, v[:2])
    with pytest.raises(TypeError, match="bool"):
        ref.masked_attention(q, k, v, torch.ones(2, 3))


def test_causal_attention_ignores_the_future():
    q, k, v = _qkv(2, n_q=6, n_k=6)
    out = ref.masked_attention(q, k, v, ref.causal_mask(6))[0]
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :], v2[..., 4:, :] = 100.0, -100.0
    out2 = ref.masked_attention(q, k2, v2, ref.causal_mask(6))[0]
    torch.testing.assert_close(out[..., :4, :], out2[..., :4, :])
    assert not torch.allclose(out[..., 4:, :], out2[..., 4:, :])


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_cache_equals_parallel_causal_attention_and_is_causal_sdpa(batch):
    q, k, v = _qkv(*batch, n_q=5, n_k=5, d_v=2)
    got = ref.causal_attention_with_cache(q, k, v)
    torch.testing.assert_close(got, ref.masked_attention(q, k, v, ref.causal_mask(5))[0])
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_decode_trace_grows_the_cache_by_one_row_per_step():
    q = k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = torch.tensor([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    steps = ref.decode_trace(q, k, v)
    assert [s.cache_length for s in steps] == [1, 2, 3]
    torch.testing.assert_close(steps[0].weights, torch.tensor([1.0]))
    torch.testing.assert_close(steps[1].weights, torch.tensor([0.330, 0.670]), atol=5e-4, rtol=0)
    outputs = torch.stack([s.output for s in steps])
    torch.testing.assert_close(outputs, ref.causal_attention_with_cache(q, k, v))
    with pytest.raises(ValueError, match="shape"):
        ref.decode_trace(q[None], k[None], v[None])


# ---------------------------------------------------------------- the bill


def test_attention_matrix_bytes_reproduces_the_lesson_numbers():
    assert ref.attention_matrix_bytes(4096) == 4096 * 4096 * 2 == 32 * 2**20
    assert ref.attention_matrix_bytes(4096, 32) == 2**30
    assert ref.attention_matrix_bytes(10, 3, 4) == 1200
    assert isinstance(ref.attention_matrix_bytes(7), int)


def test_kv_cache_bytes_is_linear_and_crosses_the_scores_at_two_d_head():
    assert ref.kv_cache_bytes(100, 8, 64, n_layers=2, bytes_per_element=2) == 2 * 2 * 8 * 100 * 64 * 2
    assert ref.kv_cache_bytes(200, 8, 64) == 2 * ref.kv_cache_bytes(100, 8, 64)
    assert ref.kv_cache_bytes(128, 4, 64) == ref.attention_matrix_bytes(128, 4)  # n = 2 · d_head


# ---------------------------------------------------------------- figures


def test_plot_mask_draws_the_mask_and_checks_labels():
    ax = ref.plot_mask(ref.causal_mask(3), query_labels="abc", key_labels="abc", title="causal")
    image = ax.images[0].get_array()
    assert np.array_equal(np.asarray(image), np.tril(np.ones((3, 3))).astype(bool))
    assert ax.get_title() == "causal"
    with pytest.raises(ValueError, match="2 key labels"):
        ref.plot_mask(ref.causal_mask(3), key_labels="ab")
    with pytest.raises(ValueError, match="one \\(n_q, n_k\\) mask"):
        ref.plot_mask(torch.ones(2, 2, 2, dtype=torch.bool))
    plt.close("all")


def test_plot_memory_growth_compares_quadratic_and_linear():
    ax = ref.plot_memory_growth([64, 128, 256], n_heads=2, d_head=64)
    scores, cache = (line.get_ydata() for line in ax.lines[:2])
    assert scores[1] / scores[0] == pytest.approx(4) and cache[1] / cache[0] == pytest.approx(2)
    assert scores[1] == pytest.approx(cache[1])  # they meet at n = 2 · d_head = 128
    with pytest.raises(ValueError, match="two context lengths"):
        ref.plot_memory_growth([64], n_heads=1, d_head=8)
    plt.close("all")


def test_worked_example_rows():
    """The lesson's numbers: row 1 of the causal weights is [1, 0, 0], row 2 [0.330, 0.670, 0]."""
    q = k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]], dtype=torch.float64)
    _, w = ref.masked_attention(q, k, v, ref.causal_mask(3))
    assert w[0].tolist() == [1.0, 0.0, 0.0]
    assert w[1, 0] == pytest.approx(1 / (1 + math.exp(1 / math.sqrt(2))))
    assert np.round(w[1].numpy(), 3).tolist() == [0.330, 0.670, 0.0]


def test_median_time_is_the_median_of_the_timed_calls_after_a_warm_up():
    import time as _time

    pauses = iter([0.2, 0.0, 0.05, 0.01, 0.0, 0.3])  # the warm-up first, then five timed calls

    def fn():
        _time.sleep(next(pauses))

    assert 0.008 <= ref.median_time(fn, repeats=5) < 0.04  # the median 0.01, not the 0.0 or the 0.3
    with pytest.raises(ValueError, match="repeats"):
        ref.median_time(fn, repeats=0)
