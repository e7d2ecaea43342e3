"""The committed student notebooks: in sync with the sources, clean, well-formed, runnable."""

import ast
import re

import nbformat
import pytest
from conftest import ROOT, lessons

from helpers.grading.release import release
from tooling.build import solution_notebook

LESSONS = lessons()
CHECK_CALL = re.compile(r"^(check|grade|expect)_\w+$")


def test_every_lesson_has_a_committed_student_notebook():
    assert LESSONS, "no lessons found under solutions/"
    committed = sorted(p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir())
    assert committed == LESSONS, "notebooks/ and solutions/ hold different lessons: run `make release`"


def test_release_is_in_sync_and_deterministic(tmp_path, built_solutions):
    """Regenerate into a temporary folder: byte-identical to what is committed."""
    for path in release(ROOT, tmp_path):
        committed = ROOT / "notebooks" / path.parent.name / path.name
        assert path.read_bytes() == committed.read_bytes(), (
            f"{committed.relative_to(ROOT)} is out of date: run `make release` and commit it")
    for lesson in LESSONS:
        assert nbformat.writes(solution_notebook(lesson)) == nbformat.writes(solution_notebook(lesson))


@pytest.mark.parametrize("lesson", LESSONS)
def test_student_notebook_is_clean(lesson):
    folder = ROOT / "notebooks" / lesson
    assert sorted(p.name for p in folder.iterdir()) == [f"{lesson}.ipynb"], "only the notebook ships"
    text = (folder / f"{lesson}.ipynb").read_text()
    for leak in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "MARK SCHEME"):
        assert leak not in text, f"the student notebook contains '{leak}'"
    nb = nbformat.reads(text, as_version=4)
    assert "widgets" not in nb.metadata, "widget state is committed"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "outputs are committed"


def _last_statement_is_bare_value(source: str) -> bool:
    """True if the cell's last statement is an expression whose value could become a score."""
    body = ast.parse(source).body
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    value = body[-1].value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return not CHECK_CALL.match(value.func.id)  # checks return None
    return True


@pytest.mark.parametrize("lesson", LESSONS)
def test_cell_metadata(lesson):
    """Grade cells are locked with points and unique ids; every cell carries slide metadata."""
    for nb in (solution_notebook(lesson),
               nbformat.read(ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)):
        ids = []
        for cell in nb.cells:
            assert cell.metadata.get("slideshow", {}).get("slide_type"), (
                f"a cell without slide metadata: {cell.source[:60]!r}")
            meta = cell.metadata.get("nbgrader")
            if not meta:
                continue
            ids.append(meta["grade_id"])
            if meta.get("grade") and cell.cell_type == "code":
                assert meta.get("locked") and meta.get("points", 0) > 0, meta["grade_id"]
                assert not _last_statement_is_bare_value(cell.source), (
                    f"{meta['grade_id']} ends in a bare expression: its value would become the score")
            if meta.get("grade") and cell.cell_type == "markdown":
                assert meta.get("points", 0) > 0 and meta.get("solution"), meta["grade_id"]
        assert len(ids) == len(set(ids)), "grade_id values must be unique"


def test_bare_expression_rule_bites():
    assert _last_statement_is_bare_value("x = 1\nx.shape[0]")
    assert _last_statement_is_bare_value("np.allclose(a, b)")
    assert not _last_statement_is_bare_value("check_softmax(softmax)")
    assert not _last_statement_is_bare_value("assert ok")


def test_readme_links_every_lesson_and_only_ready_ones():
    readme = (ROOT / "README.md").read_text()
    for lesson in LESSONS:
        assert f"](notebooks/{lesson}/{lesson}.ipynb) |" in readme, f"README does not link {lesson}"
    for lesson in re.findall(r"\| \[`(\d\d_\w+)`\]\(notebooks/", readme):
        assert lesson in LESSONS, f"README links {lesson}, which does not exist"
