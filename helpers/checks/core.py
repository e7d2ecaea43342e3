"""What every check shares: calling the learner's function, comparing, naming the mistake.

A check compares the learner's result with the reference on random inputs. When they
differ it computes what each *known mistake* would have produced and, if the learner's
result matches one, fails with that mistake's message; otherwise it reports where and by
how much the result is off. Failures raise ``CheckFailed`` (an ``AssertionError``), so
nbgrader scores the cell 0 and shows the message.

How a failure reads — the message, the fix kept for ``hint()``, the traceback a learner sees —
is in ``failure``.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from .failure import CheckFailed, show_stub

# Comparison tolerances: loose enough for float32 arithmetic, far tighter than any mistake.
RTOL = 1e-4
ATOL = 1e-6

# What the checks compare with is taken now, when the setup cell imports the checks, before
# any learner's code runs: replacing np.allclose later does not change how a check compares.
_allclose, _isfinite, _asarray = np.allclose, np.isfinite, np.asarray
_WATCHED = {
    (owner.__name__, name): getattr(owner, name)
    for owner, names in (
        (np, ("allclose", "isclose", "array_equal", "all", "any", "abs", "isfinite", "isnan",
              "asarray", "max", "argmax")),
        (np.testing, ("assert_allclose", "assert_array_equal")),
        (torch, ("allclose", "isclose", "equal", "all", "any", "abs", "isfinite", "isnan",
                 "as_tensor", "tensor")),
        (torch.testing, ("assert_close",)),
        (builtins, ("isinstance", "len", "abs", "all", "any", "max", "min", "sum", "print",
                    "float", "int", "bool", "AssertionError", "Exception", "getattr")),
    )
    for name in names
}
_OWNERS = {"numpy": np, "numpy.testing": np.testing, "torch": torch, "torch.testing": torch.testing,
           "builtins": builtins}


def replaced_functions() -> list[str]:
    """The comparison and built-in functions replaced since the checks were imported."""
    return [f"{owner}.{name}" for (owner, name), original in _WATCHED.items()
            if getattr(_OWNERS[owner], name, None) is not original]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence warnings and NumPy floating-point chatter: any stderr text scores a grade cell 0."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def fresh_seeds(n: int = 3) -> list[int]:
    """``n`` seeds nobody can predict, for hidden tests on fresh random inputs."""
    return [int.from_bytes(os.urandom(4), "little") for _ in range(n)]


def call(fn: Callable, *args, what: str, fix: str = "", **kwargs):
    """Call the learner's ``fn``; a crash becomes a ``CheckFailed`` that says on which inputs
    and keeps the learner's own error, shown with their own lines in IPython.

    ``NotImplementedError`` passes through: the exercise is simply not done yet, and IPython shows
    it by the learner's own lines (``show_stub``).
    """
    try:
        with quiet():
            return fn(*args, **kwargs)
    except NotImplementedError as err:
        show_stub(err)
        raise
    except Exception as err:  # the learner's code may raise anything; report it, do not crash
        shapes = ", ".join(_describe(a) for a in args)
        note = f"{what}, with {shapes}"
        raise CheckFailed(f"{what} raised {type(err).__name__}: {err}\n  called with {shapes}", fix,
                          crash=err, note=note) from err


def _describe(a) -> str:
    shape = getattr(a, "shape", None)
    if shape is not None:
        return f"array of shape {tuple(shape)}"
    if isinstance(a, torch.nn.Module):
        return repr(a)
    if callable(a):
        return getattr(a, "__name__", "a function")
    return repr(a)


RETURN_FIX = ("end the function with `return` and the value it computed: a function that reaches its "
              "end without a return statement, or with a bare `return`, gives None")


def expect_returned(result, what: str, thing: str = "its result") -> None:
    """Fail, naming a forgotten ``return``, when the learner's function gave None."""
    if result is None:
        raise CheckFailed(f"{what} is None — did the function forget to `return` {thing}?", RETURN_FIX)


def expect_pair(result, what: str, first: str, second: str) -> tuple:
    """The learner's result as the pair ``(first, second)`` it must be, or a ``CheckFailed``."""
    expect_returned(result, what, f"the pair ({first}, {second})")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CheckFailed(f"{what} must return a pair ({first}, {second}), got {type(result).__name__}",
                          f"end with `return {first}, {second}`: Python packs the two into a tuple")
    return tuple(result)


