"""Importing a class's submissions: student ids from platform file names, every file accounted
for, no silent merges, another lesson's notebook recognised, submission times that reach
nbgrader's gradebook, idempotent re-imports."""

import json
import os
import re
import unicodedata
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from helpers.grading.submissions import (
    DEFAULT_PATTERN,
    DuplicateStudentError,
    import_submissions,
    safe_student_id,
    unreadable_reason,
)

LESSON = "02_attention_lookup"
RELEASED = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"
OTHER = ROOT / "notebooks" / "03_scaling" / "03_scaling.ipynb"


def _notebook(answer: str = "quiz_1 = 'a'", path: Path = RELEASED) -> bytes:
    """A released notebook with its quiz_1 answer set to ``answer``: distinct answers, distinct files."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "quiz_1":
            cell.source = answer
    return nbformat.writes(nb).encode()


def _stripped(path: Path) -> bytes:
    """The notebook as an editor that drops nbgrader's metadata saves it."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        cell["metadata"] = {}
    return json.dumps(nb).encode()


def _put(folder: Path, name: str, content: bytes, when: datetime | None = None) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    if when is not None:
        os.utime(path, (when.timestamp(),) * 2)
    return path


def _zip(path: Path, entries: dict[str, bytes], date=(2026, 3, 1, 12, 30, 0)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=date), content)
    return path


def _graded(root: Path, student: str) -> Path:
    return root / "submitted" / student / LESSON / f"{LESSON}.ipynb"


