"""An nbgrader round trip through its Python API on lesson 02: generate, submit, autograde,
feedback. Full solutions get full marks, a blank notebook 0, a wrong function loses exactly its
points, and the feedback never shows hidden tests (not even inside tracebacks)."""

import html
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from traitlets.config import Config

from helpers.grading.settings import configure

LESSON = "02_attention_lookup"
MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")

WRONG_SELF_ATTENTION = '''def self_attention(x, w_q, w_k, w_v):
    return attention(x @ w_k, x @ w_q, x @ w_v)  # queries and keys swapped
'''
# Right on every visible check (2-D arrays), wrong along axis 1 of a 3-D array: only hidden tests see it.
HIDDEN_WRONG_SOFTMAX = '''def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    if axis == 0 and x.ndim == 2:
        return softmax(x.T).T
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
'''


def _solutions(source_nb) -> dict[str, str]:
    """grade_id -> the solution cell's text as a student would type it (no markers)."""
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(
        line for line in c.source.splitlines() if not MARKERS.match(line))
        for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _submission(release_nb, answers: dict[str, str]):
    nb = nbformat.from_dict(release_nb)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and gid in answers:
            cell.source = answers[gid]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory, built_solutions):
    root = tmp_path_factory.mktemp("course")
    config = configure(Config(), root)
    config.CourseDirectory.source_directory = str(ROOT / "solutions")
    config.Execute.timeout = 120
    api = NbGraderAPI(config=config)
    result = api.generate_assignment(LESSON)
    assert result["success"], result.get("error")

    release_nb = nbformat.read(root / "release" / LESSON / f"{LESSON}.ipynb", as_version=4)
    full = _solutions(nbformat.read(built_solutions[LESSON], as_version=4))
    submissions = {
        "full": full,
        "blank": {},
        "wrong_self_attention": {**full, "self_attention": WRONG_SELF_ATTENTION},
        "hidden_wrong_softmax": {**full, "softmax": HIDDEN_WRONG_SOFTMAX},
        "wrong_quiz": {**full, "quiz_2": 'quiz_2 = "c"'},
    }
    for student, answers in submissions.items():
        folder = root / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        nbformat.write(_submission(release_nb, answers), folder / f"{LESSON}.ipynb")
        result = api.autograde(LESSON, student, force=True, create=True)
        assert result["success"], f"{student}: {result.get('error')}\n{result.get('log')}"
        result = api.generate_feedback(LESSON, student, force=True)
        assert result["success"], f"{student}: {result.get('error')}"
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        scores = {s: {g.name: g.auto_score for g in gb.find_submission_notebook(
            LESSON, LESSON, s).grades} for s in submissions}
        max_points = {g.name: g.max_score for g in gb.find_notebook(LESSON, LESSON).grade_cells}
    yield root, scores, max_points
    shutil.rmtree(root, ignore_errors=True)


def _auto(max_points, scores):
    return {k: v for k, v in scores.items() if k in max_points and v is not None}


def test_full_solution_gets_every_automatic_point(graded):
    _, scores, max_points = graded
    auto = _auto(max_points, scores["full"])
    assert auto and all(auto[k] == max_points[k] for k in auto), auto
    assert scores["full"]["why_rows"] is None  # free text: graded by hand


def test_untouched_notebook_scores_zero(graded):
    _, scores, _ = graded
    assert all(not v for v in scores["blank"].values()), scores["blank"]


@pytest.mark.parametrize("student, loses", [
    ("wrong_self_attention", {"self_attention_tests"}),
    ("hidden_wrong_softmax", {"softmax_tests"}),
    ("wrong_quiz", {"quiz_2_check"}),
])
def test_one_wrong_answer_loses_exactly_its_points(graded, student, loses):
    _, scores, max_points = graded
    auto = _auto(max_points, scores[student])
    lost = {k for k, v in auto.items() if v < max_points[k]}
    assert lost == loses
    assert all(auto[k] == 0 for k in loses)


def _feedback_text(root: Path, student: str) -> str:
    page = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page))  # highlighted code is split into spans


def _hidden_lines() -> list[str]:
    """Lines of hidden tests that appear nowhere in the student notebook."""
    source = (ROOT / "solutions" / LESSON / f"{LESSON}.py").read_text()
    release = nbformat.read(ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb", as_version=4)
    visible = {ln.strip() for cell in release.cells for ln in cell.source.splitlines()}
    blocks = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S)
    lines = [ln.strip() for b in blocks for ln in b.splitlines() if len(ln.strip()) > 12]
    return [ln for ln in lines if ln not in visible]


@pytest.mark.parametrize("student", ["full", "wrong_self_attention", "hidden_wrong_softmax"])
def test_feedback_shows_no_hidden_test(graded, student):
    root, _, _ = graded
    text = _feedback_text(root, student)
    leaked = [ln for ln in _hidden_lines() if ln in text]
    assert not leaked, f"hidden test lines in {student}'s feedback: {leaked[:3]}"


def test_feedback_keeps_the_message_that_names_the_mistake(graded):
    root, _, _ = graded
    assert "queries and keys are swapped" in _feedback_text(root, "wrong_self_attention")
    assert "axis=1" in _feedback_text(root, "hidden_wrong_softmax")


def test_tracebacks_would_leak_hidden_tests_without_the_feedback_filter(graded):
    """The autograded notebook's traceback quotes hidden lines; only the filter removes them."""
    root, _, _ = graded
    nb = (root / "autograded" / "hidden_wrong_softmax" / LESSON / f"{LESSON}.ipynb").read_text()
    text = re.sub(r"\\u001b\[[0-9;]*m", "", nb)
    assert any(ln in text for ln in _hidden_lines() if "expect_close(softmax(_x3" in ln)
