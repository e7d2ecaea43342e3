"""The lesson 09 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from notebook_cells import notebook

from helpers import patches as ref
from helpers.checks.core import CheckFailed
from helpers.checks.patches import check_conv_to_linear, check_n_tokens, check_patchify

# ---------------------------------------------------------------- patchify


def _sizes_ok(images, P):
    if images.shape[2] % P or images.shape[3] % P:
        raise ValueError("P must divide H and W")


def patchify_unfold(images, P):
    _sizes_ok(images, P)
    return F.unfold(images, kernel_size=P, stride=P).transpose(1, 2)


def patchify_tensor_unfold(images, P):
    _sizes_ok(images, P)
    B, C = images.shape[:2]
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, h, w, P, P)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * P * P)


def patchify_loops(images, P):
    _sizes_ok(images, P)
    B, C, H, W = images.shape
    rows = [images[:, :, r:r + P, c:c + P].reshape(B, -1) for r in range(0, H, P) for c in range(0, W, P)]
    return torch.stack(rows, dim=1)


def patchify_einops_style(images, P):
    _sizes_ok(images, P)
    B, C, H, W = images.shape
    x = images.view(B, C, H // P, P, W // P, P)
    return torch.einsum("bcipjq->bijcpq", x).flatten(3).flatten(1, 2)


@pytest.mark.parametrize("fn", [ref.patchify, patchify_unfold, patchify_tensor_unfold, patchify_loops,
                                patchify_einops_style])
def test_patchify_check_passes_correct_variants(fn, capsys):
    check_patchify(fn)
    check_patchify(fn, seed=5, verbose=False)
    assert "✓" in capsys.readouterr().out


def _permuted(order):
    def fn(images, P):
        _sizes_ok(images, P)
        B, C, H, W = images.shape
        x = images.reshape(B, C, H // P, P, W // P, P).permute(*order)
        return x.reshape(B, (H // P) * (W // P), C * P * P)

    return fn


def patchify_plain_reshape(images, P):
    _sizes_ok(images, P)
    B, C = images.shape[:2]
    return images.reshape(B, -1, C * P * P)


def patchify_unfold_reshape(images, P):
    _sizes_ok(images, P)
    B, C, H, W = images.shape
    return F.unfold(images, P, stride=P).reshape(B, (H // P) * (W // P), C * P * P)


def patchify_unfold_no_transpose(images, P):
    _sizes_ok(images, P)
    return F.unfold(images, P, stride=P)


def patchify_crops(images, P):
    B, C, H, W = images.shape
    return ref.patchify(images[:, :, : H // P * P, : W // P * P], P)


def patchify_checks_height_only(images, P):
    if images.shape[2] % P:
        raise ValueError("bad height")
    return F.unfold(images, P, stride=P).transpose(1, 2)


def patchify_no_check(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


def patchify_numpy(images, P):
    return ref.patchify(images, P).numpy()


def patchify_transposed_image(images, P):
    _sizes_ok(images, P)
    return ref.patchify(images.transpose(2, 3), P)


def patchify_in_place(images, P):
    out = ref.patchify(images.clone(), P)
    images.mul_(2)
    return out


@pytest.mark.parametrize("fn, message", [
    (_permuted((0, 2, 4, 3, 5, 1)), r"channels-last, in \(P, P, C\)"),
    (_permuted((0, 4, 2, 1, 3, 5)), "column-major order"),
    (_permuted((0, 4, 2, 3, 5, 1)), "column-major order and flattened channels-last"),
    (_permuted((0, 2, 4, 1, 5, 3)), "column by column"),
    (_permuted((0, 2, 4, 3, 1, 5)), r"\(P, C, P\)"),
    (patchify_plain_reshape, "plain reshape"),
    (patchify_unfold_reshape, "that scrambles it"),
    (patchify_unfold_no_transpose, "unfold's layout"),
    (patchify_crops, "silently cropped"),
    (patchify_checks_height_only, "the width 10"),
    (patchify_no_check, "not a ValueError"),
    (patchify_numpy, "must return a torch tensor"),
    (patchify_transposed_image, "swapped height and width"),
    (patchify_in_place, "in place"),
    (lambda images, P: None, "forget to `return`"),
])
def test_patchify_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_patchify(fn)


def test_unfinished_exercises_are_not_failures():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (check_patchify, check_n_tokens, check_conv_to_linear):
        with pytest.raises(NotImplementedError):
            check(stub)


# ---------------------------------------------------------------- n_tokens


def n_tokens_math(height, width, patch_size, cls_token=True):
    return int(height * width / patch_size**2) + int(cls_token)


def n_tokens_numpy(height, width, patch_size, cls_token=True):
    return np.int64(height // patch_size) * np.int64(width // patch_size) + (1 if cls_token else 0)


@pytest.mark.parametrize("fn", [ref.n_tokens, n_tokens_math, n_tokens_numpy])
def test_n_tokens_check_passes_correct_variants(fn, capsys):
    check_n_tokens(fn)
    check_n_tokens(fn, seed=3, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (lambda H, W, P, cls_token=True: (H // P) * (W // P), r"the \[CLS\] token adds one more"),
    (lambda H, W, P, cls_token=True: (H // P) * (W // P) + 1, "with cls_token=False there is no"),
    (lambda H, W, P, cls_token=True: H * W // P + int(cls_token), "divided the pixel count by P"),
    (lambda H, W, P, cls_token=True: H // P + W // P + int(cls_token), "added the patches per side"),
    (lambda H, W, P, cls_token=True: H * W + int(cls_token), "counted pixels"),
    (lambda H, W, P, cls_token=True: (H // P) ** 2 + int(cls_token), "used the height for both sides"),
    (lambda H, W, P, cls_token=True: (W // P) ** 2 + int(cls_token), "used the width for both sides"),
    (lambda H, W, P, cls_token=True: (H // P) * (W // P) + 2 * int(cls_token), "counted twice"),
    (lambda H, W, P, cls_token=True: H * W / P**2 + int(cls_token), "is an int"),
    (lambda H, W, P, cls_token=True: torch.tensor((H // P) * (W // P) + int(cls_token)), "plain int"),
    (lambda H, W, P, cls_token=True: str((H // P) * (W // P) + 1), "must return an int"),
    (lambda H, W, P, cls_token=True: (H // P) * (W // P) + 3, "expected"),
])
def test_n_tokens_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_n_tokens(fn)


# ---------------------------------------------------------------- conv_to_linear


def conv_to_linear_flatten(conv):
    w = conv.weight.flatten(1).T  # keeps the graph: not detached, still a correct answer
    b = conv.bias if conv.bias is not None else torch.zeros(conv.out_channels)
    return w, b


def conv_to_linear_einsum(conv):
    w = torch.einsum("dcpq->cpqd", conv.weight.detach()).reshape(-1, conv.out_channels)
    b = torch.zeros(conv.out_channels) if conv.bias is None else conv.bias.detach().clone()
    return w.double(), b.double()


@pytest.mark.parametrize("fn", [ref.conv_to_linear, conv_to_linear_flatten, conv_to_linear_einsum])
def test_conv_to_linear_check_passes_correct_variants(fn, capsys):
    check_conv_to_linear(fn)
    check_conv_to_linear(fn, seed=11, verbose=False)
    assert "✓" in capsys.readouterr().out


def _bias(conv):
    return conv.bias.detach() if conv.bias is not None else torch.zeros(conv.out_channels)


def _with_bias(weight_fn):
    return lambda conv: (weight_fn(conv.weight.detach()), _bias(conv))


def conv_to_linear_zero_bias(conv):
    return ref.conv_to_linear(conv)[0], torch.zeros(conv.out_channels)


def conv_to_linear_none_bias(conv):
    return ref.conv_to_linear(conv)[0], conv.bias


def conv_to_linear_drops_bias(conv):
    return ref.conv_to_linear(conv)[0], None


def conv_to_linear_mutates(conv):
    out = ref.conv_to_linear(conv)
    with torch.no_grad():
        conv.weight.mul_(0.5)
    return out


@pytest.mark.parametrize("fn, message", [
    (_with_bias(lambda w: w.reshape(w.shape[0], -1)), r"\(D, C·P·P\) layout"),
    (_with_bias(lambda w: w.reshape(-1, w.shape[0])), "straight to"),
    (_with_bias(lambda w: w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).T), "channels-last"),
    (_with_bias(lambda w: w.transpose(2, 3).reshape(w.shape[0], -1).T), "column by column"),
    (_with_bias(lambda w: w), "shape"),
    (conv_to_linear_zero_bias, "all zeros but this conv has a bias"),
    (conv_to_linear_none_bias, "needs one also when the conv has none"),
    (conv_to_linear_drops_bias, "returned no bias"),
    (conv_to_linear_mutates, "changed the convolution"),
    (lambda conv: (ref.conv_to_linear(conv)[0], conv.bias.detach()), "raised AttributeError"),
    (lambda conv: ref.conv_to_linear(conv)[0], "must return a pair"),
    (lambda conv: tuple(t.numpy() for t in ref.conv_to_linear(conv)), "must be a torch tensor"),
    (lambda conv: (ref.conv_to_linear(conv)[0] * 2, ref.conv_to_linear(conv)[1]),
     "differs from the reference"),
])
def test_conv_to_linear_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_conv_to_linear(fn)


def test_transposed_weight_is_named_when_the_shape_fits():
    """With D = C·P·P (ViT-Base's 768 = 3·16·16) a transposed weight passes the shape test."""
    calls = []

    def transposed_when_square(conv):
        calls.append(conv)
        w, b = ref.conv_to_linear(conv)
        return (w.T if w.shape[0] == w.shape[1] else w), b

    with pytest.raises(CheckFailed, match=r"\(D, C·P·P\), the way PyTorch stores it"):
        check_conv_to_linear(transposed_when_square)
    assert len(calls) == 2  # it got through the first, non-square convolution


def test_checks_write_nothing_to_stderr(capsys):
    with pytest.raises(CheckFailed):
        check_patchify(patchify_plain_reshape)
    with pytest.raises(CheckFailed):
        check_conv_to_linear(conv_to_linear_zero_bias)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: patchify flattens each patch in (P, P, C) order instead of (C, P, P), and
# conv_to_linear is right but reads the filters with it: each (C, P, P) filter is one patch.
NOTEBOOK = """
import torch

def patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (B, h, w, P, P, C)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)

def conv_to_linear(conv):
    P = conv.kernel_size[0]
    weight = patchify(conv.weight.detach(), P)[:, 0].T  # (D, 1, C·P·P) -> (C·P·P, D)
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(conv.out_channels)
    return weight, bias
"""


def test_conv_to_linear_is_checked_with_the_course_patchify(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["patchify"]
    with pytest.raises(CheckFailed):
        check_patchify(learners)
    with pytest.raises(CheckFailed):  # with the learner's patchify: charged a second time
        check_conv_to_linear.__wrapped__(nb["conv_to_linear"])
    check_conv_to_linear(nb["conv_to_linear"])
    out = capsys.readouterr().out
    assert "costs points only in patchify_tests" in out and "✓" in out
    assert nb["patchify"] is learners


def test_a_wrong_conv_to_linear_still_fails_with_the_course_patchify():
    nb = notebook(NOTEBOOK.replace("[:, 0].T", "[:, 0]"))
    with pytest.raises(CheckFailed, match="layout"):
        check_conv_to_linear(nb["conv_to_linear"])


def patchify_as_float32(images, P):
    """Right layout, but always float32: float64 images lose their precision."""
    return ref.patchify(images, P).float()


def test_patchify_check_names_a_result_that_loses_the_images_dtype():
    with pytest.raises(CheckFailed, match="has dtype torch.float32, but the images are torch.float64"):
        check_patchify(patchify_as_float32, verbose=False)
