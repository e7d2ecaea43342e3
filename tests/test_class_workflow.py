"""An instructor's day, with real nbgrader, real kernels, a real Jupyter server and real files:
one course root that `make grade`, nbgrader's own commands and the formgrader all share; the
sandbox on every path that runs students' code; hand grades that reach the export and the
feedback without running anything again; holds for review that the formgrader shows and one
command takes back.

The course root is a temporary folder given to every command through ATTENTION_COURSE_ROOT,
so a grading machine's real gradebook is never touched by the tests."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, free_port, server_api, wait_for_formgrader

from helpers.grading import records, settings
from helpers.grading.autograde import fill_notebook, grade_class, solution_answers

LESSON = "02_attention_lookup"
FULL = 13.0
NBGRADER = str(Path(sys.executable).parent / "nbgrader")
JUPYTER = str(Path(sys.executable).parent / "jupyter")
SECRET_LINE = "### BEGIN HIDDEN TESTS"

# Tries to read what a kernel must never see and says what it reached.
SNOOP = '''
import socket
def _probe(what, action):
    try:
        data = action()
        print(what, "REACHED", str(data)[:80].replace(chr(10), " "))
    except Exception as err:
        print(what, "blocked:", type(err).__name__)
_probe("solutions", lambda: open({solutions!r}).read())
_probe("gradebook", lambda: open({gradebook!r}, "rb").read(64))
_probe("classmate", lambda: open({classmate!r}).read())
_probe("network", lambda: socket.create_connection(("10.255.255.1", 80), timeout=2))
_probe("write outside", lambda: open({outside!r}, "w").write("x"))
'''
# An honest learner's habits: none of this is tampering.
MAGICS = "%load_ext autoreload\n%autoreload 2\n%matplotlib inline\n!pip install numpy\n"
# Each run of the notebook adds a line to runs.txt in the kernel's folder.
COUNTER = "with open('runs.txt', 'a') as _f:\n    _f.write('ran\\n')\n"
PATCHER = "np.allclose = lambda *a, **k: True\n"
# Touches the kernel's shell: tampering by the rules, though it changes no result.
HOOKER = "get_ipython().events.register('post_run_cell', lambda *args: None)\n"


def _write(folder: Path, student: str, nb) -> None:
    path = folder / student / LESSON / f"{LESSON}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _env(root: Path) -> dict:
    return {**os.environ, "ATTENTION_COURSE_ROOT": str(root),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def course(tmp_path_factory, built_solutions):
    tmp = tmp_path_factory.mktemp("workflow")
    root, subs = tmp / "course", tmp / "downloads"
    full = solution_answers(LESSON)
    snoop = SNOOP.format(solutions=str(ROOT / "solutions" / LESSON / f"{LESSON}.py"),
                         gradebook=str(root / "gradebook.db"),
                         classmate=str(root / "submitted" / "alice" / LESSON / f"{LESSON}.ipynb"),
                         outside=str(tmp / "pwned.txt"))
    _write(subs, "alice", fill_notebook(LESSON, {**full, "quiz_1": full["quiz_1"] + "\n" + COUNTER}))
    _write(subs, "habits", fill_notebook(LESSON, {**full, "softmax": MAGICS + full["softmax"]}))
    _write(subs, "snooper", fill_notebook(LESSON, {**full, "quiz_1": full["quiz_1"] + "\n" + snoop}))
    _write(subs, "patcher", fill_notebook(LESSON, {**full, "softmax": full["softmax"] + "\n" + PATCHER}))
    _write(subs, "hooker", fill_notebook(LESSON, {**full, "quiz_1": full["quiz_1"] + "\n" + HOOKER}))
    _write(subs, "blank", fill_notebook(LESSON, {}))
    pasted = fill_notebook(LESSON, full)  # a second copy of a graded answer cell, pasted above
    cell = next(c for c in pasted.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    copy = nbformat.from_dict(json.loads(json.dumps(cell)))
    copy.id, copy.source = "pasted-copy", "def softmax(x, axis=-1):\n    return x  # first try\n"
    pasted.cells.insert(pasted.cells.index(cell), copy)
    _write(subs, "paster", pasted)
    stamp = subs / "alice" / LESSON / "timestamp.txt"  # as nbgrader's exchange writes it
    stamp.write_text("2026-03-02 09:15:00.000000 UTC")
    report = grade_class(LESSON, subs, root, workers=2, timeout=60, due="2026-03-01 23:59:00 UTC")
    return root, subs, report, tmp


def test_scores_of_the_class(course):
    _, _, report, _ = course
    assert report.graded["alice"] == FULL
    assert report.graded["habits"] == FULL, "an honest learner's magics must not cost points"
    assert report.graded["paster"] == FULL, "a pasted copy of an answer cell: the last copy counts"
    assert report.graded["blank"] == 0
    # patched a comparison; hooked the kernel's shell; read hidden files
    assert sorted(report.zeroed) == ["hooker", "patcher", "snooper"]
    assert not report.failed and not report.machinery


def test_submission_times_are_recorded_and_late_ones_marked(course):
    root = course[0]
    with records.gradebook(root) as gb:
        alice = gb.find_submission(LESSON, "alice")
        assert str(alice.timestamp) == "2026-03-02 09:15:00"
        assert alice.total_seconds_late == 9 * 3600 + 16 * 60


def test_nbgrader_commands_from_the_repository_root_see_the_same_gradebook(course):
    root = course[0]
    out = subprocess.run([NBGRADER, "db", "student", "list"], cwd=ROOT, env=_env(root),
                         capture_output=True, text=True, check=True)
    for student in ("alice", "habits", "snooper", "patcher", "blank", "paster"):
        assert student in out.stdout + out.stderr
    stray = ROOT / "gradebook.db"
    assert not stray.exists() or "alice" not in stray.read_bytes().decode(errors="ignore")


def test_plain_nbgrader_autograde_runs_in_the_sandbox(course):
    root = course[0]
    proc = subprocess.run([NBGRADER, "autograde", LESSON, "--student", "snooper", "--force"],
                          cwd=ROOT, env=_env(root), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    nb = nbformat.read(root / "autograded" / "snooper" / LESSON / f"{LESSON}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "solutions blocked" in text and "gradebook blocked" in text and "classmate blocked" in text
    assert "network blocked" in text and "write outside blocked" in text
    assert "REACHED" not in text and SECRET_LINE not in text
    assert not (course[3] / "pwned.txt").exists()
    with records.gradebook(root) as gb:  # its answers are right, but it reached for hidden files
        assert records.total(gb, LESSON, "snooper") == 0 and records.is_held(gb, LESSON, "snooper")
        assert gb.find_submission_notebook(LESSON, LESSON, "snooper").flagged



@pytest.fixture(scope="module")
def formgrader(course):
    """A real Jupyter server on the repository, as `make formgrader` starts it."""
    root = course[0]
    port, token = free_port(), "workflow-test"
    server = subprocess.Popen(
        [JUPYTER, "server", f"--port={port}", "--ip=127.0.0.1", "--no-browser", "--allow-root",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={os.path.commonpath([ROOT, root])}"],
        cwd=ROOT, env=_env(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    call = server_api(port, token)
    wait_for_formgrader(call, server, lambda: server.stderr.read()[-2000:])
    yield call
    server.terminate()
    server.wait(20)


def test_the_formgrader_lists_every_submission_with_its_autograde(course, formgrader):
    subs = {s["student"]: s for s in formgrader(f"/formgrader/api/submissions/{LESSON}")}
    assert set(subs) >= {"alice", "habits", "snooper", "patcher", "blank", "paster"}
    assert subs["alice"]["autograded"] and subs["alice"]["code_score"] == FULL
    assert subs["patcher"]["code_score"] == 0  # held at zero for review ...
    notebooks = formgrader(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
    flagged = {n["student"]: n["flagged"] for n in notebooks}
    assert flagged["patcher"] and not flagged["blank"]  # ... and flagged, where the instructor looks
    alice = next(n for n in notebooks if n["student"] == "alice")  # flagged: an added cell writes a file
    notes = [c["auto_comment"] for c in formgrader(f"/formgrader/api/comments?submission_id={alice['id']}")
             if c["auto_comment"] and c["auto_comment"].startswith(records.FOR_INSTRUCTOR)]
    assert flagged["alice"] and len(notes) == 1 and "file-access" in notes[0]


def test_a_hand_grade_reaches_the_export_and_the_feedback_without_rerunning(course, formgrader):
    root = course[0]
    alice = next(n for n in formgrader(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
                 if n["student"] == "alice")
    grades = formgrader(f"/formgrader/api/grades?submission_id={alice['id']}")
    free_text = next(g for g in grades if g["name"] == "why_rows")
    formgrader(f"/formgrader/api/grade/{free_text['id']}", "PUT", {"manual_score": 2})
    comments = formgrader(f"/formgrader/api/comments?submission_id={alice['id']}")
    note = next(c for c in comments if c["name"] == "why_rows")
    formgrader(f"/formgrader/api/comment/{note['id']}", "PUT",
               {"manual_comment": "Clear reasoning about the rows."})

    out = root / "export.csv"
    subprocess.run([NBGRADER, "export", "--to", str(out)], cwd=ROOT, env=_env(root),
                   capture_output=True, check=True)
    rows = {r["student_id"]: r for r in csv.DictReader(out.open())}
    assert float(rows["alice"]["score"]) == FULL + 2

    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", LESSON, "--feedback",
                           "--zip"], cwd=ROOT, env=_env(root), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = (root / "feedback" / "alice" / LESSON / f"{LESSON}.html").read_text()
    assert "Clear reasoning about the rows." in page
    assert records.FOR_INSTRUCTOR.strip() not in page  # the review note stays in the formgrader
    assert SECRET_LINE not in page
    assert page.count(settings.WRAP_OUTPUT) == 1, "a check's long message must wrap, not be cut"
    runs = root / "autograded" / "alice" / LESSON / "runs.txt"
    assert runs.read_text().count("ran") == 1, "feedback must not run the notebook again"
    assert (root / "return" / LESSON / f"alice_{LESSON}_feedback.zip").exists()


def test_the_formgrader_autograde_button_runs_in_the_sandbox(course, formgrader):
    root = course[0]
    result = formgrader(f"/formgrader/api/submission/{LESSON}/snooper/autograde", "POST", {})
    assert result["success"], result
    nb = nbformat.read(root / "autograded" / "snooper" / LESSON / f"{LESSON}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "solutions blocked" in text and "REACHED" not in text


def test_a_hold_for_review_is_explained_to_the_student_and_taken_back_in_one_command(course):
    root = course[0]
    page = (root / "feedback" / "hooker" / LESSON / f"{LESSON}.html").read_text()
    assert records.HOLD.strip() in page and ".csv" not in page
    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", LESSON, "--restore",
                           "hooker"], cwd=ROOT, env=_env(root), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with records.gradebook(root) as gb:
        restored = records.total(gb, LESSON, "hooker")
        assert not gb.find_submission_notebook(LESSON, LESSON, "hooker").flagged
    assert restored == FULL  # its answers are right; the hook changed no result


def _table(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open()))


def _without(rows: list[dict], student: str) -> list[tuple]:
    """The mistakes table's rows with ``student`` left out of each."""
    return sorted((r["grade_cell"], r["mistake"], " ".join(s for s in r["students"].split() if s != student))
                  for r in rows if r["students"].split() != [student])


