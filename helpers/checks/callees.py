"""Before a check runs an exercise function: every name it calls must exist in the notebook.

A function written in one lesson is often needed in a later one, whose notebook does not define
it. Calling it then fails with a bare ``NameError``; this check says instead where the function
is: the course's version under the name the notebook imports, or the learner's own pasted in.
"""

from __future__ import annotations

import builtins
import dis
from collections.abc import Callable, Iterator

from .core import CheckFailed

# Functions of earlier lessons that later notebooks import under a name saying whose they are.
COURSE_NAMES = {"masked_attention": ("course_masked_attention", "lesson 04"),
                "softmax": ("course_softmax", "lesson 02"),
                "self_attention": ("course_self_attention", "lesson 02")}


# The instructions that look a plain name up in the notebook's namespace. ``code.co_names`` is not
# enough: it also holds every attribute name, so ``torch.softmax(x)``, ``F.softmax`` or
# ``x.softmax(-1)`` would read as a call of the notebook's own ``softmax``.
_GLOBAL_LOADS = {"LOAD_GLOBAL", "LOAD_NAME"}


def _global_names(code) -> Iterator[str]:
    for instruction in dis.get_instructions(code):
        if instruction.opname in _GLOBAL_LOADS:
            yield instruction.argval
    for const in code.co_consts:
        if hasattr(const, "co_code"):  # nested functions, comprehensions, lambdas
            yield from _global_names(const)


def missing_names(fn: Callable) -> list[str]:
    """The global names ``fn`` looks up that neither its notebook nor Python's builtins define."""
    code, namespace = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or namespace is None:
        return []
    local = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    seen = []
    for name in _global_names(code):
        if name in local or name in namespace or hasattr(builtins, name) or name in seen:
            continue
        seen.append(name)
    return seen


def check_names_defined(fn: Callable) -> None:
    """Fail, saying where to find it, if ``fn`` calls a function this notebook does not define.

    Only plain names count (``softmax(x)``), never attributes (``torch.softmax(x)``, ``x.softmax()``),
    and only the names listed in ``COURSE_NAMES`` are reported; the course's version is offered only
    where the notebook imports it.
    """
    namespace = getattr(fn, "__globals__", {})
    for name in missing_names(fn):
        if name not in COURSE_NAMES:
            continue
        course, lesson = COURSE_NAMES[name]
        paste = f"paste your own {name} from {lesson} into a cell above and run it"
        if course in namespace:
            raise CheckFailed(
                f"{fn.__name__} calls {name}, which this notebook does not define. {lesson}'s "
                f"{name} is here as {course} (the setup cell imports it) — call that, or paste your "
                f"own {name} from {lesson} into a cell above and run it.", f"call {course}, or {paste}")
        raise CheckFailed(f"{fn.__name__} calls {name}, which this notebook does not define ({name} is "
                          f"{lesson}'s exercise, and this notebook has no copy of it)",
                          f"{paste}, or compute that step in {fn.__name__} itself")