def _accounted_for(source: Path, imported) -> list[str]:
    """Files under ``source`` neither imported nor covered by a skipped entry (should be none)."""
    taken = {f for files in imported.files.values() for f in files}
    folders = [path for path, _ in imported.skipped if path.endswith("/")]
    taken |= {path for path, _ in imported.skipped}
    covered = lambda rel: rel in taken or any(rel.startswith(folder) for folder in folders)
    return [rel for rel in (p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
            if not covered(rel)]


# ------------------------------------------------------------------ student ids


PLATFORM_NAMES = {
    "Chris Evans_12345_assignsubmission_file_02_attention_lookup.ipynb": "Chris-Evans",
    "Chris Wong_12346_assignsubmission_file_02_attention_lookup.ipynb": "Chris-Wong",
    "Dana Lee_12347_assignsubmission_file/02_attention_lookup.ipynb": "Dana-Lee",  # Moodle's folders
    "evanschris_12345_67890_02_attention_lookup.ipynb": "evanschris",
    "lateslow_LATE_12348_67891_x.ipynb": "lateslow",
    "Lab 2_jsmith_attempt_2026-03-01-12-30-00_lab2.ipynb": "jsmith",
    "alice_02_attention_lookup.ipynb": "alice",
    "mary-jane.ipynb": "mary-jane",
    "bob-attempt2.ipynb": "bob",
    "carl (1).ipynb": "carl",
    "Siobhán O'Neil_555_assignsubmission_file_x.ipynb": "Siobhán-ONeil",
}


def test_default_ids_keep_full_names_apart(tmp_path):
    source = tmp_path / "downloads"
    for i, name in enumerate(PLATFORM_NAMES):
        _put(source, unicodedata.normalize("NFD", name), _notebook(f"quiz_1 = {i}"))  # as macOS spells it
    _put(source, f"{LESSON}.ipynb", _notebook())
    _put(source, "!!!.ipynb", _notebook())
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.students == sorted(PLATFORM_NAMES.values())
    for name, student in PLATFORM_NAMES.items():
        assert imported.files[student] == [unicodedata.normalize("NFD", name)]
        assert _graded(tmp_path / "root", student).exists()
    assert dict(imported.skipped) == {f"{LESSON}.ipynb": "named after a lesson, with no student id in it",
                                      "!!!.ipynb": "no student id in the file name"}
    assert not imported.unreadable and not imported.wrong_lesson


def test_the_two_chrises_keep_their_own_points(tmp_path):
    source = tmp_path / "downloads"
    for person in ("Evans", "Wong"):
        name = f"Chris {person}_1_assignsubmission_file_{LESSON}.ipynb"
        _put(source, name, _notebook(f"quiz_1 = '{person}'"))
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.students == ["Chris-Evans", "Chris-Wong"]
    assert "'Evans'" in _graded(tmp_path / "root", "Chris-Evans").read_text()
    assert "'Wong'" in _graded(tmp_path / "root", "Chris-Wong").read_text()


def test_one_id_for_two_different_files_is_an_error_naming_both(tmp_path):
    source, root = tmp_path / "downloads", tmp_path / "root"
    evans = "Chris Evans_1_assignsubmission_file_02_attention_lookup.ipynb"
    wong = "Chris Wong_2_assignsubmission_file_02_attention_lookup.ipynb"
    _put(source, evans, _notebook("quiz_1 = 'evans'"))
    _put(source, wong, _notebook("quiz_1 = 'wong'"))
    _put(source, "zoe.ipynb", _notebook())
    with pytest.raises(DuplicateStudentError) as err:
        import_submissions(LESSON, source, root, pattern=r"^(?P<student_id>[A-Za-z]+)")
    message = str(err.value)
    assert evans in message and wong in message and "'Chris'" in message
    assert "rename" in message and "--pattern" in message and "--keep-latest" in message
    assert err.value.conflicts == {"Chris": sorted([evans, wong])}
    assert isinstance(err.value, ValueError)
    assert not (root / "submitted").exists(), "nothing may be imported when ids collide"


def test_keep_latest_imports_the_newest_and_lists_the_others(tmp_path):
    source = tmp_path / "downloads"
    _put(source, "alice_2026-03-02T09-00-00.ipynb", _notebook("quiz_1 = 'second'"))
    _put(source, "alice_2026-03-01T09-00-00.ipynb", _notebook("quiz_1 = 'first'"))
    _put(source, "alice_2026-03-03T09-00-00.zip", b"not a zip")  # the newest upload, though broken
    _put(source, "bob.ipynb", _notebook("quiz_1 = 'old'"), datetime(2026, 3, 1, tzinfo=UTC))
    _put(source, "bob-attempt2.ipynb", _notebook("quiz_1 = 'new'"), datetime(2026, 3, 2, tzinfo=UTC))
    with pytest.raises(DuplicateStudentError, match="alice_2026-03-01T09-00-00.ipynb"):
        import_submissions(LESSON, source, tmp_path / "root")
    (source / "alice_2026-03-03T09-00-00.zip").unlink()
    imported = import_submissions(LESSON, source, tmp_path / "root", keep_latest=True)
    assert imported.students == ["alice", "bob"]
    assert "'second'" in _graded(tmp_path / "root", "alice").read_text()
    assert "'new'" in _graded(tmp_path / "root", "bob").read_text()
    assert dict(imported.skipped) == {
        "alice_2026-03-01T09-00-00.ipynb": "older upload of alice (imported: alice_2026-03-02T09-00-00"
                                           ".ipynb)",
        "bob.ipynb": "older upload of bob (imported: bob-attempt2.ipynb)"}
    assert imported.timestamps["alice"].time == datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_keep_latest_refuses_to_guess_between_uploads_of_the_same_time(tmp_path):
    source = tmp_path / "downloads"
    same = datetime(2026, 3, 1, 12, tzinfo=UTC)
    _put(source, "bob.ipynb", _notebook("quiz_1 = 1"), same)
    _put(source, "bob-copy.ipynb", _notebook("quiz_1 = 2"), same)
    with pytest.raises(DuplicateStudentError, match="cannot tell which is newer"):
        import_submissions(LESSON, source, tmp_path / "root", keep_latest=True)


def test_identical_copies_are_one_submission_at_the_earliest_time(tmp_path):
    source = tmp_path / "downloads"
    content = _notebook()
    _put(source, "bob (1).ipynb", content, datetime(2026, 3, 5, tzinfo=UTC))
    _put(source, "bob.ipynb", content, datetime(2026, 3, 1, tzinfo=UTC))
    _zip(source / "bob.zip", {f"{LESSON}.ipynb": content})
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.students == ["bob"] and imported.files["bob"] == ["bob.ipynb"]
    assert dict(imported.skipped) == {"bob (1).ipynb": "identical copy of bob.ipynb, imported once for bob",
                                      "bob.zip": "identical copy of bob.ipynb, imported once for bob"}
    assert imported.timestamps["bob"].time == datetime(2026, 3, 1, tzinfo=UTC)
    assert _graded(tmp_path / "root", "bob").read_bytes() == content


def test_a_custom_pattern_still_decides_the_id(tmp_path):
    source = tmp_path / "downloads"
    _put(source, "s1234567-lab2.ipynb", _notebook())
    _put(source, "lab2.ipynb", _notebook())
    imported = import_submissions(LESSON, source, tmp_path / "root", pattern=r"^s(?P<student_id>\d{7})")
    assert imported.students == ["1234567"]
    assert dict(imported.skipped) == {"lab2.ipynb": "no student id in the file name"}
    with pytest.raises(ValueError, match="no named group student_id"):
        import_submissions(LESSON, source, tmp_path / "root", pattern=r"^s(\d+)")


def test_safe_ids_are_readable_folder_names():
    assert safe_student_id("Chris Evans") == "Chris-Evans"
    assert safe_student_id("  Ana  María / López ") == "Ana-María-López"
    assert safe_student_id("O'Neil") == "ONeil"
    assert safe_student_id("../etc") == "etc"
    assert safe_student_id(unicodedata.normalize("NFD", "José")) == unicodedata.normalize("NFC", "José")
    for name, student in (("bob-attempt2.ipynb", "bob"),
                          ("evanschris_LATE_12345_67890_x.ipynb", "evanschris")):
        assert re.match(DEFAULT_PATTERN, name).group("student_id") == student


# ------------------------------------------------------------------ every file accounted for


def test_flat_files_mixed_into_nbgrader_layout_and_every_file_accounted_for(tmp_path):
    source = tmp_path / "class"
    _put(source, f"alice/{LESSON}/{LESSON}.ipynb", _notebook("quiz_1 = 'alice'"))
    _put(source, f"alice/{LESSON}/timestamp.txt", b"2026-03-01 12:30:00.000000 UTC")
    _put(source, f"alice/{LESSON}/data/points.csv", b"1,2\n")
    _put(source, f"alice/{LESSON}/.ipynb_checkpoints/{LESSON}-checkpoint.ipynb", _notebook())
    _put(source, "alice/01_rnn_bottleneck/01_rnn_bottleneck.ipynb", _notebook())
    _put(source, "alice/notes.md", b"todo")
    _put(source, "erin/02_attention_lookup/my work.ipynb", _notebook("quiz_1 = 'erin'"))
    _put(source, "frank/01_rnn_bottleneck/01_rnn_bottleneck.ipynb", _notebook())
    _put(source, "bob_02_attention_lookup.ipynb", _notebook("quiz_1 = 'bob'"))
    _zip(source / "carol_submission.zip", {f"work/{LESSON}.ipynb": _notebook("quiz_1 = 'carol'")})
    _put(source, "readme.txt", b"not a submission")
    _put(source, "old/alice_draft.ipynb", _notebook())
    (source / "empty").mkdir()
    _put(source, ".DS_Store", b"\0")
    _put(source, "Thumbs.db", b"\0")
    _put(source, "__MACOSX/._bob_02_attention_lookup.ipynb", b"\0")
    _put(source, "._carol_submission.zip", b"\0")
    imported = import_submissions(LESSON, source, tmp_path / "root")

    assert imported.students == ["alice", "bob", "carol", "erin"]
    assert imported.files["alice"] == [f"alice/{LESSON}/{LESSON}.ipynb", f"alice/{LESSON}/data/points.csv",
                                       f"alice/{LESSON}/timestamp.txt"]
    assert imported.files["erin"] == [f"erin/{LESSON}/my work.ipynb"]
    assert (tmp_path / "root" / "submitted" / "alice" / LESSON / "data" / "points.csv").exists()
    assert "'erin'" in _graded(tmp_path / "root", "erin").read_text()
    skipped = dict(imported.skipped)
    assert skipped == {
        ".DS_Store": "macOS folder metadata, not a submission",
        "Thumbs.db": "Windows thumbnail cache, not a submission",
        "__MACOSX/": "macOS archive metadata, not a submission",
        "._carol_submission.zip": "macOS resource fork, not a submission",
        f"alice/{LESSON}/.ipynb_checkpoints/": "Jupyter's autosave copies, not a submission",
        "alice/01_rnn_bottleneck/": f"another lesson's folder (01_rnn_bottleneck), not {LESSON}",
        "alice/notes.md": f"outside alice/{LESSON}/, where nbgrader looks",
        "frank/": f"holds 01_rnn_bottleneck/ but no {LESSON}/ (nbgrader's layout of another lesson)",
        "old/": f"not nbgrader's <student>/{LESSON}/ layout (no {LESSON}/ inside); "
                "its 1 file(s) were not imported",
        "empty/": "an empty folder",
        "readme.txt": "not a notebook (.ipynb) or a zip",
    }
    assert _accounted_for(source, imported) == []
    assert not (tmp_path / "root" / "submitted" / "alice" / LESSON / ".ipynb_checkpoints").exists()


def test_another_notebook_beside_the_right_one_is_named(tmp_path):
    source = tmp_path / "class"
    _put(source, f"erin/{LESSON}/{LESSON}.ipynb", _notebook("quiz_1 = 'erin'"))
    _put(source, f"erin/{LESSON}/03_scaling.ipynb", OTHER.read_bytes())
    _put(source, f"erin/{LESSON}/Untitled.ipynb", b"{}")
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.students == ["erin"] and not imported.wrong_lesson
    assert dict(imported.skipped) == {
        f"erin/{LESSON}/03_scaling.ipynb": f"the notebook of 03_scaling in erin's folder; nbgrader grades "
                                           f"only {LESSON}.ipynb, imported from {LESSON}.ipynb",
        f"erin/{LESSON}/Untitled.ipynb": f"another notebook in erin's folder; nbgrader grades only "
                                         f"{LESSON}.ipynb, imported from {LESSON}.ipynb"}
    assert sorted(p.name for p in (tmp_path / "root" / "submitted" / "erin" / LESSON).iterdir()) == \
        [f"{LESSON}.ipynb", "timestamp.txt"]


def test_zips_prefer_the_lesson_notebook_and_ignore_litter(tmp_path):
    source = tmp_path / "downloads"
    _zip(source / "carol.zip", {
        f"__MACOSX/work/._{LESSON}.ipynb": b"\0",
        f"work/.ipynb_checkpoints/{LESSON}-checkpoint.ipynb": _notebook("quiz_1 = 'checkpoint'"),
        "work/scratch.ipynb": OTHER.read_bytes(),
        f"work/{LESSON}.ipynb": _notebook("quiz_1 = 'carol'"),
    })
    _zip(source / "dave.zip", {"dave/attention.ipynb": _notebook("quiz_1 = 'dave'"), "dave/a.py": b""})
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert "'carol'" in _graded(tmp_path / "root", "carol").read_text()
    assert "'dave'" in _graded(tmp_path / "root", "dave").read_text()
    assert dict(imported.skipped) == {
        "carol.zip/work/scratch.ipynb": f"the notebook of 03_scaling in the zip; imported: "
                                        f"work/{LESSON}.ipynb"}
    assert not imported.unreadable


def test_broken_submissions_are_imported_and_say_why(tmp_path):
    source = tmp_path / "downloads"
    _put(source, "amy.ipynb", b'{"cells": [')
    _put(source, "ben.ipynb", b"")
    _put(source, "cat.ipynb", b'{"hello": "world"}')
    _put(source, "dan.ipynb", json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                          "nbformat_minor": 5}).encode())
    _put(source, "eve.zip", b"PK\x03\x04 this is not really a zip")
    _zip(source / "fay.zip", {"report.pdf": b"%PDF", "code.py": b""})
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.students == ["amy", "ben", "cat", "dan", "eve", "fay"]
    why = imported.unreadable
    assert why["amy"].startswith("not a readable notebook: not JSON")
    assert why["ben"] == "not a readable notebook: the file is empty"
    assert why["cat"] == "not a readable notebook: JSON, but not a Jupyter notebook"
    assert why["dan"] == "the notebook has no cells"
    assert why["eve"].startswith("corrupt zip")
    assert why["fay"] == "the zip holds no notebook (.ipynb); it holds code.py, report.pdf"
    folder = tmp_path / "root" / "submitted"
    assert (folder / "eve" / LESSON / "eve.zip").exists(), "the broken zip is kept for the instructor"
    assert _graded(tmp_path / "root", "amy").read_bytes() == b'{"cells": ['
    assert unreadable_reason(_graded(tmp_path / "root", "amy")) == why["amy"]
    assert unreadable_reason(_graded(tmp_path / "root", "eve")) == \
        "the notebook is missing from the submission"


