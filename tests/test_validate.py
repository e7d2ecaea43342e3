"""`nbgrader validate` tells a learner the truth, as the course grades: the course's time limit per
cell (not nbgrader's 30 s), a cell stopped at the limit is a failure, a failing check's named mistake
survives the cut validate makes to each line, and a warning is not a failure. The settings are the
ones `make lab` and the class hub's students get (hub/classhub.py), checked with real nbgrader."""

import os
import subprocess
import sys

import classhub
import nbformat
import pytest

from helpers.grading.autograde import fill_notebook, solution_answers
from helpers.grading.validation import CELL_TIMEOUT_S

LESSON = "02_attention_lookup"
NBGRADER = [sys.executable, "-m", "nbgrader"]


@pytest.fixture(scope="module")
def roles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roles")
    for role in ("learner", "student"):
        exchange = None if role == "learner" else folder / "exchange"
        classhub.write_role_settings(folder / role, role, exchange=exchange)
    return folder


def _validate(folder, notebook, roles=None, *args) -> str:
    """`nbgrader validate` run as a learner would, from the notebook's folder."""
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder / "no-user-config")}
    env.pop("JUPYTER_CONFIG_PATH", None)
    if roles is not None:
        env["JUPYTER_CONFIG_PATH"] = str(roles)
    done = subprocess.run([*NBGRADER, "validate", *args, notebook.name], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


@pytest.mark.parametrize("role", ["learner", "student"])
def test_the_validate_button_loads_the_course_limit(roles, role, monkeypatch):
    """The Validate button's own way of loading settings (the server extension's handler)."""
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(roles / role))
    monkeypatch.chdir(roles)
    config = ValidateAssignmentHandler.load_config(None)
    assert config.Execute.timeout == CELL_TIMEOUT_S == 300
    assert config.Validator.validate_all is True


def test_the_instructors_settings_validate_the_same_way():
    from traitlets.config import Config

    from helpers.grading.settings import configure

    c = configure(Config())
    assert c.Execute.timeout == CELL_TIMEOUT_S and c.Validator.validate_all is True


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validate")
    answers = solution_answers(LESSON)
    # a right answer that prints a warning while it is defined: grading gives full marks
    warning = "import warnings\nwarnings.warn('a note of my own')\n"
    warned = {**answers, "softmax": warning + answers["softmax"]}
    nbformat.write(fill_notebook(LESSON, warned), folder / "right.ipynb")
    wrong = {**answers, "attention": answers["attention"].replace("/ np.sqrt(d_k)", "")}
    assert wrong["attention"] != answers["attention"]
    nbformat.write(fill_notebook(LESSON, wrong), folder / "wrong.ipynb")
    # a notebook whose only slow cell is the learner's own experiment (the lesson's imports are left
    # out, so that the short limit of the test stops that cell alone, however busy the machine)
    def cell(source, grade_id, **meta):
        return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
            "grade_id": grade_id, "schema_version": 3, "grade": False, "solution": False, "locked": True,
            **meta}})

    nbformat.write(nbformat.v4.new_notebook(cells=[
        cell("import time\nanswer = 42", "setup"),
        nbformat.v4.new_code_cell("time.sleep(60)  # the learner's own experiment"),
        cell("assert answer == 42", "answer_tests", grade=True, points=1),
    ]), folder / "slow.ipynb")
    return folder


def test_a_right_notebook_with_a_warning_passes(notebooks, roles):
    out = _validate(notebooks, notebooks / "right.ipynb", roles / "learner")
    assert "Success! Your notebook passes all the tests." in out, out


def test_a_failing_check_shows_its_mistake_in_validates_short_lines(notebooks, roles):
    out = _validate(notebooks, notebooks / "wrong.ipynb", roles / "learner")
    assert "VALIDATION FAILED ON 1 CELL(S)" in out, out
    line = next(ln for ln in out.splitlines() if "CheckFailed:" in ln)
    assert line.endswith("...")  # validate cut it
    assert "CheckFailed: the scores are not divided by √d_k" in line, out
    assert "checked: attention weights on random inputs" in out


def test_a_cell_stopped_at_the_limit_fails_and_says_why(notebooks, roles):
    """With a 3 s limit for the test (the course's is 300 s), the sleeping cell is stopped: the
    course's settings fail the notebook; nbgrader's defaults would have said "Success!"."""
    ours = _validate(notebooks, notebooks / "slow.ipynb", roles / "learner", "--Execute.timeout=3")
    assert "VALIDATION FAILED ON 1 CELL(S)" in ours and "time.sleep(60)" in ours, ours
    assert "CellTimeoutError: stopped at the course's limit" in ours
    defaults = _validate(notebooks, notebooks / "slow.ipynb", None, "--Execute.timeout=3")
    assert "Success!" in defaults, defaults  # what a learner was told before
