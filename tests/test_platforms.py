"""Grades back to the learning platform: a class imported from each platform's download names,
graded with real nbgrader and real kernels, gives that platform's gradebook import file, keyed by
the ids the file names carried, in the layout the platform's upload reads; a student without a
platform id is named, not invented; `make export` writes the files again with hand grades."""

import csv
import io
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from helpers.grading import platforms, records
from helpers.grading.autograde import fill_notebook, grade_class, solution_answers
from helpers.grading.platforms import Identity, identify, recorded
from helpers.grading.submissions import import_submissions

LESSON = "02_attention_lookup"
SUBMITTED = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)  # the files' modified time
OUT = f"platforms/{LESSON}"


def _put(folder: Path, name: str, nb, when: datetime = SUBMITTED) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    os.utime(path, (when.timestamp(),) * 2)


def _grade(tmp: Path, files: dict[str, bool]) -> tuple[Path, list[str], tuple[datetime, datetime]]:
    """Grade a class of ``files`` (download name -> full solution, else blank) into a fresh course
    root; the root, the report's lines and the time window the grading ran in."""
    full = solution_answers(LESSON)
    for name, right in files.items():
        _put(tmp / "downloads", name, fill_notebook(LESSON, full if right else {}))
    begin = datetime.now(UTC).replace(microsecond=0)
    report = grade_class(LESSON, tmp / "downloads", tmp / "course", workers=1, timeout=60, feedback=False)
    end = datetime.now(UTC)
    assert not report.failed and not report.machinery, report.lines()
    return tmp / "course", report.lines(), (begin, end)


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def _graded_at(text: str, window: tuple[datetime, datetime]) -> str:
    """Moodle's "Last modified (grade)": when the file was written, with its zone."""
    when = datetime.fromisoformat(text)
    assert when.tzinfo is not None and window[0] <= when <= window[1], (text, window)
    return text


# ------------------------------------------------------------------ ids from file names


IDS = {
    "Chris Evans_12345_assignsubmission_file_x.ipynb": Identity("moodle", "12345", "Chris Evans"),
    "Siobha\u0301n O'Neil_555_assignsubmission_file_x.ipynb": Identity("moodle", "555", "Siobhán O'Neil"),
    "evanschris_12345_67890_02_attention_lookup.ipynb": Identity("canvas", "12345", "evanschris"),
    "lateslow_LATE_12348_67891_x.ipynb": Identity("canvas", "12348", "lateslow"),
    "Lab 2_jsmith_attempt_2026-03-01-12-30-00_lab2.ipynb": Identity("blackboard", "jsmith", ""),
    "j.smith_attempt_2026-03-01-12-30-00_lab2.ipynb": Identity("blackboard", "j.smith", ""),
    "alice_02_attention_lookup.ipynb": None,
    "mary-jane.ipynb": None,
    "bob-attempt2.ipynb": None,
    f"{LESSON}.ipynb": None,
}


@pytest.mark.parametrize("name", IDS)
def test_each_platforms_id_is_read_from_its_file_names(name):
    assert identify(name) == IDS[name]


def test_the_import_records_who_each_student_is_on_the_platform(tmp_path):
    source, root = tmp_path / "downloads", tmp_path / "course"
    blank = fill_notebook(LESSON, {})
    _put(source, "Chris Evans_12345_assignsubmission_file_02_attention_lookup.ipynb", blank)
    _put(source, "Dana Lee_12347_assignsubmission_file/02_attention_lookup.ipynb", blank)  # Moodle's folders
    _put(source, "alice/02_attention_lookup/02_attention_lookup.ipynb", blank)  # nbgrader's layout
    imported = import_submissions(LESSON, source, root)
    assert imported.students == ["Chris-Evans", "Dana-Lee", "alice"]  # ids chosen as ever
    assert recorded(root, LESSON) == {"Chris-Evans": Identity("moodle", "12345", "Chris Evans"),
                                      "Dana-Lee": Identity("moodle", "12347", "Dana Lee")}
    assert recorded(root, "03_scaling") == {}  # participant numbers belong to one assignment

    again = tmp_path / "again"  # Chris again from nbgrader's layout, Dana with another number
    _put(again, "Chris-Evans/02_attention_lookup/02_attention_lookup.ipynb", blank)
    _put(again, "Dana Lee_999_assignsubmission_file_02_attention_lookup.ipynb", blank)
    import_submissions(LESSON, again, root)
    assert recorded(root, LESSON) == {"Chris-Evans": Identity("moodle", "12345", "Chris Evans"),
                                      "Dana-Lee": Identity("moodle", "999", "Dana Lee")}


@pytest.mark.parametrize("option, header", [("canvas_column", "Lab 2"),
                                            ("canvas_column", "Lab 2 |4567"),
                                            ("blackboard_column", "Lab 2 [Total Pts: 15 Score]"),
                                            ("blackboard_column", "Lab 2 (123456)")])
def test_a_column_of_ones_own_needs_the_platforms_id(tmp_path, option, header):
    with pytest.raises(ValueError, match="has no id: give"):
        platforms.export(LESSON, tmp_path, **{option: header})
    assert not (tmp_path / platforms.IDS_FILE).exists()  # nothing remembered


def test_a_lesson_not_graded_yet_says_so(tmp_path):
    with pytest.raises(ValueError, match="not in the gradebook.*grade it first"):
        platforms.export(LESSON, tmp_path / "course", canvas_column="Lab 2 (4567)")
    assert not (tmp_path / "course").exists()  # no gradebook, no record made


