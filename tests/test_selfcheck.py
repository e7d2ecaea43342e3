"""A learner working alone grades their own notebook as an instructor would (`make check`):
the same hidden tests and sandbox, a score per exercise, the mistake named, the reasons of the
quizzes — and never a hidden test's source. Where the course's sources are absent, it says that
grading is the instructor's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import nbformat
from conftest import ROOT

from helpers.grading.autograde import fill_notebook, solution_answers
from helpers.grading.selfcheck import self_check

LESSON = "02_attention_lookup"


def test_a_learners_notebook_graded_as_the_instructor_would(tmp_path):
    answers = solution_answers(LESSON)
    right = answers["attention"]
    answers["attention"] = right.replace("/ np.sqrt(d_k)", "")  # the classic mistake: no √d_k
    assert answers["attention"] != right, "the reference attention changed: update the mistake"
    answers.pop("self_attention")  # left as the stub
    answers["quiz_2"] = 'quiz_2 = "c"'  # a wrong choice (the right one is "b")
    notebook = tmp_path / "mine.ipynb"
    nbformat.write(fill_notebook(LESSON, answers), notebook)

    outcome = self_check(LESSON, notebook, root=tmp_path / "root")
    by_id = {c.grade_id: c for c in outcome.cells}
    assert by_id["softmax_tests"].full
    assert by_id["attention_tests"].points == 0 and "√d_k" in by_id["attention_tests"].said
    assert by_id["self_attention_tests"].points == 0 and "not attempted" in by_id["self_attention_tests"].said
    assert by_id["quiz_1_check"].full and by_id["quiz_1_check"].said.startswith("right — ")
    assert by_id["quiz_2_check"].points == 0 and by_id["quiz_2_check"].said.startswith("not quite — ")
    assert outcome.hand_graded == ["why_rows"]
    assert outcome.score == by_id["softmax_tests"].points + by_id["quiz_1_check"].points + \
        by_id["quiz_3_check"].points
    shown = "\n".join(outcome.lines())
    assert f"{outcome.score:g} of {outcome.max_score:g} points" in shown
    assert outcome.page == tmp_path / "feedback" / "mine.html", "the page sits next to the notebook"
    page = outcome.page.read_text()
    for text in (shown, page):  # neither the summary nor the page shows a hidden test
        assert "BEGIN HIDDEN TESTS" not in text and "check_own_work(" not in text
        assert "scaled_dot_product_attention(" not in text
    assert "√d_k" in page and "not quite" in page
    assert not (ROOT / "grading" / "autograded" / "you").exists(), "the instructor's course root is untouched"


def test_without_the_sources_grading_is_the_instructors(tmp_path):
    """A class handed only the package and notebooks (the hub's student environment): no hidden
    tests here, so the self-check says whose grading it is and exits 3."""
    shutil.copytree(ROOT / "helpers", tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "helpers.grading.selfcheck", LESSON, "--no-open"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "grading is your instructor's" in done.stdout and "Traceback" not in done.stderr


def test_a_grading_run_that_could_not_start_is_said_so_not_read_as_a_missing_file(tmp_path, monkeypatch):
    """When the machinery stops (here: its kernels' server never starts), the learner reads why,
    as a machinery failure, not a missing notebook's traceback."""
    import pytest

    from helpers.grading import autograde
    from helpers.grading.autograde import ClassReport
    from helpers.grading.execute import GradingMachineryError

    def stopped(lesson, *args, **kwargs):
        return ClassReport(lesson, machinery="the grading kernels' server did not start: the warm "
                                              "kernel server did not start within 300 s")

    monkeypatch.setattr(autograde, "grade_class", stopped)
    notebook = tmp_path / "mine.ipynb"
    nbformat.write(fill_notebook(LESSON, solution_answers(LESSON)), notebook)
    with pytest.raises(GradingMachineryError, match="was not graded: the grading kernels. server"):
        self_check(LESSON, notebook, root=tmp_path / "root")