def swapped_pair(what: str, first: str, second: str) -> CheckFailed:
    """The failure for a pair returned in the wrong order."""
    return CheckFailed(f"{what} returned ({second}, {first}); the pair is ({first}, {second}), {first} first",
                       f"`return {first}, {second}`")


def single_output(result, what: str, shape: tuple, extra: str = "") -> None:
    """Fail when a function that returns one tensor returned a tuple or list of several."""
    if isinstance(result, (tuple, list)):
        raise CheckFailed(f"{what} returned a {type(result).__name__}; return only the output tensor "
                          f"{shape}{extra}",
                          "return the output alone: `return out`, not `return out, weights`")


def expect_dtype(result, dtype: torch.dtype, what: str, inputs: str = "the inputs") -> None:
    """Fail unless the learner's tensor keeps ``dtype``, the dtype of ``inputs`` that the exercise
    says the result has (anything that is not a tensor is left to the other checks)."""
    if torch.is_tensor(result) and result.dtype != dtype:
        raise CheckFailed(f"{what} has dtype {result.dtype}, but {inputs} are {dtype}: the exercise says the "
                          f"result keeps their dtype, and a {result.dtype} result loses precision or "
                          "doubles the memory",
                          "make new tensors with dtype=x.dtype (or torch.zeros_like(x)); cast back with "
                          ".to(x.dtype) if you compute in another dtype")


def _float_dtype(x) -> np.dtype | None:
    """The dtype of the learner's array, tensor or list of numbers (None when it has none)."""
    if torch.is_tensor(x):
        return torch.empty((), dtype=x.dtype).numpy().dtype
    try:
        return np.asarray(x).dtype
    except (TypeError, ValueError):
        return None


def expect_numpy_precision(result, inputs: Sequence, what: str) -> None:
    """Fail when the learner's result is a narrower float than NumPy's arithmetic on ``inputs`` gives
    (a float32 result for float64 inputs), for an exercise that says results keep that dtype.
    Computing in float32 and casting back is fine: only what is returned counts."""
    want, got = np.result_type(*inputs), _float_dtype(result)
    if got is not None and got.kind == want.kind == "f" and got.itemsize < want.itemsize:
        raise CheckFailed(f"{what} is {got} for {want} inputs: you returned a {got} computation, but the "
                          f"exercise says results have the dtype of NumPy's arithmetic on the inputs "
                          f"({want} here), and {got} keeps only about {np.finfo(got).precision} digits",
                          f"compute in {got} if you like, but cast the result back: "
                          ".astype(np.result_type(q, k, v)), or leave the inputs' dtype alone")