def test_regrading_one_student_leaves_the_others_alone_and_the_class_tables_whole(course, formgrader):
    root, subs, _, _ = course
    # the blank notebook's free-text answer gets a point by hand; then the student sends it again, done
    blank = next(n for n in formgrader(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
                 if n["student"] == "blank")
    essay = next(g for g in formgrader(f"/formgrader/api/grades?submission_id={blank['id']}")
                 if g["name"] == "why_rows")
    formgrader(f"/formgrader/api/grade/{essay['id']}", "PUT", {"manual_score": 1})
    with records.gradebook(root) as gb:
        before = {s: records.total(gb, LESSON, s) for s in ("alice", "habits", "blank")}
        class_size = len(gb.assignment_submissions(LESSON))
    mistakes_before = _table(root / f"mistakes_{LESSON}.csv")
    stamp = (root / "autograded" / "alice" / LESSON / f"{LESSON}.ipynb").stat().st_mtime
    _write(subs, "blank", fill_notebook(LESSON, solution_answers(LESSON)))  # sends it again, done
    report = grade_class(LESSON, subs, root, workers=1, timeout=60, only=["blank"])
    assert set(report.graded) == {"blank"} and report.graded["blank"] == FULL
    with records.gradebook(root) as gb:
        after = {s: records.total(gb, LESSON, s) for s in ("alice", "habits")}
    assert after == {s: before[s] for s in after}
    assert (root / "autograded" / "alice" / LESSON / f"{LESSON}.ipynb").stat().st_mtime == stamp
    # the class's tables still count the whole class, each student once per row
    kinds = ("full", "partial", "wrong", "blank", "by hand", "unreadable", "zeroed", "not graded")
    for row in _table(root / f"summary_{LESSON}.csv"):
        assert sum(int(row[k]) for k in kinds) == class_size == 7, row
    assert _without(_table(root / f"mistakes_{LESSON}.csv"), "blank") == _without(mistakes_before, "blank")
    # the hand grade was given on a blank answer that has changed since: kept, and flagged for grading again
    with records.gradebook(root) as gb:
        grade = gb.find_grade("why_rows", LESSON, LESSON, "blank")
        assert grade.manual_score == 1 and grade.needs_manual_grade
    listed = formgrader(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
    notebooks = {n["student"]: n for n in listed}
    assert notebooks["blank"]["flagged"] and notebooks["blank"]["needs_manual_grade"]
    comments = formgrader(f"/formgrader/api/comments?submission_id={blank['id']}")
    notes = {c["name"]: c["auto_comment"] for c in comments}
    assert notes["why_rows"].startswith(records.HAND_GRADE_CHANGED)
    assert "blank: the answer to why_rows changed since it was graded by hand" in "\n".join(report.lines())
    page = (root / "feedback" / "blank" / LESSON / f"{LESSON}.html").read_text()
    assert records.HAND_GRADE_CHANGED not in page  # a note for the instructor only


def test_a_flagged_hand_grade_waits_until_the_instructor_grades_it_again(course, formgrader):
    root, subs, _, _ = course
    report = grade_class(LESSON, subs, root, workers=1, timeout=60, only=["blank"])  # sent as before
    assert report.hand_grades == {"blank": ["why_rows"]}, "still waiting: named again"
    blank = next(n for n in formgrader(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
                 if n["student"] == "blank")
    essay = next(g for g in formgrader(f"/formgrader/api/grades?submission_id={blank['id']}")
                 if g["name"] == "why_rows")
    formgrader(f"/formgrader/api/grade/{essay['id']}", "PUT", {"manual_score": 2})  # graded again
    report = grade_class(LESSON, subs, root, workers=1, timeout=60, only=["blank"])
    assert report.hand_grades == {}
    with records.gradebook(root) as gb:
        grade = gb.find_grade("why_rows", LESSON, LESSON, "blank")
        assert grade.manual_score == 2 and not grade.needs_manual_grade
        note = gb.find_comment("why_rows", LESSON, LESSON, "blank").auto_comment or ""
        assert not note.startswith(records.HAND_GRADE_CHANGED)


def test_a_hand_grade_on_an_unchanged_answer_stays_as_it_was(course):
    """alice's free-text answer got 2 points by hand; graded again as it was, nothing is flagged."""
    root, subs, _, _ = course
    report = grade_class(LESSON, subs, root, workers=1, timeout=60, only=["alice"])
    with records.gradebook(root) as gb:
        grade = gb.find_grade("why_rows", LESSON, LESSON, "alice")
        assert grade.manual_score == 2 and not grade.needs_manual_grade
    assert "alice" not in report.hand_grades and "graded by hand" not in "\n".join(report.lines())


def test_an_earlier_score_is_never_replaced_by_a_could_not_be_graded_zero(course):
    root, subs, _, _ = course
    (subs / "habits" / LESSON / f"{LESSON}.ipynb").write_text('{"cells": [')  # a broken upload
    report = grade_class(LESSON, subs, root, workers=1, timeout=60, only=["habits"])
    assert "habits" in report.failed and "habits" in report.kept
    assert "earlier score is kept" in "\n".join(report.lines())
    with records.gradebook(root) as gb:
        assert records.total(gb, LESSON, "habits") == FULL


def _broken_environment(folder: Path) -> dict:
    """An environment in which no kernel can start: ipykernel fails to import."""
    (folder / "ipykernel").mkdir(parents=True)
    (folder / "ipykernel" / "__init__.py").write_text("raise ImportError('ipykernel broken on purpose')\n")
    return {"PYTHONPATH": str(folder)}


def test_a_broken_environment_stops_grading_and_touches_no_score(course, tmp_path):
    root, subs, _, _ = course
    with records.gradebook(root) as gb:
        before = {s.student.id: s.score for s in gb.assignment_submissions(LESSON)}
    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", LESSON, str(subs)],
                          cwd=ROOT, env={**_env(root), **_broken_environment(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "STOPPED before grading" in proc.stderr and "No score was changed" in proc.stderr
    assert "ipykernel broken on purpose" in proc.stderr  # the real error, for the instructor
    with records.gradebook(root) as gb:
        assert {s.student.id: s.score for s in gb.assignment_submissions(LESSON)} == before


def test_a_worker_whose_kernels_cannot_start_grades_no_one(course, tmp_path):
    root = course[0]
    proc = subprocess.run([sys.executable, "-m", "helpers.grading.autograde", "--worker", LESSON,
                           str(root), "--timeout", "30", "--students", "alice", "blank"],
                          cwd=ROOT, env={**_env(root), **_broken_environment(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["outcome"] == {} and "did not start" in result["machinery"]
