"""The slow hostile cases, run by `make hostile` (not by `make test`): a fork bomb and a cell
that prints without end, graded beside an honest student in the sandbox."""

import time

import pytest
from test_hostile import FULL, LESSON, _submission

from helpers.grading import sandbox
from helpers.grading.autograde import grade_class, solution_answers

pytestmark = [pytest.mark.bombs,
              pytest.mark.skipif(sandbox.launcher() is None, reason=sandbox.status())]

FORK_BOMB = '''quiz_1 = "a"
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
'''
PLAIN_FORK_BOMB = 'quiz_1 = "a"\nimport os\nwhile True:\n    os.fork()\n'  # ends with an error
ENDLESS = 'quiz_1 = "a"\nwhile True:\n    print("x" * 10_000)\n'


@pytest.fixture(scope="module")
def bombed(tmp_path_factory, built_solutions):
    tmp = tmp_path_factory.mktemp("bombs")
    full = solution_answers(LESSON)
    _submission(tmp / "subs", "honest", full)
    _submission(tmp / "subs", "forker", {**full, "quiz_1": FORK_BOMB})
    _submission(tmp / "subs", "printer", {**full, "quiz_1": ENDLESS})
    _submission(tmp / "subs", "plainforker", {**full, "quiz_1": PLAIN_FORK_BOMB})
    return grade_class(LESSON, tmp / "subs", tmp / "grading", workers=2, timeout=20)


def test_the_class_run_survives_and_the_honest_student_keeps_full_marks(bombed):
    assert bombed.graded["honest"] == FULL
    assert set(bombed.graded) == {"honest", "forker", "printer", "plainforker"}
    assert not bombed.failed


def test_each_bomb_costs_only_its_cell_and_is_reported(bombed):
    text = "\n".join(bombed.lines())
    for student in ("forker", "printer"):
        assert f"{student}: stopped at the time limit in quiz_1" in text
    # the fork bomb catches the interrupt most of the time (inside os.fork's own hooks, where
    # Python drops it): then its kernel is replaced and the rest graded without quiz_1
    assert bombed.graded["forker"] in (FULL - 1, FULL)
    # the answer was set before the endless loop: stopping the loop costs no points
    assert bombed.graded["printer"] == FULL


def test_a_cell_that_leaves_processes_behind_does_not_break_the_next(bombed):
    """The plain fork bomb's cell ends (fork fails) with its copies still running; they are
    ended with the cell, so the next cells can start threads again."""
    assert bombed.graded["plainforker"] == FULL


def test_no_process_of_a_sandbox_user_is_left(bombed):
    """(Run alone: another grading run's kernels would count too.)"""
    deadline = time.monotonic() + 10
    while sandbox.sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sandbox.sandbox_processes() == []
