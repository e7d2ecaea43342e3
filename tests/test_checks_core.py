"""``course_callees``: inside the block a learner's function calls the course's versions of other
exercises' functions; afterwards the learner's own are back, whatever happened inside. The checks
of such functions (``with_course_callees``) run that way."""

import functools
import importlib
import inspect

import numpy as np
import pytest
from notebook_cells import lesson_namespace, notebook

from helpers import attention, block
from helpers.checks.core import COURSE_VERSIONS, CheckFailed, course_callees, with_course_callees
from tooling.build import lesson_ids, solution_notebook

NOTEBOOK = """
def softmax(x, axis=-1):
    return "the learner's softmax"

def attention(q, k, v):
    return softmax(q), v

def encoder_block(x):
    return layer_norm(x), feed_forward(x)
"""


def test_the_course_versions_are_in_place_inside_and_the_learners_after():
    nb = notebook(NOTEBOOK)
    learners = nb["softmax"]
    with course_callees(nb["attention"], "softmax"):
        assert nb["softmax"] is attention.softmax
        np.testing.assert_allclose(nb["attention"](np.zeros(4), None, None)[0], np.full(4, 0.25))
    assert nb["softmax"] is learners
    assert nb["attention"](np.zeros(4), None, None)[0] == "the learner's softmax"


def test_the_learners_versions_come_back_when_the_check_fails():
    nb = notebook(NOTEBOOK)
    learners = nb["softmax"]
    with pytest.raises(CheckFailed, match="wrong"), course_callees(nb["attention"], "softmax"):
        raise CheckFailed("wrong")
    assert nb["softmax"] is learners
    with pytest.raises(NotImplementedError), course_callees(nb["attention"], "softmax"):
        raise NotImplementedError()
    assert nb["softmax"] is learners


def test_a_callee_the_learner_never_defined_is_removed_again():
    nb = notebook(NOTEBOOK)
    with course_callees(nb["encoder_block"], "layer_norm", "feed_forward"):
        assert (nb["layer_norm"], nb["feed_forward"]) == (block.layer_norm, block.feed_forward)
    assert "layer_norm" not in nb and "feed_forward" not in nb


def test_it_says_what_it_does_on_stdout_only(capsys):
    nb = notebook(NOTEBOOK)
    with course_callees(nb["encoder_block"], "layer_norm", "feed_forward"):
        pass
    out = capsys.readouterr()
    assert out.out == ("(encoder_block is checked with the course's layer_norm and feed_forward: a "
                       "mistake in your layer_norm or feed_forward costs points only in layer_norm_tests "
                       "or feed_forward_tests)\n")
    assert out.err == ""


def test_verbose_false_says_nothing(capsys):
    nb = notebook(NOTEBOOK)
    with course_callees(nb["encoder_block"], "layer_norm", "feed_forward", verbose=False):
        assert nb["layer_norm"] is block.layer_norm
    assert capsys.readouterr() == ("", "")


@with_course_callees("softmax")
def check_first_weight(attention, seed=0, verbose=True):
    """A check in the style of helpers.checks: it sees the course's softmax through attention."""
    weights = attention(np.zeros(4), None, None)[0]
    if isinstance(weights, str) or not np.allclose(weights, 0.25):
        raise CheckFailed(f"weights {weights}")
    return "checked"


def test_a_decorated_check_runs_with_the_course_callees_and_says_so_when_verbose(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["softmax"]
    assert check_first_weight(nb["attention"]) == "checked"
    assert capsys.readouterr().out.startswith("(attention is checked with the course's softmax")
    assert check_first_weight(nb["attention"], 3, False) == "checked"  # verbose given by position
    assert check_first_weight(nb["attention"], seed=3, verbose=False) == "checked"
    assert capsys.readouterr().out == ""
    assert nb["softmax"] is learners
    with pytest.raises(CheckFailed):
        check_first_weight.__wrapped__(nb["attention"])  # the undecorated check sees the learner's


def test_an_unknown_name_is_an_error_of_the_grade_cell():
    nb = notebook(NOTEBOOK)
    with pytest.raises(ValueError, match="no course version of attention_weights"):
        with course_callees(nb["attention"], "attention_weights"):
            pass


def test_something_without_globals_is_called_as_it_is():
    nb = notebook(NOTEBOOK)
    fn = functools.partial(nb["attention"], v=None)
    with course_callees(fn, "softmax"):
        assert fn(np.zeros(2), None)[0] == "the learner's softmax"


def test_every_course_version_is_an_exercise_with_its_signature_and_grade_cell():
    """Each name is an exercise of one lesson, graded in ``<name>_tests``, and its course version
    takes the arguments the lesson's solution takes."""
    graded_in = {}
    for lesson in lesson_ids():
        for cell in solution_notebook(lesson).cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if gid.endswith("_tests"):
                graded_in.setdefault(gid.removesuffix("_tests"), []).append(lesson)
    for name, module in COURSE_VERSIONS.items():
        assert len(graded_in.get(name, [])) == 1, f"{name}_tests is graded in {graded_in.get(name)}"
        solution = lesson_namespace(graded_in[name][0])[name]
        course = getattr(importlib.import_module(module), name)
        parameters = [list(inspect.signature(f).parameters) for f in (course, solution)]
        assert parameters[0] == parameters[1], name
