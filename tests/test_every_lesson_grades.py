"""Every lesson through the class grader: its full solution earns every automatic point and
raises nowhere, its untouched student notebook earns none and raises only NotImplementedError,
and no hidden test leaks into the feedback."""

import html
import re

import pytest
from conftest import ROOT, lessons

from helpers.grading.autograde import fake_class, grade_class

LESSONS = lessons()


_GRADED: dict = {}


@pytest.fixture
def graded(tmp_path_factory, built_solutions, lesson):
    """Grade a two-student class of ``lesson`` once: a full solution and the committed student
    notebook untouched. One worker: two notebooks do not pay for a second warm server."""
    if lesson not in _GRADED:
        tmp = tmp_path_factory.mktemp(lesson)
        fake_class(lesson, tmp / "subs", 2)  # student000: full solution, student001: untouched
        _GRADED[lesson] = (tmp / "grading",
                           grade_class(lesson, tmp / "subs", tmp / "grading", workers=1))
    return _GRADED[lesson]


@pytest.mark.parametrize("lesson", LESSONS)
def test_full_solution_earns_every_point_and_blank_none(graded, lesson):
    _, report = graded
    assert not report.failed, report.lines()
    assert report.max_score > 0
    assert report.graded["student000"] == report.max_score, report.lines()
    assert report.graded["student001"] == 0
    assert not report.zeroed, "the course's own solutions trip the integrity scan"


@pytest.mark.parametrize("lesson", LESSONS)
def test_feedback_has_no_hidden_test(graded, lesson):
    root, _ = graded
    source = (ROOT / "solutions" / lesson / f"{lesson}.py").read_text()
    blocks = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S)
    hidden = {ln.strip() for b in blocks for ln in b.splitlines() if len(ln.strip()) > 25}
    public = (ROOT / "notebooks" / lesson / f"{lesson}.ipynb").read_text() + "".join(
        p.read_text() for package in ("helpers", "experiments", "tooling")
        for p in (ROOT / package).rglob("*.py"))
    hidden = {ln for ln in hidden if ln not in public}  # lines students can read anyway are fine
    for student in ("student000", "student001"):
        page = (root / "feedback" / student / lesson / f"{lesson}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        leaked = [ln for ln in hidden if ln in text]
        assert not leaked, f"{lesson}: hidden lines in {student}'s feedback: {leaked[:2]}"


def _raised(root, student: str, lesson: str) -> list[tuple[int, str, str]]:
    """(cell index, exception name, its message) of every error in a graded notebook."""
    import nbformat

    nb = nbformat.read(root / "autograded" / student / lesson / f"{lesson}.ipynb", as_version=4)
    return [(i, out.get("ename"), str(out.get("evalue", ""))[:120]) for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_full_solution_raises_in_no_cell(graded, lesson):
    """`nbgrader validate` as the course sets it up fails a notebook on an error in any cell, not
    only in grade cells (helpers.grading.validation): a full solution must raise nowhere."""
    raised = _raised(graded[0], "student000", lesson)
    assert not raised, f"{lesson}: cells that raised with the full solution: {raised}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_student_notebook_raises_only_not_implemented_error(graded, lesson):
    """Run top to bottom as handed out (the grader runs every cell, errors or not), each error is an
    exercise not done yet: no demonstration cell breaks on an unfinished exercise in another way."""
    raised = _raised(graded[0], "student001", lesson)
    assert raised, f"{lesson}: a student notebook with exercises should stop at NotImplementedError somewhere"
    unexpected = [e for e in raised if e[1] != "NotImplementedError"]
    assert not unexpected, f"{lesson}: errors other than NotImplementedError: {unexpected}"
