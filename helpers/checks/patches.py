"""Checks for lesson 09 (from words to pixels): ``patchify``, ``n_tokens``, ``conv_to_linear``.

Each compares the learner's result with the reference in ``helpers.patches`` on random images
and convolutions — non-square, with one and with three channels — and, when they differ,
computes what each classic mistake returns (channels-last flattening, column-major patch order,
a plain reshape, a transposed weight, ...) and names the one the result matches.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from .. import patches as ref
from .core import (
    CheckFailed,
    as_array,
    call,
    expect_close,
    expect_dtype,
    expect_pair,
    expect_returned,
    expect_shape,
    passed,
    quiet,
    with_course_callees,
)
from .failure import hinted

# ---------------------------------------------------------------- patchify


def _tensor(result, what: str) -> np.ndarray:
    """The learner's result as an array, after checking it is a torch tensor."""
    if result is not None and not torch.is_tensor(result):
        raise CheckFailed(f"{what} must return a torch tensor, got {type(result).__name__}",
                          "use torch operations (reshape, permute, ...) on the input tensor")
    return as_array(result, what)


def _layout(images: torch.Tensor, P: int, order: tuple[int, ...]) -> np.ndarray:
    """The patches of images (B, C, H, W) laid out by permuting (B, C, h, P, w, P) with ``order``."""
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P).permute(*order)
    return grid.reshape(B, (H // P) * (W // P), C * P * P).numpy()


def _patchify_mistakes(images: torch.Tensor, P: int) -> list[tuple[np.ndarray, str]]:
    """What the classic patchify mistakes return for images (B, C, H, W) and patch size P."""
    B, C, H, W = images.shape
    N, D = (H // P) * (W // P), C * P * P
    unfolded = torch.nn.functional.unfold(images, P, stride=P)  # (B, C·P·P, N)
    order = "permute the (B, C, H/P, P, W/P, P) view to (B, H/P, W/P, C, P, P) before flattening"
    found = [
        (_layout(images, P, (0, 2, 4, 3, 5, 1)),
         "each patch is flattened channels-last, in (P, P, C) order; the contract flattens in "
         "(C, P, P) order — all of channel 0's pixels, then channel 1's, …",
         "move C before the two P axes: " + order),
        (_layout(images, P, (0, 4, 2, 1, 3, 5)),
         "the patches come in column-major order (top to bottom, then left to right); the order is "
         "row-major: left to right along the top row of patches, then the next row",
         "put the patch-row axis (H/P) before the patch-column axis (W/P): " + order),
        (_layout(images, P, (0, 4, 2, 3, 5, 1)),
         "the patches are in column-major order and flattened channels-last; the contract wants row-major "
         "patch order and (C, P, P) flattening", order),
        (_layout(images, P, (0, 2, 4, 1, 5, 3)),
         "inside each patch the pixels are flattened column by column, not row by row",
         "keep each patch's two P axes in (row, column) order: " + order),
        (_layout(images, P, (0, 2, 4, 3, 1, 5)),
         "each patch is flattened in (P, C, P) order; the channel axis must come first: (C, P, P)", order),
        (images.reshape(B, N, D).numpy(),
         "this is a plain reshape of the image: it cuts the pixels in reading order into pieces of "
         "C·P·P, which are not P × P squares",
         "split H and W into (H/P, P) and (W/P, P), then " + order),
        (unfolded.reshape(B, N, D).numpy(),
         "you reshaped unfold's (B, C·P·P, N) output to (B, N, C·P·P); that scrambles it",
         "transpose(1, 2) instead of reshaping"),
    ]
    if H != W:
        found.append((ref.patchify(images.transpose(2, 3), P).numpy(),
                      "you swapped height and width (the image was transposed); H is dim 2, W dim 3",
                      "B, C, H, W = images.shape, in that order"))
    return found


def _expect_value_error(patchify: Callable, images: torch.Tensor, P: int, which: str) -> None:
    """patchify must refuse a size that P does not divide, with a ValueError."""
    B, C, H, W = images.shape
    label = f"patchify of a {H} × {W} image with P = {P} ({which} is not divisible by {P})"
    fix = "check that both H % P == 0 and W % P == 0 first, and raise ValueError with a message otherwise"
    try:
        with quiet():
            patchify(images, P)
    except NotImplementedError:
        raise
    except ValueError:
        return
    except Exception as err:  # any other error: the learner did not check the size themselves
        raise CheckFailed(f"{label} raised {type(err).__name__}: {err} — not a ValueError that says what "
                          "was expected", fix, crash=err, note=label) from err
    raise CheckFailed(f"{label} returned a result instead of raising ValueError: the image was "
                      "silently cropped or padded", fix)


@hinted
def check_patchify(patchify: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``patchify(images, patch_size)`` on non-square images with C = 3 and C = 1."""
    gen = torch.Generator().manual_seed(seed)
    fix = ("reshape to (B, C, H/P, P, W/P, P), permute to (B, H/P, W/P, C, P, P), then reshape to "
            "(B, N, C·P·P)")

    def run(B, C, H, W, P, dtype=torch.float32):
        images = torch.randn(B, C, H, W, generator=gen, dtype=dtype)
        original = images.clone()
        label = f"patchify of {dtype} images {(B, C, H, W)} with P = {P}"
        result = call(patchify, images, P, what=label, fix=fix)
        got = _tensor(result, label)
        expect_dtype(result, images.dtype, label, "the images")
        if not torch.equal(images, original):
            raise CheckFailed("patchify changed its input images in place — the caller's images are "
                              "overwritten", "build a new tensor: reshape and permute leave the input alone")
        N, D = (H // P) * (W // P), C * P * P
        if got.shape == (B, D, N) and D != N:
            raise CheckFailed(f"{label} has shape {got.shape}: this is unfold's layout (B, C·P·P, N), but "
                              "tokens are rows", "transpose(1, 2) to get (B, N, C·P·P)")
        expect_shape(got, (B, N, D), label, f"N = (H/P)·(W/P) = {N} patches of C·P·P = {D} numbers", fix)
        expect_close(got, ref.patchify(images, P).numpy(), label, _patchify_mistakes(images, P),
                     f"seed={seed}", fix)

    run(2, 3, 8, 12, 4)  # non-square, three channels
    run(3, 1, 6, 9, 3)  # one channel, odd sizes
    run(1, 2, 10, 4, 2, torch.float64)  # taller than wide, and float64: the result keeps the dtype
    _expect_value_error(patchify, torch.randn(1, 3, 10, 8, generator=gen), 4, "the height 10")
    _expect_value_error(patchify, torch.randn(1, 1, 8, 10, generator=gen), 4, "the width 10")
    passed("patchify matches the reference (row-major patches, (C, P, P) flattening) on non-square "
           "images with 1, 2 and 3 channels in the images' dtype, and raises ValueError when P does not "
           "divide H or W", verbose)


# ---------------------------------------------------------------- n_tokens


COUNT = "(height // patch_size) * (width // patch_size), plus 1 if cls_token"


def _count_mistakes(H: int, W: int, P: int, cls: bool) -> list[tuple[float, str]]:
    """What the classic token-count mistakes give for an H × W image and patch size P."""
    extra = int(cls)
    grid = "(height // patch_size) * (width // patch_size) patches"
    found = [
        (H * W / P + extra, "you divided the pixel count by P; a patch covers P·P = P² pixels", grid),
        (H / P + W / P + extra, "you added the patches per side; the grid has (H/P) × (W/P) patches",
         "multiply them: " + grid),
        (H * W + extra, "you counted pixels, not patches", grid),
    ]
    if H != W:
        found += [((H // P) ** 2 + extra, "you used the height for both sides; the width may differ", grid),
                  ((W // P) ** 2 + extra, "you used the width for both sides; the height may differ", grid)]
    return found


@hinted
def check_n_tokens(n_tokens: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``n_tokens(height, width, patch_size, cls_token=True)``."""
    rng = np.random.default_rng(seed)
    P = int(rng.choice([2, 4, 7, 16]))
    cases = [(224, 224, 16), (1024, 1024, 16), (32, 32, 4),
             (P * int(rng.integers(2, 9)), P * int(rng.integers(10, 20)), P)]
    for H, W, p in cases:
        for cls in (True, False):
            kwargs = {} if cls else {"cls_token": False}
            label = f"n_tokens({H}, {W}, {p}" + ("" if cls else ", cls_token=False") + ")"
            got = call(n_tokens, H, W, p, what=label, fix=COUNT, **kwargs)
            want = ref.n_tokens(H, W, p, cls)
            expect_returned(got, label)
            if torch.is_tensor(got) or isinstance(got, np.ndarray) and got.ndim > 0:
                raise CheckFailed(f"{label} returned a {type(got).__name__}; a number of tokens is a plain "
                                  "int",
                                  "plain Python arithmetic on the three numbers, or int(...)")
            if isinstance(got, bool) or not isinstance(got, numbers.Real):
                raise CheckFailed(f"{label} must return an int, got {type(got).__name__}: {got!r}",
                                  "return the number itself, not text about it: no str(…) or f-string")
            if got != want:
                patches = (H // p) * (W // p)
                if cls and got == patches:
                    raise CheckFailed(f"{label} = {got}: that is the number of patches; the [CLS] "
                                      f"token adds one more: {want}", "+ 1 when cls_token is True")
                if not cls and got == patches + 1:
                    raise CheckFailed(f"{label} = {got}: with cls_token=False there is no [CLS] token — "
                                      f"the answer is {want}", "add the 1 only if cls_token")
                if cls and got == patches + 2:
                    raise CheckFailed(f"{label} = {got}: [CLS] is counted twice; the answer is {want}",
                                      "add exactly one token for [CLS], once")
                for value, message, fix in _count_mistakes(H, W, p, cls):
                    if np.isclose(got, value):
                        raise CheckFailed(f"{label} = {got}: {message} (the answer is {want})", fix)
                raise CheckFailed(f"{label} = {got}, expected {want} = ({H}/{p})·({W}/{p})"
                                  + (" + 1 for [CLS]" if cls else ""), COUNT)
            if not isinstance(got, numbers.Integral):
                raise CheckFailed(f"{label} returned {got!r}, a {type(got).__name__}; a number of tokens "
                                  "is an int", "integer division // (or int(...))")
    passed("n_tokens gives 197 tokens for 224 px and 4,097 for 1024 px at P = 16, counts [CLS] only "
           "when asked, and handles non-square images", verbose)


# ---------------------------------------------------------------- conv_to_linear


def _pair(result, what: str) -> tuple[np.ndarray, object]:
    """Split ``(weight, bias)``; the weight as an array, the bias as returned."""
    weight, bias = expect_pair(result, what, "weight", "bias")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and not torch.is_tensor(t):
            raise CheckFailed(f"{what}: the {name} must be a torch tensor, got {type(t).__name__}",
                              "keep torch's tensors: reshape the convolution's weight, no .numpy() or np.…")
    return as_array(weight, f"{what} weight"), bias


def _weight_mistakes(w: torch.Tensor) -> list[tuple[np.ndarray, str]]:
    """What the classic mistakes return as the matrix of a conv weight (D, C, P, P)."""
    D = w.shape[0]
    flat = "conv.weight.reshape(D, -1).T: flatten each kernel in (C, P, P) order, then transpose"
    return [
        (w.reshape(D, -1).numpy(),
         "the weight is (D, C·P·P), the way PyTorch stores it; the course applies weights as "
         "x @ w, which needs (C·P·P, D)", "its transpose: .T"),
        (w.reshape(-1, D).numpy(),
         "you reshaped the (D, C, P, P) weight straight to (C·P·P, D), which scrambles it",
         "flatten it to (D, C·P·P) first, then transpose"),
        (w.permute(0, 2, 3, 1).reshape(D, -1).T.numpy(),
         "each column is flattened channels-last, (P, P, C); patchify flattens in (C, P, P) order, "
         "and so must the weight", flat),
        (w.transpose(2, 3).reshape(D, -1).T.numpy(),
         "inside each kernel the pixels are taken column by column, not row by row as patchify does", flat),
    ]


@with_course_callees("patchify")
@hinted
def check_conv_to_linear(conv_to_linear: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``conv_to_linear(conv)`` with and without a bias, with D ≠ and = C·P·P."""
    gen = torch.Generator().manual_seed(seed)
    fix = ("weight = conv.weight.reshape(D, C·P·P).T — the same (C, P, P) order as patchify; "
            "bias = conv.bias, or zeros(D) when the conv has none")

    def run(C, D, P, H, W, bias=True):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        conv = nn.Conv2d(C, D, P, stride=P, bias=bias)
        if bias:
            with torch.no_grad():
                conv.bias.normal_()  # clearly non-zero
        before = [p.detach().clone() for p in conv.parameters()]
        label = f"conv_to_linear(nn.Conv2d({C}, {D}, {P}, stride={P}{'' if bias else ', bias=False'}))"
        run_hint = fix if bias else "this conv has no bias: conv.bias is None — return torch.zeros(D)"
        weight, b = _pair(call(conv_to_linear, conv, what=label, fix=run_hint), label)
        if any(not torch.equal(p, q) for p, q in zip(conv.parameters(), before)):
            raise CheckFailed(f"{label} changed the convolution's parameters — the caller's conv is changed",
                              "read them, do not modify them: no in-place operations on conv.weight or "
                              "conv.bias")
        K = C * P * P
        if weight.shape == (D, K) and D != K:
            raise CheckFailed(f"{label}: the weight has shape {weight.shape}, the (D, C·P·P) layout "
                              f"PyTorch stores; the course applies x @ w, which needs (C·P·P, D) = "
                              f"({K}, {D})",
                              "its transpose: .T")
        expect_shape(weight, (K, D), f"{label} weight", "one row per pixel value of a patch, one column "
                                                        "per output channel", fix)
        want_w, want_b = ref.conv_to_linear(conv)
        w = conv.weight.detach()
        expect_close(weight, want_w.numpy(), f"{label} weight", _weight_mistakes(w), f"seed={seed}", fix)
        if b is None:
            raise CheckFailed(f"{label} returned no bias (None)" + (
                "" if bias else ", but patchify(x) @ weight + bias needs one also when the conv has none"),
                "return conv.bias" if bias else "return a zero bias: torch.zeros(D)")
        bias_got = as_array(b, f"{label} bias")
        if bias and bias_got.shape == (D,) and np.all(bias_got == 0):
            raise CheckFailed(f"{label}: the bias is all zeros but this conv has a bias", "return conv.bias")
        expect_shape(bias_got, (D,), f"{label} bias", "one number per output channel")
        expect_close(bias_got, want_b.numpy(), f"{label} bias", context=f"seed={seed}",
                     fix="the bias is conv.bias (or zeros when the conv has none)")
        x = torch.randn(2, C, H, W, generator=gen)
        with torch.no_grad():
            want = conv(x).flatten(2).transpose(1, 2).numpy()  # (B, N, D)
        got = ref.patchify(x, P).double().numpy() @ weight + bias_got
        expect_close(got, want, f"patchify(x) @ weight + bias against the conv's output, {label}",
                     context=f"seed={seed}", fix=fix, rtol=1e-4, atol=1e-5)

    run(3, 5, 4, 8, 12)  # D ≠ C·P·P: a transposed weight has the wrong shape
    run(1, 9, 3, 6, 9)  # D = C·P·P: a transposed weight has the right shape, wrong values
    run(2, 6, 2, 4, 6, bias=False)
    passed("conv_to_linear gives (C·P·P, D) and (D,) with patchify(x) @ weight + bias equal to the "
           "convolution's output, with and without a bias", verbose)
