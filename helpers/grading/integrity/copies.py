"""Answers that reproduce the course's own implementation of an exercise.

The visible checks need the course's references in the learners' environment, so a learner can
print one (``inspect.getsource(helpers.gpt.lm_loss)``) and paste it: it passes every check, and
the own-work check, which catches calls, not copies, says nothing. Here an exercise function whose
body is the reference's — statement for statement, whatever its local names, docstring, comments
or layout — is listed for review. Short bodies are left alone: a two-line formula written from
the lesson looks like any other right answer.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import textwrap

from ...checks.own_work import COURSE_MODULES

MIN_NODES = 40  # syntax-tree nodes of a reference body below which a copy cannot be told apart


class _Canonical(ast.NodeTransformer):
    """Local names (arguments, assigned names) become _0, _1, … in the order they first appear."""

    def __init__(self, local: set[str]) -> None:
        self.local, self.names = local, {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"_{len(self.names)}") if name in self.local else name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(self._name(node.id), node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.arg:
        return ast.copy_location(ast.arg(self._name(node.arg)), node)


def _locals(fn: ast.FunctionDef) -> set[str]:
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def shape(fn: ast.FunctionDef) -> tuple[str, int]:
    """The function's body with no docstring and canonical local names, dumped; and its size."""
    fn = copy.deepcopy(fn)  # the caller's tree is read by the rest of the scan
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    canon = _Canonical(_locals(fn))
    canon.visit(fn.args)  # the arguments are named first, in their order
    tree = ast.Module([canon.visit(ast.parse(ast.unparse(s)).body[0]) for s in body], [])
    for node in ast.walk(tree):  # annotations say nothing about what is computed
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return ast.dump(tree), sum(1 for _ in ast.walk(tree))


@functools.cache
def reference_shape(name: str) -> str | None:
    """The shape of the course's own ``name``, or None when it is too short to tell a copy by."""
    fn = inspect.unwrap(getattr(importlib.import_module(COURSE_MODULES[name]), name))
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    dumped, size = shape(tree)
    return dumped if size >= MIN_NODES else None


def copied_references(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, "module.name") of every exercise function in ``tree`` whose body is the course's own."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in COURSE_MODULES:
            reference = reference_shape(node.name)
            if reference is not None and shape(node)[0] == reference:
                found.append((node.lineno, f"{COURSE_MODULES[node.name]}.{node.name}"))
    return found
