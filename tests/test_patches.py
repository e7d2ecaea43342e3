"""Lesson 09's references against torch, the patch-size widget's logic, and the figures."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import patches as pt
from helpers.widgets import WithFallback


@pytest.mark.parametrize("shape, P", [((2, 3, 8, 12), 4), ((1, 1, 6, 9), 3), ((3, 2, 16, 16), 16),
                                      ((1, 3, 5, 7), 1), ((2, 3, 224, 224), 16)])
def test_patchify_equals_unfold_transposed(shape, P):
    x = torch.randn(shape)
    assert torch.equal(pt.patchify(x, P), F.unfold(x, P, stride=P).transpose(1, 2))


def test_patchify_layout_on_numbered_pixels():
    tiny = torch.arange(48.0).reshape(1, 2, 4, 6)
    tokens = pt.patchify(tiny, 2)[0]
    assert tokens[0].tolist() == [0, 1, 6, 7, 24, 25, 30, 31]  # top-left square, channel 0 then 1
    assert tokens[1].tolist()[:4] == [2, 3, 8, 9]  # row-major: the next patch is to the right
    assert tokens[3].tolist()[:4] == [12, 13, 18, 19]  # the second row of patches


@pytest.mark.parametrize("shape, P", [((1, 3, 10, 8), 4), ((1, 1, 8, 10), 4), ((1, 1, 8, 8), 0)])
def test_patchify_refuses_sizes_p_does_not_divide(shape, P):
    with pytest.raises(ValueError, match="must divide"):
        pt.patchify(torch.zeros(shape), P)


def test_patchify_needs_four_dimensions():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        pt.patchify(torch.zeros(3, 8, 8), 4)


def test_n_tokens_known_values():
    assert pt.n_tokens(224, 224, 16) == 197
    assert pt.n_tokens(1024, 1024, 16) == 4097
    assert pt.n_tokens(32, 32, 4) == 65
    assert pt.n_tokens(32, 64, 8, cls_token=False) == 32
    assert isinstance(pt.n_tokens(224, 224, 16), int)
    with pytest.raises(ValueError, match="must divide"):
        pt.n_tokens(225, 224, 16)


@pytest.mark.parametrize("C, D, P, bias", [(3, 768, 16, True), (1, 9, 3, True), (2, 5, 2, False)])
def test_conv_to_linear_reproduces_the_convolution(C, D, P, bias):
    torch.manual_seed(0)
    conv = nn.Conv2d(C, D, P, stride=P, bias=bias)
    x = torch.randn(2, C, 2 * P, 3 * P)
    weight, b = pt.conv_to_linear(conv)
    assert weight.shape == (C * P * P, D) and b.shape == (D,)
    assert not weight.requires_grad and not b.requires_grad
    if not bias:
        assert torch.equal(b, torch.zeros(D))
    with torch.no_grad():
        want = conv(x).flatten(2).transpose(1, 2)
    torch.testing.assert_close(pt.patchify(x, P) @ weight + b, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("conv", [nn.Conv2d(1, 4, 3, stride=1), nn.Conv2d(1, 4, 2, stride=2, padding=1),
                                  nn.Conv2d(1, 4, (2, 3), stride=(2, 3)),
                                  nn.Conv2d(2, 4, 2, stride=2, groups=2)])
def test_conv_to_linear_refuses_other_convolutions(conv):
    with pytest.raises(ValueError, match="stride = kernel size"):
        pt.conv_to_linear(conv)


def test_divisors_and_patch_view():
    assert pt.divisors(32) == [1, 2, 4, 8, 16, 32]
    assert pt.divisors(12) == [1, 2, 3, 4, 6, 12]
    with pytest.raises(ValueError):
        pt.divisors(0)
    view = pt.patch_view(32, 32, 4)
    assert view.grid == (8, 8) and view.n_patches == 64 and view.n_tokens == 65
    assert view.patch_dim == 16 and view.score_entries == 65**2
    assert pt.patch_view(224, 224, 16, channels=3).patch_dim == 768
    assert pt.patch_view(32, 16, 8).grid == (4, 2)
    text = pt.view_summary(view)
    assert "64 patches" in text and "n = 65 tokens" in text and "4,225" in text
    with pytest.raises(ValueError):
        pt.patch_view(32, 32, 5)


def test_quadrant_shares():
    maps = torch.zeros(2, 3, 2, 4, 4)  # (L, B, H, h, w)
    maps[0, ..., 0, 0] = 0.5  # layer 1: everything in the top-left quadrant...
    maps[0, ..., 3, 3] = 0.5  # ...and the bottom-right one
    maps[1] = 1 / 16  # layer 2: uniform
    shares = pt.quadrant_shares(maps)
    np.testing.assert_allclose(shares, [[0.5, 0, 0, 0.5], [0.25, 0.25, 0.25, 0.25]])
    with pytest.raises(ValueError, match="even"):
        pt.quadrant_shares(torch.zeros(1, 1, 1, 3, 3))
    with pytest.raises(ValueError, match="maps must be"):
        pt.quadrant_shares(torch.zeros(1, 3, 3))


def test_figures_return_their_axes():
    image = torch.rand(1, 1, 16, 16)
    ax = pt.plot_patch_grid(image, 4)
    assert len(ax.texts) == 16 and ax.get_title().startswith("16 × 16")
    with pytest.raises(ValueError):
        pt.plot_patch_grid(image, 5)
    with pytest.raises(ValueError, match="one-channel"):
        pt.plot_patch_grid(torch.rand(3, 16, 16), 4)
    assert pt.plot_tokens(pt.patchify(image, 4)[0]).get_xlabel().startswith("C·P·P = 16")
    with pytest.raises(ValueError):
        pt.plot_tokens(torch.zeros(2, 3, 4))
    axes = pt.plot_patch_view(pt.patch_view(16, 16, 4), image)
    assert len(axes) == 2
    maps = torch.rand(3, 2, 2, 4, 4)  # (L, B, H, h, w)
    axes = pt.plot_cls_attention(torch.rand(2, 1, 16, 16), maps, titles=["a", "b"])
    assert np.shape(axes) == (2, 4) and axes[1][0].get_title() == "b"
    with pytest.raises(ValueError):
        pt.plot_cls_attention(torch.rand(2, 1, 16, 16), maps[0])
    assert len(pt.plot_head_attention(image, maps[:, 0], layer=2)) == 2
    with pytest.raises(ValueError):
        pt.plot_head_attention(image, maps[:, 0], layer=3)
    axes = pt.plot_position_similarity(torch.randn(16, 8), (4, 4), [0, 15])
    assert axes[1].get_title() == "patch 15 (row 3, col 3)"
    with pytest.raises(ValueError):
        pt.plot_position_similarity(torch.randn(15, 8), (4, 4), [0])
    plt.close("all")


def test_patch_size_explorer_shows_a_static_picture():
    widget = pt.patch_size_explorer(torch.rand(1, 1, 32, 32), patch_size=8)
    assert isinstance(widget, WithFallback)
    assert widget.static.startswith(b"\x89PNG")
    bundle = widget._repr_mimebundle_()
    assert "image/png" in bundle
    slider = widget.widget.children[0]
    assert list(slider.options) == [1, 2, 4, 8, 16, 32] and slider.value == 8
    slider.value = 16  # the update runs without a front end
    assert "P = 16" in widget.widget.children[2].value
    plt.close("all")
