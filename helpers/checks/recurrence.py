"""Checks for lesson 01 (why recurrent networks forget): ``rnn_forward``, ``gradient_by_position``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .. import recurrence as ref
from .core import CheckFailed, as_array, call, expect_close, expect_returned, expect_shape, passed, quiet
from .failure import hinted

STEP = "h = np.tanh(x[t] @ w_x + h @ w_h + b) inside the loop, keeping every h"


def _random_rnn(seed: int, T: int, d_in: int, d_h: int):
    """x (T, d_in), w_x (d_in, d_h), w_h (d_h, d_h), b (d_h,), h0 (d_h,): states well inside tanh's range."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(T, d_in))
    w_x = rng.normal(scale=0.6, size=(d_in, d_h))
    w_h = rng.normal(scale=0.6, size=(d_h, d_h))
    b = rng.normal(scale=0.3, size=d_h)
    h0 = rng.uniform(-0.9, 0.9, size=d_h)
    return x, w_x, w_h, b, h0


def _recurrence(x, w_x, w_h, b, h0, step) -> np.ndarray:
    """States of a (possibly wrong) recurrence ``h = step(x_t, h)``, for naming mistakes."""
    h, states = h0.copy(), []
    for x_t in x:
        h = step(x_t, h)
        states.append(h)
    return np.stack(states)


def _rnn_mistakes(x, w_x, w_h, b, h0) -> list[tuple[np.ndarray, str]]:
    """What the classic recurrence mistakes return (h0 given: zeros when the check passes None)."""
    want = ref.rnn_forward(x, w_x, w_h, b, h0)
    with quiet():
        pre, pre_states = h0.copy(), []  # the pre-activation fed back instead of h
        for x_t in x:
            pre = x_t @ w_x + pre @ w_h + b
            pre_states.append(np.tanh(pre))
        backwards = ("you read the sequence backwards: step 1 reads x[0]",
                     "for t in range(T), in order: " + STEP)
        return [
            (_recurrence(x, w_x, w_h, b, h0, lambda x_t, h: x_t @ w_x + h @ w_h + b),
             "no tanh: h_t = tanh(x_t w_x + h_{t-1} w_h + b) squashes every state into (-1, 1)", STEP),
            (_recurrence(x, w_x, w_h, b, h0, lambda x_t, h: np.tanh(x_t @ w_x + h @ w_h.T + b)),
             "you multiplied by w_h transposed (w_h @ h is h @ w_h.T): with states as rows, the weights "
             "act from the right", "h_{t-1} @ w_h, not w_h.T: " + STEP),
            (np.stack([np.tanh(x_t @ w_x + h0 @ w_h + b) for x_t in x]),
             "every step uses h0: the new state is never fed back in", STEP + ", so the next step reads it"),
            (np.vstack([h0, want[:-1]]),
             "your states are shifted by one: row t must be h_t, stored after the update, "
             "not h_{t-1} (and h0 is not a row of H)", "append h after updating it, not before"),
            (np.stack(pre_states),
             "you fed back the pre-activation: the next step needs h_{t-1} = tanh(...), not what "
             "went into tanh", "keep h = np.tanh(pre) and feed that h back"),
            (_recurrence(x, w_x, w_h, b, h0, lambda x_t, h: np.maximum(0, x_t @ w_x + h @ w_h + b)),
             "that is a ReLU; the recurrence uses tanh", STEP),
            (_recurrence(x, w_x, w_h, b, h0, lambda x_t, h: 1 / (1 + np.exp(-(x_t @ w_x + h @ w_h + b)))),
             "that is a sigmoid; the recurrence uses tanh", STEP),
            (ref.rnn_forward(x[::-1], w_x, w_h, b, h0)[::-1], *backwards),
            (ref.rnn_forward(x[::-1], w_x, w_h, b, h0), *backwards),
        ]


def _states(result, what: str, T: int, d_h: int) -> np.ndarray:
    """The learner's H as an array of shape (T, d_h), or a failure that names the shape mistake."""
    got = as_array(result, what)
    if got.shape == (d_h,):
        raise CheckFailed(f"{what} has shape {got.shape}: return every state H of shape ({T}, {d_h}), "
                          "one row per time step, not only the last one",
                          "collect every h in a list inside the loop and np.stack it at the end")
    if got.shape == (T + 1, d_h):
        raise CheckFailed(f"{what} has {T + 1} rows: H holds h_1 ... h_T, one row per input row, "
                          "without the initial state h0", "keep only the states computed in the loop")
    if got.shape == (d_h, T) and T != d_h:
        raise CheckFailed(f"{what} has shape {got.shape}: one row per time step, expected ({T}, {d_h})",
                          "np.stack(states) of the (d_h,) states stacks them as rows (axis 0)")
    expect_shape(got, (T, d_h), what, "one row h_t per row x_t of x", STEP)
    return got


