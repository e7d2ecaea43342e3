"""The reference implementations agree with PyTorch and reject bad input clearly."""

import numpy as np
import pytest
import torch

from helpers import attention as ref


def test_softmax_matches_torch_on_any_axis():
    x = np.random.default_rng(0).normal(scale=4, size=(3, 4, 5))
    for axis in (0, 1, -1):
        want = torch.softmax(torch.from_numpy(x), dim=axis).numpy()
        np.testing.assert_allclose(ref.softmax(x, axis=axis), want, rtol=1e-12)


def test_softmax_is_stable_and_zeroes_minus_inf():
    w = ref.softmax(np.array([1000.0, -np.inf, 1000.0]))
    np.testing.assert_array_equal(w, [0.5, 0.0, 0.5])


def test_attention_matches_torch_sdpa():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    out, w = ref.attention(q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a)[None] for a in (q, k, v)))[0]
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_self_attention_is_attention_of_projections():
    rng = np.random.default_rng(2)
    x, wq, wk, wv = rng.normal(size=(5, 6)), rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), \
        rng.normal(size=(6, 4))
    out, w = ref.self_attention(x, wq, wk, wv)
    out2, w2 = ref.attention(x @ wq, x @ wk, x @ wv)
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(w, w2)


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones(3), np.ones((2, 3)), np.ones((2, 1))), "q must be a 2-D array"),
        ((np.ones((1, 3)), np.ones((2, 4)), np.ones((2, 1))), "same width d_k"),
        ((np.ones((1, 3)), np.ones((2, 3)), np.ones((3, 1))), "one row per key"),
    ],
)
def test_attention_rejects_bad_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        ref.attention(*args)


def test_self_attention_rejects_transposed_weights():
    with pytest.raises(ValueError, match="w_k must have d_model = 4 rows"):
        ref.self_attention(np.ones((2, 4)), np.ones((4, 3)), np.ones((3, 4)), np.ones((4, 2)))


@pytest.mark.parametrize("masked", [False, True])
def test_torch_reference_matches_sdpa_with_and_without_mask(masked):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 4, generator=g, dtype=torch.float64) for n in (5, 7, 7))
    mask = torch.rand(5, 7, generator=g) > 0.3 if masked else None
    if mask is not None:
        mask[:, 0] = True  # torch's sdpa returns NaN for a fully masked row
    out, w = ref.scaled_dot_product_attention(q, k, v, mask)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, want)


def test_torch_reference_zeroes_fully_masked_rows_and_needs_bool():
    q = k = v = torch.randn(3, 2)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, w = ref.scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[1] == 0) and torch.all(out[1] == 0)
    with pytest.raises(TypeError, match="bool"):
        ref.scaled_dot_product_attention(q, k, v, mask.int())
