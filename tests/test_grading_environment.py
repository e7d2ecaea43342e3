"""Grading checks its own environment before any score is touched, and owns its own failures:
real nbgrader, real sandboxed kernels, and a real second checkout of the course.

- An environment set up for another checkout (``import helpers`` finds that clone, a folder the
  sandbox hides) stops grading in the preflight with exit 2, naming both folders and
  ``make setup``; every earlier score stays. Inside a run, the same environment makes the
  hidden tests fail on their own import line in every submission: grading stops at the third,
  and none of it is recorded.
- A hidden test that imports a module that does not exist does the same.
- An installed copy identical to the course's helpers (a class hub's) passes; a changed one stops.
- A hidden test's own failure is never a learner's mistake in the class's tables.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from other_checkout import clone, environment_for

from helpers.grading import records
from helpers.grading.autograde import _run_workers, course_api, fake_class, grade_class, launch_workers
from helpers.grading.hidden_tests import cell_imports, own_failures
from helpers.grading.mistakes import class_tables

LESSON = "02_attention_lookup"
CLASS = 6  # student000..005: full, blank, one exercise undone, full, full, blank
MISSING = "import course_module_that_does_not_exist"
HIDDEN = "### BEGIN HIDDEN TESTS\n"


def _scores(root: Path) -> dict:
    """Every recorded grade of the lesson: {(student, cell): (auto, manual)}, and the totals."""
    with records.gradebook(root) as gb:
        return {(s.student.id, g.name): (g.auto_score, g.manual_score)
                for s in gb.assignment_submissions(LESSON) for nb in s.notebooks for g in nb.grades}


def _graded_copies(root: Path) -> dict[str, float]:
    return {p.parent.parent.name: p.stat().st_mtime
            for p in (root / "autograded").glob(f"*/{LESSON}/{LESSON}.ipynb")}


def _env(root: Path | None = None) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k != "ATTENTION_COURSE_ROOT"}
    return env if root is None else {**env, "ATTENTION_COURSE_ROOT": str(root)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, built_solutions):
    """A class graded once in the course's own environment: the earlier scores to keep."""
    tmp = tmp_path_factory.mktemp("env-class")
    fake_class(LESSON, tmp / "class", CLASS)
    report = grade_class(LESSON, tmp / "class", tmp / "course", workers=2, timeout=60, feedback=False)
    assert len(report.graded) == CLASS and report.graded["student000"] == report.max_score
    return tmp / "course", tmp / "class"


@pytest.fixture
def course_copy(graded, tmp_path):
    """A copy of the graded course root, for runs that must not change the module's."""
    root = tmp_path / "course"
    shutil.copytree(graded[0], root, symlinks=True, ignore=shutil.ignore_patterns(".workers", ".warm"))
    return root


@pytest.fixture(scope="module")
def other_checkout(tmp_path_factory):
    """A real second checkout (git clone, under /tmp, which the sandbox hides) and a Python
    environment whose `import helpers` finds it."""
    tmp = tmp_path_factory.mktemp("other-checkout")
    other = clone(tmp / "other")
    return environment_for(other, tmp / "venv"), other