@hinted
def check_rnn_forward(rnn_forward: Callable, seed: int = 0, T: int = 6, d_in: int = 3, d_h: int = 4,
                      verbose: bool = True) -> None:
    """Check ``rnn_forward(x, w_x, w_h, b, h0=None)`` against ``torch.nn.RNN`` with the same weights."""
    x, w_x, w_h, b, h0 = _random_rnn(seed, T, d_in, d_h)
    context = f"seed={seed}, T={T}, d_in={d_in}, d_h={d_h}"
    zeros = np.zeros(d_h)
    want, want_h0 = ref.torch_rnn_forward(x, w_x, w_h, b), ref.torch_rnn_forward(x, w_x, w_h, b, h0)
    mistakes, mistakes_h0 = _rnn_mistakes(x, w_x, w_h, b, zeros), _rnn_mistakes(x, w_x, w_h, b, h0)
    originals = [a.copy() for a in (x, w_x, w_h, b, h0)]
    fix = "loop over the rows of x: " + STEP

    def run(*args):
        what = f"rnn_forward(x, w_x, w_h, b{', h0' if len(args) == 5 else ''})"
        result = call(rnn_forward, *args, what=what, fix=fix)
        if any(not np.array_equal(a, o) for a, o in zip((x, w_x, w_h, b, h0), originals)):
            raise CheckFailed("rnn_forward changed one of its inputs in place — the caller's arrays are "
                              "overwritten",
                              "compute new arrays: h = ..., not h += ... (h may be h0 itself); never "
                              "x *= ... or b += ...")
        return _states(result, what, T, d_h)

    got = run(x, w_x, w_h, b)
    expect_close(got, want, "H without h0 (h0 = zeros)", mistakes, context, fix)
    got_h0 = run(x, w_x, w_h, b, h0)
    ignored = [(want, "h0 is ignored: the recurrence must start from the given h0 (zeros only if None)",
                "h = np.zeros(d_h) if h0 is None else h0")]
    expect_close(got_h0, want_h0, "H with a given h0", ignored + mistakes_h0, context, fix)
    passed(f"rnn_forward matches torch.nn.RNN with copied weights, with and without h0 ({context})",
           verbose)


# ---------------------------------------------------------------- gradient_by_position


def _scalar_function(seed: int, d: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A small tanh RNN read out at the end: a scalar whose gradient differs from row to row."""
    g = torch.Generator().manual_seed(seed)
    w_x = torch.randn(d, 4, generator=g, dtype=torch.float64) * 0.8
    w_h = torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.6
    v = torch.randn(4, generator=g, dtype=torch.float64)

    def f(x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(4, dtype=x.dtype)
        for x_t in x:
            h = torch.tanh(x_t @ w_x.to(x.dtype) + h @ w_h.to(x.dtype))
        return h @ v.to(x.dtype) + 0.1 * (x**2).sum()  # the last term reaches every row

    return f


def _gradient(f, x: torch.Tensor) -> torch.Tensor:
    leaf = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad(f(leaf), leaf)[0]  # (T, d)


@hinted
def check_gradient_by_position(gradient_by_position: Callable, seed: int = 0, T: int = 5, d: int = 3,
                               verbose: bool = True) -> None:
    """Check ``gradient_by_position(f, x)`` against autograd: shape, norms, a detached result, x untouched."""
    if T == d:
        raise ValueError("use T != d: only then does a norm over the wrong axis show in the shape")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, d, generator=g, dtype=torch.float64)
    before = x.clone()
    f = _scalar_function(seed, d)
    context = f"seed={seed}, x of shape ({T}, {d})"
    fix = ("copy x with requires_grad (x.detach().clone().requires_grad_(True)), call f on the copy, "
            "take torch.autograd.grad, then one L2 norm per row: grad.norm(dim=1)")
    result = call(gradient_by_position, f, x, what="gradient_by_position(f, x)", fix=fix)

    copy = "work on a copy: leaf = x.detach().clone().requires_grad_(True), and call f on the leaf"
    if x.requires_grad:
        raise CheckFailed("gradient_by_position left x.requires_grad = True: it must leave x untouched", copy)
    if x.grad is not None:
        raise CheckFailed("gradient_by_position left a .grad on x, so x does not come back untouched",
                          copy + "; torch.autograd.grad fills no .grad")
    if not torch.equal(x.detach(), before):
        raise CheckFailed("gradient_by_position changed the values of x in place — the caller's x is "
                          "overwritten", copy)
    expect_returned(result, "gradient_by_position(f, x)", "the norms")
    if not isinstance(result, torch.Tensor):
        raise CheckFailed(f"gradient_by_position should return a torch tensor of shape ({T},), got "
                          f"{type(result).__name__}",
                          "keep the result in torch: no .numpy(), .tolist() or np.…")
    if result.requires_grad:
        raise CheckFailed("the result still requires grad: it drags the whole autograd graph along",
                          "return the norms .detach()-ed (or compute them without create_graph=True)")

    grad = _gradient(f, x)
    want = grad.norm(dim=1)
    got = result.detach()
    per_row = "one L2 norm per row: grad.norm(dim=1)"
    if tuple(got.shape) == (T, d):
        raise CheckFailed(f"you returned the gradient itself, shape ({T}, {d}), not one number per position",
                          per_row)
    if tuple(got.shape) == (d,):
        raise CheckFailed(f"the result has shape ({d},): you took the norm over the positions (dim=0), not "
                          "over the features of each row", f"grad.norm(dim=1) -> ({T},)")
    if got.ndim == 0 or (tuple(got.shape) == (1,) and T != 1):
        raise CheckFailed(f"you returned a single number (the norm of the whole gradient?); there is one "
                          f"norm per position, shape ({T},)", per_row)
    mistakes = [
        ((grad**2).sum(dim=1).numpy(), "these are squared norms", "take the square root: grad.norm(dim=1)"),
        (grad.abs().sum(dim=1).numpy(), "this is the L1 norm (sum of |entries|), not the L2 norm", per_row),
        (grad.sum(dim=1).numpy(), "you summed the gradient's entries: positive and negative ones cancel",
         per_row),
        (grad.abs().amax(dim=1).numpy(), "this is the largest |entry| of each row, not the L2 norm", per_row),
    ]
    expect_close(got.numpy(), want.numpy(), "gradient norms by position", mistakes, context, fix)
    passed(f"gradient_by_position matches autograd ({context}), returns detached norms and leaves x "
           "untouched", verbose)
