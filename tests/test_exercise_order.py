"""Reasoning first, worked answer after: no cell of a student notebook shows an exercise's answer
before the exercise.

Each solution region of a lesson source gives the exercise's answer lines. A line counts when it
says something: comments, signatures, docstrings, bare returns and calls of a named tool on plain names are
dropped, and it must be at
least ``MIN_CHARS`` long once whitespace is squeezed; an assignment counts by its value, whatever
the name it is given. Every cell of the committed student notebook
that comes before the exercise's cell — prose included — must hold none of them.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from conftest import ROOT, lessons

from tooling.build import solution_notebook

LESSONS = lessons()
MIN_CHARS = 20
REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
ASSIGNED = re.compile(r"^[\w.,\[\] ]+ [-+*/@]?= ")
# A call whose arguments are plain names (`layer_macs(n, d_model, d_ff)`, `np.random.default_rng(seed)`)
# names a tool the exercise text may point to; it is no part of the answer's reasoning.
PLAIN_CALL = re.compile(r"^[\w.]+\([\w, =]*\)$")
TRIVIAL = re.compile(r"^(def |class |return \w+(, \w+)*$|raise |@)")


def squeeze(line: str) -> str:
    """One line without its comment, spaces squeezed, lower case (so `Q @ K.T` is `q @ k.t`)."""
    code = re.sub(r"\s+#.*$", "", line).strip()
    return re.sub(r"\s+", " ", code).lower()


def answer_lines(source: str) -> list[str]:
    """The lines of a solution cell's regions that give part of the answer away."""
    lines = []
    for region in REGION.findall(source):
        in_docstring = False
        for raw in region.splitlines():
            line = squeeze(raw)
            if line.startswith(('"""', "'''")):
                in_docstring = not (len(line) > 3 and line.endswith(line[:3])) and not in_docstring
                continue
            if in_docstring or not line or line.startswith("#") or TRIVIAL.match(line):
                continue
            rhs = ASSIGNED.sub("", line)  # the value computed, whatever the name it is given
            if len(rhs) >= MIN_CHARS and not PLAIN_CALL.match(rhs):
                lines.append(rhs)
    return lines


def exercises(lesson: str) -> dict[str, list[str]]:
    """grade_id -> answer lines, for every code exercise of the lesson's source."""
    found = {}
    for cell in solution_notebook(lesson).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            lines = answer_lines(cell.source)
            if lines:
                found[meta["grade_id"]] = lines
    return found


def shown_early(student: nbformat.NotebookNode, answers: dict[str, list[str]]) -> dict[str, list[str]]:
    """grade_id -> its answer lines that a cell before the exercise's cell already shows."""
    earlier_text, leaks = [], {}
    for cell in student.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            text = "\n".join(earlier_text)
            hits = [line for line in answers[grade_id] if line in text]
            if hits:
                leaks[grade_id] = hits
        # an earlier exercise's signature (`def layer_macs(n, d_model, d_ff):`) is no answer
        earlier_text.append("\n".join(squeeze(line) for line in cell.source.splitlines()
                                       if not line.lstrip().startswith("def ")))
    return leaks


def student_notebook(lesson: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_answer_is_shown_before_its_exercise(lesson):
    leaks = shown_early(student_notebook(lesson), exercises(lesson))
    assert not leaks, "answers shown before their exercise: " + "; ".join(
        f"{grade_id}: {', '.join(repr(line) for line in lines)}" for grade_id, lines in leaks.items())


def test_every_exercise_has_answer_lines_to_look_for():
    """The scan looks at something: each lesson with code exercises yields answer lines."""
    for lesson in LESSONS:
        if lesson.startswith("10_"):
            continue  # the review lesson's exercises are multiple choice
        assert exercises(lesson), f"{lesson}: no answer lines found"


def test_the_scan_bites_when_an_answer_line_moves_up():
    """A copy of lesson 02 with one line of attention's answer pasted into the setup cell fails."""
    lesson = "02_attention_lookup"
    answers = exercises(lesson)
    student = student_notebook(lesson)
    assert "attention" not in shown_early(student, answers)
    line = next(raw for raw in REGION.findall(
        next(c.source for c in solution_notebook(lesson).cells
             if c.metadata.get("nbgrader", {}).get("grade_id") == "attention"))[0].splitlines()
        if squeeze(raw) in answers["attention"])
    setup = next(c for c in student.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    setup.source += "\n" + line.strip().replace("q", "Q").replace("  ", " ")
    assert "attention" in shown_early(student, answers)


def test_the_scan_reads_prose_too():
    """An answer line quoted in a markdown cell before the exercise counts as shown."""
    answers = {"ex": ["scores = q @ k.t / np.sqrt(d_k)"]}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Hint: `scores = Q @ K.T / np.sqrt(d_k)`"),
        nbformat.v4.new_code_cell("def f(q, k):\n    raise NotImplementedError()",
                                  metadata={"nbgrader": {"grade_id": "ex", "solution": True}}),
    ])
    assert shown_early(nb, answers) == {"ex": ["scores = q @ k.t / np.sqrt(d_k)"]}
    nb.cells[0].source = "Hint: divide the scores by the square root of the key width."
    assert shown_early(nb, answers) == {}