def _with_missing_import(root: Path) -> None:
    """Make the gradebook's recorded hidden tests of softmax_tests import a missing module:
    the hidden tests grading runs are the ones the gradebook holds."""
    from nbgrader.utils import compute_checksum

    from tooling.build import solution_notebook

    with records.gradebook(root) as gb:
        recorded = gb.find_source_cell("softmax_tests", LESSON, LESSON)
        assert HIDDEN in recorded.source
        recorded.source = recorded.source.replace(HIDDEN, f"{HIDDEN}{MISSING}\n", 1)
        cell = next(c for c in solution_notebook(LESSON).cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests")
        cell.source = recorded.source
        recorded.checksum = compute_checksum(cell)  # as if recorded so: nbgrader checks it
        gb.db.commit()


# ------------------------------------------------------------------ the preflight


def test_an_environment_set_up_for_another_checkout_stops_grading_before_any_score(graded, other_checkout):
    root, subs = graded
    python, other = other_checkout
    before, copies = _scores(root), _graded_copies(root)
    proc = subprocess.run([str(python), "-m", "helpers.grading.autograde", LESSON, str(subs), "--root",
                           str(root)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "STOPPED before grading" in err and "No score was changed" in err
    assert "set up for another checkout" in err.split("\n")[1], "the likely cause comes first"
    assert str(other / "helpers") in err and str(ROOT / "helpers") in err  # both locations
    assert "`make setup`" in err
    assert "helpers.checks.own_work" in err  # the hidden tests' import that fails there
    assert _scores(root) == before and _graded_copies(root) == copies


def test_the_course_environment_passes_the_preflight(graded):
    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", LESSON, "--preflight",
                           "--root", str(graded[0])], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_an_identical_installed_copy_passes_and_a_changed_one_stops(tmp_path):
    """A class hub installs a copy of helpers that every account can read: the same files pass;
    a copy from another version of the course stops grading and says how to install it again."""
    place = Path(tempfile.mkdtemp(prefix="course-env-", dir="/opt"))  # a folder the sandbox shows
    place.chmod(0o755)  # and that a kernel's user may read, as an installed environment is
    try:
        python = environment_for(None, place / "venv")
        installed = next((place / "venv").glob("lib/python*/site-packages/helpers"))
        command = [str(python), "-m", "helpers.grading.autograde", LESSON, "--preflight", "--root",
                   str(tmp_path / "course")]
        same = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert same.returncode == 0, same.stderr[-3000:]
        with (installed / "checks" / "core.py").open("a") as f:
            f.write("\nLAST_TERM = True\n")
        changed = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert changed.returncode == 2, changed.stdout + changed.stderr
        assert "whose files differ from this course's" in changed.stderr
        assert str(installed) in changed.stderr and str(ROOT / "helpers") in changed.stderr
        assert "install this course into that environment again" in changed.stderr
        assert "sudo make hub-install" in changed.stderr
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_a_hidden_test_that_imports_a_missing_module_stops_grading_before_any_score(graded, course_copy):
    _with_missing_import(course_copy)
    before, copies = _scores(course_copy), _graded_copies(course_copy)
    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", LESSON, str(graded[1]),
                           "--root", str(course_copy)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the hidden tests of softmax_tests cannot run `{MISSING}`" in proc.stderr
    assert "ModuleNotFoundError" in proc.stderr and "another checkout" not in proc.stderr
    assert _scores(course_copy) == before and _graded_copies(course_copy) == copies


def test_every_import_of_the_hidden_tests_is_collected():
    source = ("check(f)\n### BEGIN HIDDEN TESTS\nimport torch  # noqa\n%timeit f(1)\n"
              "from a.b import (c,\n    d)\ndef g():\n    import os.path as p\nfrom . import local\n")
    assert cell_imports(source) == ["import torch", "from a.b import c, d", "import os.path as p"]


# ------------------------------------------------------------------ inside a run


def _run_in(python: Path, root: Path, students: list[str], workers: int) -> tuple[dict, str]:
    """The run `make grade` makes after its preflight, with ``python`` as the grading Python."""
    code = ("import json\nfrom pathlib import Path\n"
            "from helpers.grading.autograde import _run_workers, launch_workers\n"
            f"root = Path({str(root)!r})\n"
            f"workers = launch_workers({LESSON!r}, root, {workers}, 60)\n"
            f"print(json.dumps(_run_workers({LESSON!r}, root, {students!r}, workers)))\n")
    proc = subprocess.run([str(python), "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tuple(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_other_checkouts_environment_inside_a_run_stops_at_the_third_failure(course_copy, other_checkout):
    """What the preflight prevents: every hidden test fails on its own import line. The third
    submission in a row to fail that way stops grading; nothing of it is recorded."""
    python, _ = other_checkout
    students = [f"student{i:03d}" for i in range(CLASS)]
    before, copies = _scores(course_copy), _graded_copies(course_copy)
    outcome, stopped = _run_in(python, course_copy, students, workers=1)
    assert "3 submissions in a row failed on a line of the hidden tests themselves" in stopped
    assert "helpers.checks.own_work" in stopped and "ModuleNotFoundError" in stopped
    # student001 is blank: its cells stop before the hidden tests and it neither counts nor breaks the row
    assert outcome == {"student001": ""}
    assert _scores(course_copy) == before
    for student in ("student000", "student002", "student003", "student004", "student005"):
        assert _graded_copies(course_copy)[student] == copies[student], student


def test_a_hidden_test_that_imports_a_missing_module_stops_a_run_in_every_worker(course_copy):
    _with_missing_import(course_copy)
    students = [f"student{i:03d}" for i in range(CLASS)]
    before = _scores(course_copy)
    outcome, stopped = _run_workers(LESSON, course_copy, students, launch_workers(LESSON, course_copy, 2, 60))
    assert f"`{MISSING}` raised ModuleNotFoundError" in stopped
    # worker 0 stops at its third (000, 002, 004); worker 1's only answered one (003) fails the
    # same way and is not recorded either; the blank ones are graded as before
    assert outcome == {"student001": "", "student005": ""}
    assert _scores(course_copy) == before


def test_a_hidden_tests_own_failure_is_never_a_learners_mistake(graded, course_copy):
    """Plain `nbgrader autograde` (the formgrader's button) has no row to stop: the submission is
    graded, and the class's tables count the cell as not graded, never as the learner's mistake."""
    _with_missing_import(course_copy)
    api = course_api(course_copy, timeout=60)
    assert api.autograde(LESSON, "student000", force=True, create=True)["success"]
    graded_nb = course_copy / "autograded" / "student000" / LESSON / f"{LESSON}.ipynb"
    failures = own_failures(graded_nb, LESSON)
    assert list(failures) == ["softmax_tests"] and failures["softmax_tests"].statement == MISSING
    status = {f"student{i:03d}": "graded" for i in range(CLASS)}
    released = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"
    summary, mistakes = class_tables(course_copy, LESSON, status, released)
    row = next(r for r in summary if r["grade_cell"] == "softmax_tests")
    assert row["not graded"] == 1 and row["full"] == 3  # student003 and 004 as before
    assert not [m for m in mistakes if "ModuleNotFoundError" in m["mistake"]]
    # a learner's own crash on a hidden-test line that reads the answer stays the learner's
    nb = nbformat.read(graded_nb, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_tests")
    error = next(o for o in cell.outputs if o.output_type == "error")
    cell.source = cell.source.replace(MISSING, "_out = softmax(None)")
    error.ename, error.evalue = "TypeError", "unsupported operand"
    assert own_failures(nb, LESSON) == {}
    # ... and so does one on a value the cell computed from the answer
    cell.source = cell.source.replace("_out = softmax(None)", "_w = 2 * _out[0]").replace(
        "check_softmax(softmax)\n", "_out = softmax(_x)\n", 1)  # the same number of lines
    assert own_failures(nb, LESSON) == {}
    cell.source = cell.source.replace("_w = 2 * _out[0]", "_w = 2 * np.zeros(3)[7]")  # the tests' own data
    assert list(own_failures(nb, LESSON)) == ["softmax_tests"]
