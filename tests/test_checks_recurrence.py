"""The lesson 01 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import numpy as np
import pytest
import torch

from helpers import recurrence as ref
from helpers.checks.core import CheckFailed
from helpers.checks.recurrence import check_gradient_by_position, check_rnn_forward

# ---------------------------------------------------------------- rnn_forward


def rnn_preallocated(x, w_x, w_h, b, h0=None):
    T, d_h = x.shape[0], w_h.shape[0]
    H = np.empty((T, d_h))
    h = np.zeros(d_h) if h0 is None else h0
    for t in range(T):
        h = np.tanh(x[t] @ w_x + h @ w_h + b)
        H[t] = h
    return H


def rnn_precomputed_input(x, w_x, w_h, b, h0=None):
    inputs = x @ w_x + b  # (T, d_h): the part that does not depend on the past, all at once
    h = np.zeros(len(b)) if h0 is None else np.array(h0)
    states = []
    for a in inputs:
        h = np.tanh(a + h @ w_h)
        states.append(h)
    return np.array(states)


def rnn_torch(x, w_x, w_h, b, h0=None):
    x, w_x, w_h, b = (torch.tensor(a, dtype=torch.float32) for a in (x, w_x, w_h, b))
    h = torch.zeros(len(b)) if h0 is None else torch.tensor(h0, dtype=torch.float32)
    out = []
    for x_t in x:
        h = torch.tanh(x_t @ w_x + h @ w_h + b)
        out.append(h)
    return torch.stack(out)  # a tensor is accepted too


def rnn_einsum_list(x, w_x, w_h, b, h0=None):
    h = [0.0] * len(b) if h0 is None else list(h0)
    out = []
    for x_t in x:
        h = np.tanh(np.einsum("i,ij->j", x_t, w_x) + np.einsum("i,ij->j", np.asarray(h), w_h) + b)
        out.append(h.tolist())
    return out  # a list of lists


@pytest.mark.parametrize("fn", [ref.rnn_forward, rnn_preallocated, rnn_precomputed_input, rnn_torch,
                                rnn_einsum_list])
def test_rnn_forward_check_passes_correct_variants(fn, capsys):
    check_rnn_forward(fn)
    assert "✓" in capsys.readouterr().out
    check_rnn_forward(fn, seed=5, T=1, d_in=7, d_h=2, verbose=False)
    check_rnn_forward(fn, seed=6, T=30, d_in=4, d_h=4, verbose=False)


def _loop(step, keep_h0=False, shift=False, backwards=False, last_only=False):
    """A recurrence with one deliberate mistake; ``step(x_t, h, w_x, w_h, b)`` is the update."""
    def fn(x, w_x, w_h, b, h0=None):
        h = np.zeros(len(b)) if h0 is None else np.asarray(h0, dtype=float)
        states = [h] if keep_h0 else []
        for x_t in (x[::-1] if backwards else x):
            new = step(x_t, h, w_x, w_h, b)
            states.append(h if shift else new)
            h = new
        return states[-1] if last_only else np.stack(states)

    return fn


RIGHT = lambda x_t, h, w_x, w_h, b: np.tanh(x_t @ w_x + h @ w_h + b)  # noqa: E731


def rnn_pre_activation(x, w_x, w_h, b, h0=None):
    a = np.zeros(len(b)) if h0 is None else np.asarray(h0, dtype=float)
    states = []
    for x_t in x:
        a = x_t @ w_x + a @ w_h + b
        states.append(np.tanh(a))
    return np.stack(states)


def rnn_in_place(x, w_x, w_h, b, h0=None):
    x *= 1.0
    x += 0.0
    b += 1.0  # the classic accident: += on an argument
    return ref.rnn_forward(x, w_x, w_h, b - 1.0, h0)


def rnn_no_return(x, w_x, w_h, b, h0=None):
    ref.rnn_forward(x, w_x, w_h, b, h0)


def rnn_transposed(x, w_x, w_h, b, h0=None):
    return ref.rnn_forward(x, w_x, w_h, b, h0).T


RNN_MISTAKES = [
    (_loop(lambda x_t, h, w_x, w_h, b: x_t @ w_x + h @ w_h + b), "no tanh"),
    (_loop(lambda x_t, h, w_x, w_h, b: np.tanh(x_t @ w_x + h @ w_h.T + b)), "w_h transposed"),
    (_loop(lambda x_t, h, w_x, w_h, b: np.tanh(x_t @ w_x + w_h @ h + b)), "w_h @ h is h @ w_h.T"),
    (lambda x, w_x, w_h, b, h0=None: _loop(RIGHT)(x, w_x, w_h, b), "h0 is ignored"),
    (lambda x, w_x, w_h, b, h0=None: np.stack([
        np.tanh(x_t @ w_x + (np.zeros(len(b)) if h0 is None else h0) @ w_h + b) for x_t in x]),
     "every step uses h0"),
    (_loop(RIGHT, shift=True), "shifted by one"),
    (rnn_pre_activation, "pre-activation"),
    (_loop(lambda x_t, h, w_x, w_h, b: np.maximum(0, x_t @ w_x + h @ w_h + b)), "ReLU"),
    (_loop(lambda x_t, h, w_x, w_h, b: 1 / (1 + np.exp(-(x_t @ w_x + h @ w_h + b)))), "sigmoid"),
    (_loop(RIGHT, backwards=True), "backwards"),
    (_loop(RIGHT, last_only=True), "not only the last one"),
    (_loop(RIGHT, keep_h0=True), "without the initial state h0"),
    (rnn_transposed, "one row per time step"),
    (rnn_in_place, "in place"),
    (rnn_no_return, "forget to `return`"),
]


@pytest.mark.parametrize("fn, message", RNN_MISTAKES)
def test_rnn_forward_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_rnn_forward(fn)


def test_rnn_forward_check_reports_a_crash_with_the_inputs():
    def crashes(x, w_x, w_h, b, h0=None):
        return np.tanh(x @ w_h)  # (T, d_in) @ (d_h, d_h): shapes do not fit

    with pytest.raises(CheckFailed, match=r"(?s)raised ValueError.*called with array of shape \(6, 3\)"):
        check_rnn_forward(crashes)


# ---------------------------------------------------------------- gradient_by_position


def grad_backward_on_copy(f, x):
    leaf = x.clone().detach().requires_grad_()
    f(leaf).backward()
    return leaf.grad.norm(dim=1)


def grad_manual_norm(f, x):
    leaf = x.detach().clone()
    leaf.requires_grad = True
    (g,) = torch.autograd.grad(f(leaf), [leaf])
    return g.pow(2).sum(-1).sqrt().detach()


def grad_functorch(f, x):
    return torch.linalg.vector_norm(torch.func.grad(f)(x), dim=-1)


def grad_float32(f, x):
    return ref.gradient_by_position(f, x).float()


@pytest.mark.parametrize("fn", [ref.gradient_by_position, grad_backward_on_copy, grad_manual_norm,
                                grad_functorch, grad_float32])
def test_gradient_check_passes_correct_variants(fn, capsys):
    check_gradient_by_position(fn)
    assert "✓" in capsys.readouterr().out
    check_gradient_by_position(fn, seed=3, T=1, d=4, verbose=False)
    check_gradient_by_position(fn, seed=4, T=9, d=2, verbose=False)


def _grad(x, f):
    leaf = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad(f(leaf), leaf)[0]


def grad_on_x_itself(f, x):
    x.requires_grad_(True)
    f(x).backward()
    return x.grad.norm(dim=1).detach()


def grad_left_on_x(f, x):
    x.requires_grad_(True)
    f(x).backward()
    out = x.grad.norm(dim=1).detach()
    x.requires_grad_(False)  # switched off again, but x.grad stays
    return out


def grad_not_detached(f, x):
    leaf = x.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(leaf), leaf, create_graph=True)
    return g.norm(dim=1)


def grad_mutates_values(f, x):
    out = ref.gradient_by_position(f, x)
    x.mul_(2.0)
    return out


GRADIENT_MISTAKES = [
    (lambda f, x: _grad(x, f), "gradient itself"),
    (lambda f, x: _grad(x, f).norm(dim=0), "over the positions"),
    (lambda f, x: _grad(x, f).norm(), "single number"),
    (lambda f, x: (_grad(x, f) ** 2).sum(dim=1), "squared norms"),
    (lambda f, x: _grad(x, f).abs().sum(dim=1), "L1 norm"),
    (lambda f, x: _grad(x, f).sum(dim=1), "summed the gradient's entries"),
    (lambda f, x: _grad(x, f).abs().amax(dim=1), r"largest \|entry\|"),
    (lambda f, x: _grad(x, f).norm(dim=1).numpy(), "should return a torch tensor"),
    (grad_on_x_itself, "requires_grad = True"),
    (grad_left_on_x, r"left a \.grad on x"),
    (grad_not_detached, "still requires grad"),
    (grad_mutates_values, "changed the values of x"),
    (lambda f, x: None, "forget to `return`"),
    (lambda f, x: ref.gradient_by_position(f, x) * 0.5, "differs from the reference"),
]


@pytest.mark.parametrize("fn, message", GRADIENT_MISTAKES)
def test_gradient_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_gradient_by_position(fn)


def test_unfinished_exercises_are_not_failures():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        check_rnn_forward(stub)
    with pytest.raises(NotImplementedError):
        check_gradient_by_position(stub)


def test_gradient_check_needs_t_different_from_d():
    with pytest.raises(ValueError, match="T != d"):
        check_gradient_by_position(ref.gradient_by_position, T=3, d=3)


def test_checks_write_nothing_to_stderr(capsys):
    """Any stderr text scores a grade cell 0: a noisy wrong answer fails by its message only."""
    def overflowing(x, w_x, w_h, b, h0=None):
        return np.exp(np.full((x.shape[0], len(b)), 1000.0))  # overflow warning inside the check

    with pytest.raises(CheckFailed):
        check_rnn_forward(overflowing)
    with pytest.raises(CheckFailed):
        check_gradient_by_position(grad_not_detached)
    assert capsys.readouterr().err == ""