def as_array(x, what: str) -> np.ndarray:
    """The learner's result as a float NumPy array (torch tensors too), or a ``CheckFailed``."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    expect_returned(x, what)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as err:
        raise CheckFailed(f"{what} should be an array of numbers, got {type(x).__name__}: {err}") from None
    return arr


def same(got, want, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """True if the shapes agree and every entry is close (NaN never matches)."""
    got, want = _asarray(got, dtype=float), _asarray(want, dtype=float)
    if got.shape != want.shape:
        return False
    with quiet():
        return bool(_allclose(got, want, rtol=rtol, atol=atol, equal_nan=False))


def expect_shape(got: np.ndarray, shape: Sequence[int], what: str, why: str = "", fix: str = "") -> None:
    """Fail unless ``got`` has exactly ``shape``; ``why`` explains the shape, ``fix`` how to get it."""
    if tuple(got.shape) != tuple(shape):
        msg = f"{what} has shape {tuple(got.shape)}, expected {tuple(shape)}"
        raise CheckFailed(msg + (f" — {why}" if why else ""), fix)


def expect_close(
    got,
    want,
    what: str,
    mistakes: Sequence[tuple] = (),
    context: str = "",
    fix: str = "",
    rtol: float = RTOL,
    atol: float = ATOL,
    why: str = "",
) -> None:
    """Fail unless ``got`` matches ``want``; name the mistake whose result ``got`` matches.

    ``mistakes`` is a list of ``(what that mistake returns, message)`` or ``(…, message, fix)``;
    the first match wins. ``fix`` is what ``hint()`` gives when the mistake brings none of its
    own, or when no known mistake matches; ``why`` is added to the message in that last case
    (where to look, not what to write).
    """
    got = as_array(got, what)
    want = np.asarray(want, dtype=float)
    if same(got, want, rtol, atol):
        return
    where = f" ({context})" if context else ""
    for result, message, *own_fix in mistakes:
        if same(got, result, rtol, atol):
            raise CheckFailed(f"{what}{where}: {message}", own_fix[0] if own_fix else fix)
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        bad = np.argwhere(~np.isfinite(got))[0]
        raise CheckFailed(
            f"{what}{where} contains NaN or inf (first at index {tuple(int(i) for i in bad)}) "
            "while the correct result is finite — an overflow in exp?",
            "exp of a large number overflows to inf: subtract the maximum before exponentiating "
            "(the result does not change)" + (f". {fix}" if fix else ""))
    if got.shape != want.shape:
        raise CheckFailed(f"{what}{where} has shape {got.shape}, expected {want.shape}", fix)
    err = np.abs(got - want)
    idx = tuple(int(i) for i in np.unravel_index(np.argmax(err), err.shape))
    at = f"at index {idx} " if idx else ""
    raise CheckFailed(
        f"{what}{where} differs from the reference: {at}you return "
        f"{got[idx]:.6g}, the reference gives {want[idx]:.6g} (largest error {err[idx]:.3g})"
        + (f" — {why}" if why else ""), fix)


# Exercise functions that another exercise may call, and the module holding the course's version
# of each. Names are unique across the lessons, and every one is graded in the cell `<name>_tests`.
COURSE_VERSIONS = {
    "softmax": "helpers.attention",
    "attention": "helpers.attention",
    "causal_mask": "helpers.masking",
    "masked_attention": "helpers.masking",
    "sinusoidal_encoding": "helpers.positional",
    "split_heads": "helpers.heads",
    "merge_heads": "helpers.heads",
    "layer_norm": "helpers.block",
    "feed_forward": "helpers.block",
    "layer_macs": "helpers.cost",
    "patchify": "helpers.patches",
    "lm_loss": "helpers.gpt",
}


def _listed(words: Sequence[str], last: str) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


@contextlib.contextmanager
def course_callees(fn: Callable, *names: str, verbose: bool = True) -> Iterator[None]:
    """Inside the block, ``fn`` calls the course's versions of the exercise functions ``names``.

    One mistake is charged once: a function that calls another exercise's function is graded
    with the course's version of the callee, put in the globals ``fn`` reads (the notebook's
    namespace). The learner's own versions are back afterwards, also when the block fails.
    ``verbose`` says so in one line.
    """
    unknown = [name for name in names if name not in COURSE_VERSIONS]
    if unknown:
        raise ValueError(f"no course version of {', '.join(unknown)}; known: {', '.join(COURSE_VERSIONS)}")
    versions = {name: getattr(importlib.import_module(COURSE_VERSIONS[name]), name) for name in names}
    if verbose:
        print(f"({getattr(fn, '__name__', 'this function')} is checked with the course's "
              f"{_listed(names, 'and')}: a mistake in your {_listed(names, 'or')} costs points only in "
              f"{_listed([f'{name}_tests' for name in names], 'or')})")
    namespace = getattr(fn, "__globals__", None)
    if namespace is None:  # not a Python function (a partial, a builtin): nothing it looks up to replace
        yield
        return
    absent = object()
    saved = {name: namespace.get(name, absent) for name in names}
    namespace.update(versions)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is absent:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def with_course_callees(*names: str) -> Callable[[Callable], Callable]:
    """Decorate the check of a function that calls the exercise functions ``names``: the check
    runs with the course's versions of them (``course_callees``), and says so when verbose."""

    def decorate(check: Callable) -> Callable:
        signature = inspect.signature(check)

        @functools.wraps(check)
        def checked(fn: Callable, *args, **kwargs):
            bound = signature.bind(fn, *args, **kwargs)
            bound.apply_defaults()
            with course_callees(fn, *names, verbose=bound.arguments.get("verbose", True)):
                return check(fn, *args, **kwargs)

        return checked

    return decorate


def passed(message: str, verbose: bool = True) -> None:
    """Report success in the notebook — unless code in the notebook replaced the functions the
    checks rely on, in which case no check may pass."""
    replaced = replaced_functions()
    if replaced:
        raise CheckFailed("code in this notebook replaced " + ", ".join(replaced)
                          + ": checks cannot be trusted after that, so none passes. Restart the "
                          "kernel and remove that code.")
    if verbose:
        print(f"✓ {message}")
