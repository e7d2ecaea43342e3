"""Grading a class: flat and nbgrader layouts, parallel workers merged into one gradebook,
failures reported by name with a recorded zero, offline feedback without hidden tests, CSVs."""

import csv
import json
import re
import zipfile

import nbformat
import pytest
from conftest import ROOT

from helpers.grading.autograde import fake_class, fill_notebook, grade_class, solution_answers
from helpers.grading.submissions import import_submissions

LESSON = "02_attention_lookup"
# An endless loop that swallows the interrupt sent at the time limit: the kernel must be replaced.
STUBBORN = ("import time\nwhile True:\n    try:\n        time.sleep(1)\n"
            "    except BaseException:\n        pass\n")
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//""", re.I)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, built_solutions):
    tmp = tmp_path_factory.mktemp("class")
    subs = tmp / "submitted"
    fake_class(LESSON, subs, 4, broken={"corrupt": '{"cells": [', "empty": ""})
    full = solution_answers(LESSON)
    for student, answer in (("crasher", "import os\nos._exit(1)"),
                            ("looper", "while True:\n    pass"),
                            ("stubborn", STUBBORN)):
        dest = subs / student / LESSON / f"{LESSON}.ipynb"
        dest.parent.mkdir(parents=True)
        nbformat.write(fill_notebook(LESSON, {**full, "quiz_1": answer}), dest)
    root = tmp / "grading"
    report = grade_class(LESSON, subs, root, workers=2, timeout=8)
    return root, report


def test_every_submission_is_accounted_for(graded_class):
    _, report = graded_class
    everyone = {"student000", "student001", "student002", "student003", "corrupt", "empty",
                "crasher", "looper", "stubborn"}
    assert set(report.graded) | set(report.failed) == everyone
    assert set(report.failed) == {"corrupt", "empty"}
    assert "not a readable notebook" in report.failed["corrupt"]
    assert report.crashed == {"crasher": ["quiz_1"]}
    assert report.interrupted == {"looper": ["quiz_1"], "stubborn": ["quiz_1"]}
    text = "\n".join(report.lines())
    assert "the kernel died in quiz_1 and was restarted" in text
    for name in ("corrupt", "empty", "crasher", "looper", "stubborn"):
        assert name in text


def test_scores_survive_the_merge_of_parallel_workers(graded_class):
    _, report = graded_class
    assert report.graded["student000"] == report.max_score == 13  # full solution
    assert report.graded["student001"] == 0  # blank
    assert 0 < report.graded["student002"] < 13  # one exercise left undone
    assert report.graded["looper"] == 12  # only the interrupted quiz answer is lost
    assert report.graded["crasher"] == 12  # a new kernel graded the rest
    assert report.graded["stubborn"] == 12  # the same, after a cell that ignored the interrupt


def test_failures_have_a_recorded_zero_in_the_csv(graded_class):
    root, _ = graded_class
    rows = {r["student_id"]: r for r in csv.DictReader((root / "grades.csv").open())}
    for student in ("corrupt", "empty"):
        assert float(rows[student]["score"]) == 0.0
    assert float(rows["student000"]["score"]) == 13.0


def test_summary_counts_who_passed_each_grade_cell(graded_class):
    root, _ = graded_class
    rows = {r["grade_cell"]: r for r in csv.DictReader((root / f"summary_{LESSON}.csv").open())}
    assert set(rows) >= {"softmax_tests", "attention_tests", "self_attention_tests", "quiz_1_check"}
    kinds = ("full", "partial", "wrong", "blank", "by hand", "unreadable", "zeroed", "not graded")
    total = sum(int(rows["softmax_tests"][k]) for k in kinds)
    assert total == 9  # every submission, the ungradable ones included, each counted once
    quiz = rows["quiz_1_check"]
    assert int(quiz["unreadable"]) == 2  # corrupt, empty: not counted as wrong answers
    assert int(quiz["blank"]) >= 1  # the blank notebook
    assert int(quiz["wrong"]) >= 3  # crasher, looper, stubborn lost exactly this cell
    mistakes = {(r["grade_cell"], r["mistake"]): r for r in
                csv.DictReader((root / f"mistakes_{LESSON}.csv").open())}
    # their answer cell was lost, so the check finds no answer
    assert mistakes[("quiz_1_check", "raised NameError")]["students"].split() == \
        ["crasher", "looper", "stubborn"]
    assert (root / f"mistakes_{LESSON}.png").read_bytes()[:4] == b"\x89PNG"


def test_feedback_is_offline_and_hides_hidden_tests(graded_class):
    root, report = graded_class
    source = (ROOT / "solutions" / LESSON / f"{LESSON}.py").read_text()
    hidden = [ln.strip() for b in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END", source, re.S)
              for ln in b.splitlines() if "fresh_seeds" in ln or "_rng" in ln]
    assert hidden
    for student in report.graded:
        page = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
        assert not REMOTE.search(page), f"{student}'s feedback loads something from the network"
        plain = re.sub(r"<[^>]+>", "", page)
        assert not any(ln in plain for ln in hidden)


def test_a_submission_that_could_not_be_graded_gets_a_page_saying_why(graded_class):
    root, report = graded_class
    for student in ("corrupt", "empty"):
        page = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
        assert "could not be graded" in page and "not a readable notebook" in page
        assert not REMOTE.search(page)


def test_flat_folder_of_downloads_and_zips(tmp_path, built_solutions):
    flat = tmp_path / "downloads"
    flat.mkdir()
    nb = fill_notebook(LESSON, {})
    nbformat.write(nb, flat / f"alice_{LESSON}.ipynb")
    nbformat.write(nb, flat / "bob-attempt2.ipynb")
    with zipfile.ZipFile(flat / "carol_submission.zip", "w") as z:
        z.writestr(f"work/{LESSON}.ipynb", json.dumps(nb))
    (flat / "notes.txt").write_text("not a submission")
    (flat / "!!!.ipynb").write_text("{}")
    imported = import_submissions(LESSON, flat, tmp_path / "root")
    assert imported.students == ["alice", "bob", "carol"]
    assert {name for name, _ in imported.skipped} == {"!!!.ipynb", "notes.txt"}
    for s in imported.students:
        assert (tmp_path / "root" / "submitted" / s / LESSON / f"{LESSON}.ipynb").exists()


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no folder of submissions"):
        import_submissions(LESSON, tmp_path / "nowhere", tmp_path)
