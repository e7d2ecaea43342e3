"""Hints come in two steps: a failing check names the mistake and why it is wrong; the fix (the line
to write, the recipe) is given only by ``hint()``. In IPython and Jupyter a failure shows the
learner's own cells and functions, never the checks' code; when the learner's function raises, its
own line is shown, with a note of the check's call that raised it."""

import io
import re
from contextlib import redirect_stdout

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from test_mistakes import known_wrong

from helpers import attention, masking
from helpers.checks import failure
from helpers.checks.failure import HINT_LINE, CheckFailed, hint
from helpers.checks.ideas import IDEAS
from helpers.checks.lookup import check_softmax
from helpers.checks.masking import check_masked_attention
from helpers.grading.settings import StripGradeTracebacks

# Lines that fix a mistake: they belong to hint(), never to the message a failing check shows.
FIX_LINES = ["masked_fill(~mask", "transpose(1, 2)", "np.diag(p) − np.outer(p, p)", "default_rng(seed)",
             "nan_to_num", "grad.norm(dim=1)", "unbiased=False", "torch.tril", "pe[:, 0::2]",
             "repeat_interleave", "np.where(p > 0", "keepdims=True", "out[..., 0::2]", "x[..., 0::2] with",
             "reshape(B, T, H", "(q * k).sum(axis=1)", "torch.sqrt(var + eps)", "np.sqrt(d_k)",
             "math.sqrt(", "torch.relu", "torch.zeros(D)", ".reshape(D, -1).T", "exp(old_max − new_max)",
             "torch.cat(outputs", "torch.as_tensor", "int(…)", "merge_heads(weights @ v) @ w_o"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def no_earlier_failures():
    failure._FAILURES.clear()
    yield
    failure._FAILURES.clear()


def _failure(check, fn, **kwargs) -> CheckFailed:
    with pytest.raises(CheckFailed) as caught, redirect_stdout(io.StringIO()):
        check(fn, verbose=False, **kwargs)
    return caught.value


def _hint(*args) -> str:
    with redirect_stdout(io.StringIO()) as out:
        hint(*args)
    return out.getvalue()


def inverted_mask(q, k, v, mask=None):
    return masking.masked_attention(q, k, v, None if mask is None else ~mask)


def softmax_unstable(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def test_no_known_mistake_prints_its_fix_and_hint_gives_it():
    """Every known-wrong answer of the check tests: the message names the mistake and ends by pointing
    at hint(); the fix is not in it. The first hint() gives the exercise's idea without the fix, the
    second gives the fix."""
    cases = known_wrong()
    with_fix, problems = 0, []
    for name, check, fn in cases:
        err = _failure(check, fn)
        message = str(err)
        shown = [line for line in FIX_LINES if line in message]
        if shown:
            problems.append(f"{name}: the message shows the fix {shown[0]!r}: {message[:160]!r}")
        if err.fix:
            with_fix += 1
            if err.fix in message or not message.endswith(HINT_LINE):
                problems.append(f"{name}: {message[:160]!r} with fix {err.fix!r}")
            first, second = _hint(), _hint()
            if err.exercise not in IDEAS:
                problems.append(f"{name}: check_{err.exercise} has no first hint (helpers/checks/ideas.py)")
            elif err.fix in first or IDEAS[err.exercise] not in first:
                problems.append(f"{name}: the first hint() should give the idea, not the fix: {first!r}")
            if err.fix not in second:
                problems.append(f"{name}: the second hint() does not give {err.fix!r}")
        elif HINT_LINE in message:
            problems.append(f"{name}: points at hint() with nothing to give")
    assert not problems, "\n".join(problems)
    assert with_fix == len(cases), f"only {with_fix} of {len(cases)} failures come with a fix"


def test_hint_explains_the_last_failure_or_the_one_asked_for():
    assert "nothing to hint" in _hint()
    masked = _failure(check_masked_attention, inverted_mask)
    assert "the mask is inverted" in str(masked) and "masked_fill(~mask" not in str(masked)
    first = _hint()  # the idea first, not the line
    assert IDEAS["masked_attention"] in first and "masked_fill(~mask" not in first
    assert "masked_fill(~mask, float('-inf'))" in _hint()  # asked again: the fix
    assert _hint() == _hint("masked_attention") == _hint("check_masked_attention")
    softmax = _failure(check_softmax, softmax_unstable)
    # hint(2): straight to the fix
    assert "subtract the maximum" in _hint(2) and "subtract the maximum" not in str(softmax)
    assert "masked_fill(~mask" in _hint("masked_attention")  # an earlier failure is still at hand
    check_softmax(attention.softmax, verbose=False)
    assert "nothing to hint" in _hint("softmax")  # it passes now
    assert "masked_fill(~mask" in _hint()  # the last failure that still stands
    again = _failure(check_masked_attention, inverted_mask)  # a new failure starts with its idea again
    assert IDEAS["masked_attention"] in _hint() and again.fix in _hint()


def test_no_first_hint_gives_a_fix_away():
    """The ideas name what to think about; none of them holds a line of the checks' fixes."""
    for exercise, idea in IDEAS.items():
        shown = [line for line in FIX_LINES if line in idea]
        assert not shown, f"{exercise}: the first hint gives {shown[0]!r} away"


def test_the_message_is_what_nbgrader_records_and_hint_is_one_line_further():
    err = _failure(check_masked_attention, inverted_mask)
    # the named mistake first (a display that keeps ~70 characters of a line still shows it),
    # then what was checked on which inputs, then the pointer to hint()
    assert str(err).startswith("the mask is inverted: True means *may attend*, but your weights go exactly "
                               "to the keys the mask blocks\n  checked: masked_attention with a random "
                               "(4, 6) mask: weights (seed=0")
    assert str(err).endswith(HINT_LINE)


# ------------------------------------------------------------------ what a learner sees in Jupyter

CELLS = [
    "from helpers.checks import hint\nfrom helpers.checks.masking import check_masked_attention",
    # a wrong answer: the check's message, no checker code
    "from helpers.masking import masked_attention as right\n\n"
    "def masked_attention(q, k, v, mask=None):\n"
    "    return right(q, k, v, None if mask is None else ~mask)\n",
    "check_masked_attention(masked_attention)",
    "hint()\nprint('----')\nhint()",
    # the learner's own function raises inside the check: their line, and on which input
    "def masked_attention(q, k, v, mask=None):\n"
    "    scores = q @ k.T  # the learner's own bug\n"
    "    return scores, scores\n",
    "check_masked_attention(masked_attention)",
    # the untouched stub, as the student notebook hands it out
    "from helpers.checks import check_attention\n\n"
    "def attention(q, k, v):\n"
    "    # YOUR CODE HERE\n"
    "    raise NotImplementedError()\n",
    "check_attention(attention)",
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The cells above run in a real kernel, as a learner runs them in JupyterLab."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path_factory.mktemp("run"))}}).execute()
    return nb.cells


def _error(cell):
    errors = [out for out in cell.outputs if out.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    return errors[0], ANSI.sub("", "\n".join(errors[0].traceback))


def test_a_failing_check_shows_its_message_and_none_of_the_checks_code(ran):
    error, shown = _error(ran[2])
    assert error.ename == "CheckFailed"
    assert error.evalue.startswith("the mask is inverted: True means *may attend*, but your weights go "
                                   "exactly to the keys the mask blocks\n  checked: masked_attention")
    assert error.evalue in shown
    assert "check_masked_attention(masked_attention)" in shown  # the learner's cell
    for checker in ("helpers/checks", "expect_close", "raise CheckFailed", "_run_masked", "masking.py",
                    "failure.py"):
        assert checker not in shown, f"the traceback shows {checker!r}:\n{shown}"
    assert "masked_fill(~mask" not in shown


def test_hint_in_the_notebook_gives_the_idea_then_the_fix(ran):
    first, second = "".join(out.get("text", "") for out in ran[3].outputs).split("----")
    assert "check_masked_attention said: " in first and IDEAS["masked_attention"] in first
    assert "masked_fill" not in first
    assert "How to fix it: block where the mask is False: scores.masked_fill(~mask, float('-inf'))" in second


def test_when_the_learners_function_raises_they_see_their_own_line(ran):
    error, shown = _error(ran[5])
    assert error.ename == "CheckFailed"  # graded and labelled like every failed check
    assert "raised RuntimeError" in error.evalue
    assert "scores = q @ k.T  # the learner's own bug" in shown  # their line, marked
    assert re.search(r"RuntimeError: .*", shown)  # their own error, as Python raised it
    assert re.search(r"\(raised while check_masked_attention called masked_attention without a mask, "
                     r"with array of shape \(2, 3, 4, 5\), array of shape \(2, 3, 6, 5\), array of shape "
                     r"\(2, 3, 6, 3\)\)\n  call hint\(\) for a hint, and again for the fix$", shown)
    for checker in ("helpers/checks", "core.py", "failure.py", "def call", "_run_masked", "from None"):
        assert checker not in shown, f"the traceback shows {checker!r}:\n{shown}"


def test_a_check_of_the_untouched_stub_shows_the_stub_and_none_of_the_checks_code(ran):
    error, shown = _error(ran[7])
    assert error.ename == "NotImplementedError"  # still what nbgrader and the release checks look for
    assert "check_attention(attention)" in shown  # the learner's cell
    assert "raise NotImplementedError()" in shown  # and the stub's line
    for checker in ("helpers/checks", "core.py", "failure.py", "def call", "def checked", "return fn(",
                    "result = check("):
        assert checker not in shown, f"the traceback shows {checker!r}:\n{shown}"


def test_nbgrader_validate_shows_the_stub_and_none_of_the_checks_code(tmp_path):
    """What `nbgrader validate` (and the hub's Validate button) prints for an untouched exercise."""
    from nbgrader.validator import Validator
    from traitlets.config import Config

    def cell(source, grade_id, **meta):
        return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
            "grade_id": grade_id, "schema_version": 3, "grade": False, "solution": False, "locked": True,
            **meta}})

    nb = nbformat.v4.new_notebook(cells=[
        cell(CELLS[6].split("\n\n")[0], "setup"),
        cell(CELLS[6].split("\n\n", 1)[1], "attention", solution=True, locked=False),
        cell("check_attention(attention)", "attention_tests", grade=True, points=4),
    ])
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    config = Config()
    config.Validator.ignore_checksums = True
    config.Execute.timeout = 120
    (failed,) = Validator(config=config).validate(str(path))["failed"]
    shown = ANSI.sub("", failed["raw_error"])
    assert "raise NotImplementedError()" in shown and "NotImplementedError" in shown.splitlines()[-1]
    for checker in ("helpers/checks", "core.py", "failure.py", "def call", "def checked"):
        assert checker not in shown, f"validate shows {checker!r}:\n{shown}"


def test_feedback_keeps_the_message_of_a_grade_cell(ran):
    """nbgrader's feedback shows a grade cell's error reduced to ``ename: evalue``: the message."""
    cell = nbformat.from_dict(ran[2])
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "masked_attention_tests", "locked": True,
                                 "points": 1, "schema_version": 3, "solution": False}
    StripGradeTracebacks().preprocess_cell(cell, {}, 0)
    (error,) = [out for out in cell.outputs if out.output_type == "error"]
    assert error.traceback == [f"CheckFailed: {error.evalue}"]
    assert "the mask is inverted" in error.traceback[0]


def test_outside_ipython_the_learners_error_is_the_cause():
    def crashes(q, k, v, mask=None):
        return q @ k.T, None

    err = _failure(check_masked_attention, crashes)
    assert isinstance(err.__cause__, RuntimeError) and err.crash is err.__cause__
