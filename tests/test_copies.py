"""A pasted reference is listed for review: every exercise function long enough to tell a copy by,
pasted as ``inspect.getsource`` prints it or with its names changed, is found; the course's own
solutions and differently written right answers are not."""

import ast
import importlib
import inspect
import textwrap

import pytest
from conftest import ROOT, lessons

from helpers.checks.own_work import COURSE_MODULES
from helpers.grading.integrity import SEVERITY, scan_notebook
from helpers.grading.integrity.copies import MIN_NODES, copied_references, reference_shape, shape

COVERED = [name for name in COURSE_MODULES if reference_shape(name) is not None]


def _source(name: str) -> str:
    fn = inspect.unwrap(getattr(importlib.import_module(COURSE_MODULES[name]), name))
    return textwrap.dedent(inspect.getsource(fn))


def test_most_exercises_are_covered_and_the_short_ones_are_named():
    assert len(COVERED) >= 25, COVERED
    short = sorted(set(COURSE_MODULES) - set(COVERED))
    for name in short:  # one right answer looks like another below this size
        assert shape(ast.parse(_source(name)).body[0])[1] < MIN_NODES, name


class _Rename(ast.NodeTransformer):
    """Every local name of a function to a name of one's own, its docstring to a comment-free body."""

    def __init__(self, local: set[str]) -> None:
        self.local = {name: f"mine_{i}" for i, name in enumerate(sorted(local))}

    def visit_Name(self, node):
        node.id = self.local.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.local.get(node.arg, node.arg)
        return node


@pytest.mark.parametrize("name", COVERED)
def test_a_pasted_reference_is_found_even_renamed(name):
    source = _source(name)
    assert copied_references(ast.parse(source)) == [(1, f"{COURSE_MODULES[name]}.{name}")]
    tree = ast.parse(source)
    fn = tree.body[0]
    local = {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn)
                                             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    fn.body[0] = ast.Expr(ast.Constant("In my own words."))
    renamed = ast.unparse(_Rename(local).visit(tree))
    assert copied_references(ast.parse(renamed)), f"renamed copy of {name} not found:\n{renamed}"


@pytest.mark.parametrize("lesson", lessons())
def test_the_course_solutions_are_no_copies(lesson):
    from helpers.grading.autograde import fill_notebook, solution_answers

    released = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    findings = scan_notebook(fill_notebook(lesson, solution_answers(lesson)), released)
    assert [f for f in findings if f.kind == "copies-reference"] == []


def test_a_pasted_reference_in_a_submission_is_reviewed_not_zeroed():
    from helpers.grading.autograde import fill_notebook, solution_answers

    lesson = "02_attention_lookup"
    answers = solution_answers(lesson)
    answers["attention"] = _source("attention")
    released = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    findings = [f for f in scan_notebook(fill_notebook(lesson, answers), released)
                if f.kind == "copies-reference"]
    assert len(findings) == 1 and findings[0].cell == "attention"
    assert SEVERITY["copies-reference"] == "review" and findings[0].severity == "review"
    assert "helpers.attention.attention" in findings[0].detail


def test_a_right_answer_written_another_way_is_no_copy():
    other = textwrap.dedent('''
        def attention(q, k, v):
            """Mine."""
            import numpy as np
            d = q.shape[-1]
            s = np.einsum("...qd,...kd->...qk", q, k) / d ** 0.5
            s = s - s.max(axis=-1, keepdims=True)
            w = np.exp(s)
            w = w / w.sum(axis=-1, keepdims=True)
            return w @ v, w
    ''')
    assert copied_references(ast.parse(other)) == []