# ------------------------------------------------------------------ three classes, graded


@pytest.fixture(scope="module")
def moodle(tmp_path_factory, built_solutions):
    return _grade(tmp_path_factory.mktemp("moodle"), {
        "Chris Evans_12345_assignsubmission_file_02_attention_lookup.ipynb": True,
        "Dana Lee_12347_assignsubmission_file/02_attention_lookup.ipynb": False,
        "alice/02_attention_lookup/02_attention_lookup.ipynb": True})


def test_a_moodle_class_gives_moodles_grading_worksheet(moodle):
    root, lines, window = moodle
    rows = _rows(root / OUT / "moodle_grading_worksheet.csv")
    submitted = "2026-03-01T12:30:00+00:00"
    assert rows == [
        ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
         "Grade can be changed", "Last modified (submission)", "Last modified (grade)"],
        ["Participant 12345", "Chris Evans", "", "Submitted for grading", "13.00", "15.00", "Yes",
         submitted, _graded_at(rows[1][8], window)],
        ["Participant 12347", "Dana Lee", "", "Submitted for grading", "0.00", "15.00", "Yes",
         submitted, _graded_at(rows[2][8], window)]]
    assert not (root / OUT / "canvas_grades.csv").exists()
    assert not (root / OUT / "blackboard_grade_center.csv").exists()
    text = "\n".join(lines)
    assert "no platform id for 1 student(s)" in text
    assert "without one): alice; enter their grades by hand" in text
    assert "its maximum grade must be 15" in text


def test_make_export_writes_the_files_again_with_hand_grades(moodle):
    root = moodle[0]
    with records.gradebook(root) as gb:
        gb.find_grade("why_rows", LESSON, LESSON, "Chris-Evans").manual_score = 2.0
        gb.db.commit()
    proc = subprocess.run(["make", "export", f"LESSON={LESSON}"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "ATTENTION_COURSE_ROOT": str(root),
                               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "moodle_grading_worksheet.csv (2 students)" in proc.stdout
    rows = _rows(root / OUT / "moodle_grading_worksheet.csv")
    assert [(r[0], r[4]) for r in rows[1:]] == [("Participant 12345", "15.00"), ("Participant 12347", "0.00")]


def test_a_class_without_platform_ids_gets_no_file_and_one_line(moodle, tmp_path):
    root = tmp_path / "course"  # the Moodle class as if it had come from nbgrader's exchange
    shutil.copytree(moodle[0], root, ignore=shutil.ignore_patterns(platforms.IDS_FILE, ".workers"))
    assert (root / OUT / "moodle_grading_worksheet.csv").exists()
    assert platforms.export(LESSON, root) == [
        f"platform import files: none (no student of {LESSON} was imported from a Moodle, Canvas or "
        f"Blackboard download)"]
    assert not any((root / OUT).iterdir())  # the worksheet of the earlier import is gone


@pytest.fixture(scope="module")
def canvas(tmp_path_factory, built_solutions):
    return _grade(tmp_path_factory.mktemp("canvas"), {
        "evanschris_12345_67890_02_attention_lookup.ipynb": True,
        "lateslow_LATE_12348_67891_02_attention_lookup.ipynb": False})


def test_a_canvas_class_gives_canvass_gradebook_import(canvas):
    root, lines, _ = canvas
    expected = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", LESSON],
                ["Points Possible", "", "", "", "", "15.00"],
                ["evanschris", "12345", "", "", "", "13.00"],
                ["lateslow", "12348", "", "", "", "0.00"]]
    assert _rows(root / OUT / "canvas_grades.csv") == expected
    assert not (root / OUT / "moodle_grading_worksheet.csv").exists()
    assert any("Canvas: the column '02_attention_lookup' has no id" in line for line in lines)

    assert platforms.main([LESSON, "--root", str(root), "--canvas-column", "Lab 2 (4567)"]) == 0
    expected[0][-1] = "Lab 2 (4567)"
    assert _rows(root / OUT / "canvas_grades.csv") == expected
    lines = platforms.export(LESSON, root)  # remembered, as make grade writes the files again
    assert _rows(root / OUT / "canvas_grades.csv") == expected
    assert not any("has no id" in line for line in lines)


@pytest.fixture(scope="module")
def blackboard(tmp_path_factory, built_solutions):
    return _grade(tmp_path_factory.mktemp("blackboard"), {
        "Lab 2_jsmith_attempt_2026-03-01-12-30-00_02_attention_lookup.ipynb": True,
        "Lab 2_mjones_attempt_2026-03-01-13-05-00_02_attention_lookup.ipynb": False})


def test_a_blackboard_class_gives_a_grade_center_upload(blackboard):
    root, lines, _ = blackboard
    text = (root / OUT / "blackboard_grade_center.csv").read_bytes().decode("utf-8")
    assert text == ('"Last Name","First Name","Username","02_attention_lookup"\r\n'
                    '"","","jsmith","13.00"\r\n'
                    '"","","mjones","0.00"\r\n')  # every field in quotes, as the upload asks
    assert any("Blackboard: the column '02_attention_lookup' has no id, so the upload creates a new "
               "text column" in line for line in lines)
    header = "Lab 2 [Total Pts: 15 Score] |123456"
    platforms.export(LESSON, root, blackboard_column=header)
    assert _rows(root / OUT / "blackboard_grade_center.csv")[0] == ["Last Name", "First Name", "Username",
                                                                     header]
