"""Every lesson through the class grader: its full solution earns every automatic point, its
untouched student notebook earns none, and no hidden test leaks into the feedback."""

import html
import re

import pytest
from conftest import ROOT, lessons

from helpers.grading.autograde import fake_class, grade_class

LESSONS = lessons()


_GRADED: dict = {}


@pytest.fixture
def graded(tmp_path_factory, built_solutions, lesson):
    """Grade a two-student class of ``lesson`` once: a full solution and a blank notebook."""
    if lesson not in _GRADED:
        tmp = tmp_path_factory.mktemp(lesson)
        fake_class(lesson, tmp / "subs", 2)  # student000: full solution, student001: blank
        _GRADED[lesson] = (tmp / "grading",
                           grade_class(lesson, tmp / "subs", tmp / "grading", workers=2))
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


@pytest.mark.parametrize("lesson", LESSONS)
def test_full_solution_raises_in_no_cell(graded, lesson):
    """`nbgrader validate` as the course sets it up fails a notebook on an error in any cell, not
    only in grade cells (helpers.grading.validation): a full solution must raise nowhere."""
    import nbformat

    root, _ = graded
    nb = nbformat.read(root / "autograded" / "student000" / lesson / f"{lesson}.ipynb", as_version=4)
    raised = [(i, out.get("ename"), str(out.get("evalue", ""))[:120]) for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not raised, f"{lesson}: cells that raised with the full solution: {raised}"