# ------------------------------------------------------------------ the lesson of a notebook


def test_another_lessons_notebook_is_imported_and_reported(tmp_path):
    source = tmp_path / "downloads"
    _put(source, f"dave_{LESSON}.ipynb", OTHER.read_bytes())
    _put(source, f"erin_{LESSON}.ipynb", _notebook())
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.wrong_lesson == {"dave": "03_scaling"}
    assert _graded(tmp_path / "root", "dave").read_bytes() == OTHER.read_bytes()
    assert not imported.unreadable
    assert "dave: this is the notebook of 03_scaling" in "\n".join(imported.lines())


def test_a_notebook_without_grading_metadata_is_not_another_lesson(tmp_path):
    source = tmp_path / "downloads"
    _put(source, "gil_colab.ipynb", _stripped(RELEASED))
    _put(source, "hal_colab.ipynb", _stripped(OTHER))
    _put(source, "ivy.ipynb", nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('hello')")])).encode())
    imported = import_submissions(LESSON, source, tmp_path / "root")
    assert imported.wrong_lesson == {"hal": "03_scaling"}
    assert imported.unreadable["gil"].startswith(
        f"the notebook lost its grading metadata (saved by another editor?): its cells are {LESSON}'s")
    assert "03_scaling" in imported.unreadable["hal"]
    assert imported.unreadable["ivy"] == \
        f"the notebook has no grading metadata and is not {LESSON}'s (another file?)"
    assert unreadable_reason(_graded(tmp_path / "root", "gil")) == \
        "the notebook lost its grading metadata (saved by another editor?)"
    assert unreadable_reason(RELEASED) is None


# ------------------------------------------------------------------ submission times


def _time(imported, student):
    return imported.timestamps[student].time, imported.timestamps[student].source


def test_submission_times_from_every_source(tmp_path):
    source, root = tmp_path / "class", tmp_path / "root"
    _put(source, f"ann/{LESSON}/{LESSON}.ipynb", _notebook("quiz_1 = 1"))
    _put(source, f"ann/{LESSON}/timestamp.txt", b"2026-03-01 13:30:00.000000 CET\n")  # nbgrader's format
    _put(source, f"abe/{LESSON}/{LESSON}.ipynb", _notebook("quiz_1 = 2"))
    _put(source, f"abe/{LESSON}/timestamp.txt", b"2026-03-01 12:30:00+00:00")  # zip_collect's
    _put(source, "iso_2026-03-01T12-30-00.ipynb", _notebook("quiz_1 = 3"))
    _put(source, "dash_2026-03-01-12-30-00.ipynb", _notebook("quiz_1 = 4"))
    _put(source, "compact_20260301T123000.ipynb", _notebook("quiz_1 = 5"))
    _put(source, "Lab 2_bbuser_attempt_2026-03-01-12-30-00_lab.ipynb", _notebook("quiz_1 = 6"))
    _zip(source / "zipped.zip", {f"{LESSON}.ipynb": _notebook("quiz_1 = 7")})
    _put(source, "plain.ipynb", _notebook("quiz_1 = 8"), datetime(2026, 3, 1, 12, 30, tzinfo=UTC))
    _put(source, "bad_stamp/02_attention_lookup/02_attention_lookup.ipynb", _notebook("quiz_1 = 9"),
         datetime(2026, 3, 1, 12, 30, tzinfo=UTC))
    _put(source, "bad_stamp/02_attention_lookup/timestamp.txt", b"yesterday-ish")
    imported = import_submissions(LESSON, source, root)
    expected = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    assert {s: _time(imported, s) for s in imported.students} == {
        "ann": (expected, "nbgrader timestamp.txt"),
        "abe": (expected, "nbgrader timestamp.txt"),
        "iso": (expected, "file name"),
        "dash": (expected, "file name"),
        "compact": (expected, "file name"),
        "bbuser": (expected, "file name"),
        "zipped": (expected, "zip entry"),
        "plain": (expected, "file modified time"),
        "bad_stamp": (expected, "file modified time"),
    }
    for student in imported.students:
        stamp = root / "submitted" / student / LESSON / "timestamp.txt"
        assert stamp.read_text() == "2026-03-01 12:30:00.000000 UTC"


def test_times_without_a_zone_are_read_in_the_given_zone(tmp_path):
    source = tmp_path / "downloads"
    _put(source, "iso_2026-03-01T13-30-00.ipynb", _notebook("quiz_1 = 1"))
    _put(source, "utc_2026-03-01T12-30-00Z.ipynb", _notebook("quiz_1 = 2"))
    _zip(source / "zipped.zip", {f"{LESSON}.ipynb": _notebook("quiz_1 = 3")}, date=(2026, 3, 1, 13, 30, 0))
    imported = import_submissions(LESSON, source, tmp_path / "root", tz="Europe/Berlin")
    assert {s: t.time for s, t in imported.timestamps.items()} == {
        s: datetime(2026, 3, 1, 12, 30, tzinfo=UTC) for s in ("iso", "utc", "zipped")}


def test_the_time_reaches_nbgraders_gradebook(tmp_path, built_solutions):
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from helpers.grading.settings import configure

    root = tmp_path / "course"
    config = configure(Config(), root)
    config.CourseDirectory.source_directory = str(ROOT / "solutions")
    config.Execute.timeout = 30
    api = NbGraderAPI(config=config)
    assert api.generate_assignment(LESSON)["success"]
    source = tmp_path / "downloads"
    _put(source, "alice_2026-03-01T12-30-00.ipynb", RELEASED.read_bytes())
    import_submissions(LESSON, source, root)
    result = api.autograde(LESSON, "alice", force=True, create=True)
    assert result["success"], result.get("log")
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        assert gb.find_submission(LESSON, "alice").timestamp == datetime(2026, 3, 1, 12, 30)  # naive UTC


# ------------------------------------------------------------------ importing again


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_importing_again_replaces_only_the_students_imported(tmp_path):
    source, root = tmp_path / "downloads", tmp_path / "root"
    _put(source, "alice.ipynb", _notebook("quiz_1 = 'alice'"))
    _put(source, "zoe.ipynb", _notebook("quiz_1 = 'zoe'"))
    first = import_submissions(LESSON, source, root)
    before = _tree(root)
    assert import_submissions(LESSON, source, root) == first
    assert _tree(root) == before, "importing the same folder again changes nothing"

    _put(root / "submitted" / "alice" / LESSON, "stale.txt", b"from an older import")
    (source / "zoe.ipynb").unlink()
    _put(source, "alice.ipynb", _notebook("quiz_1 = 'fixed'"))
    again = import_submissions(LESSON, source, root)
    assert again.students == ["alice"]
    assert "'fixed'" in _graded(root, "alice").read_text()
    assert not (root / "submitted" / "alice" / LESSON / "stale.txt").exists()
    assert _graded(root, "zoe").read_bytes() == before[f"submitted/zoe/{LESSON}/{LESSON}.ipynb"]
    assert not (root / ".importing").exists()


def test_importing_the_grading_folder_in_place(tmp_path):
    root = tmp_path / "root"
    _put(root / "submitted", f"alice/{LESSON}/{LESSON}.ipynb", _notebook())
    _put(root / "submitted", f"alice/{LESSON}/timestamp.txt", b"2026-03-01 12:30:00.000000 UTC")
    before = _tree(root)
    imported = import_submissions(LESSON, root / "submitted", root)
    assert imported.students == ["alice"] and imported.skipped == []
    assert _tree(root) == before


def test_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no folder of submissions"):
        import_submissions(LESSON, tmp_path / "nowhere", tmp_path)
