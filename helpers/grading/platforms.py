"""Grades back to the learning platform: the gradebook import files of Moodle, Canvas and Blackboard.

    python -m helpers.grading.platforms 02_attention_lookup       # make export LESSON=02_attention_lookup

Importing a class (``helpers.grading.submissions``) records, per lesson and student, the platform
a file was downloaded from and the id its name carries, in ``<root>/platform_ids.json`` beside the
gradebook; the student ids themselves are chosen as before. ``identify`` reads:

    Chris Evans_12345_assignsubmission_file_x.ipynb   Moodle      participant 12345
    evanschris_LATE_12345_67890_x.ipynb                Canvas      user id 12345 (the first number)
    Lab 2_jsmith_attempt_2026-03-01-12-30-00_x.ipynb   Blackboard  username jsmith

``export`` writes from the gradebook (hand grades and holds for review included) one import file
per platform the lesson's students came from, in ``<root>/platforms/<lesson>/``, in the layouts of:

- Moodle 4.x, assignment activity, "Upload grading worksheet" (feedback type "Offline grading
  worksheet"): ``moodle_grading_worksheet.csv``, the columns of the worksheet Moodle itself
  downloads, "Identifier" ("Participant 12345"), "Full name", "Email address", "Status", "Grade",
  "Maximum Grade", "Grade can be changed", "Last modified (submission)", "Last modified (grade)".
  Moodle reads Identifier, Grade and Last modified (grade), and keeps a grade changed in Moodle after
  that time (times are ISO 8601 with their zone). There is no "Feedback comments" column: Moodle would
  replace the comments already written there with empty ones. Participant numbers belong to one
  assignment: upload the worksheet to the assignment the files were downloaded from.
- Canvas, Grades ▸ Import (gradebook CSV): ``canvas_grades.csv``, the columns of Canvas's own
  gradebook export, "Student", "ID" (the Canvas user id, by which Canvas finds the student), "SIS
  User ID", "SIS Login ID", "Section", then the assignment's column, and the "Points Possible" row.
  The column is ``<lesson>`` (Canvas updates the assignment of that name, or creates it) unless
  ``--canvas-column`` gives the header of an existing one as Canvas exports it, "Lab 2 (4567)".
- Blackboard Learn, Original course view, Grade Center ▸ Work Offline ▸ Upload (comma-delimited,
  every field in quotes): ``blackboard_grade_center.csv``, "Last Name", "First Name", "Username"
  (by which Blackboard finds the student), then the column: ``<lesson>`` creates a new text column;
  ``--blackboard-column`` gives an existing one's header as Blackboard downloads it, with its id
  after ``|`` ("Lab 2 [Total Pts: 15 Score] |123456"). Column names given once are remembered.

A student whose platform id is unknown (nbgrader's layout, a plain file name such as
``alice_02_attention_lookup.ipynb``) is in no file: the report names them, and nothing is invented.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from .settings import COURSE_ROOT

IDS_FILE = "platform_ids.json"
PLATFORMS = ("moodle", "canvas", "blackboard")
NAMES = {"moodle": "Moodle", "canvas": "Canvas", "blackboard": "Blackboard"}
FILES = {"moodle": "moodle_grading_worksheet.csv", "canvas": "canvas_grades.csv",
         "blackboard": "blackboard_grade_center.csv"}
HEADERS = {
    "moodle": ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
               "Grade can be changed", "Last modified (submission)", "Last modified (grade)"],
    "canvas": ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"],
    "blackboard": ["Last Name", "First Name", "Username"],
}
MOODLE_PARTICIPANT = "Participant "  # Moodle's "hiddenuser" string, before the participant number
CANVAS_COLUMN = re.compile(r"^.+ \(\d+\)$")
BLACKBOARD_COLUMN = re.compile(r"^.+\|\s*\d+$")

# Matched at the start of a downloaded file's name, as helpers.grading.submissions.DEFAULT_PATTERN.
_IDS = (("moodle", re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_", re.I)),
        ("canvas", re.compile(r"^(?P<name>[^_]+?)_(?:late_)?(?P<id>\d+)_\d+_", re.I)),
        ("blackboard", re.compile(r"^(?:.+?_(?=[^_]+_attempt_\d{4}-))?(?P<id>[^_]+?)_attempt_\d{4}-", re.I)))


class Identity(NamedTuple):
    """Who a student is on the platform their file came from."""

    platform: str  # "moodle", "canvas" or "blackboard"
    id: str  # Moodle's participant number, Canvas's user id, Blackboard's username
    name: str  # the name as the file name spells it ("" when it carries none)


def identify(filename: str) -> Identity | None:
    """The platform and the id a downloaded file's name carries, or None (nbgrader's names, plain names)."""
    filename = unicodedata.normalize("NFC", filename)  # as macOS spells names, decomposed, or not
    for platform, regex in _IDS:
        match = regex.match(filename)
        if match:
            return Identity(platform, match["id"], match.groupdict().get("name") or "")
    return None


# ------------------------------------------------------------------ the record beside the gradebook


def _load(root: Path) -> dict:
    path = Path(root) / IDS_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def _save(root: Path, data: dict) -> None:
    path = Path(root) / IDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(part, path)


def record(root: Path, lesson: str, identities: dict[str, Identity | None]) -> None:
    """Remember the platform ids of the students just imported. A student imported without one
    (nbgrader's layout) keeps the id an earlier import of the same lesson recorded."""
    data = _load(root)
    known = data.setdefault(lesson, {}).setdefault("students", {})
    changed = False
    for student, identity in identities.items():
        if identity is not None and known.get(student) != identity._asdict():
            known[student], changed = identity._asdict(), True
    if changed:
        _save(root, data)


def recorded(root: Path, lesson: str) -> dict[str, Identity]:
    """student -> platform identity, as the imports of ``lesson`` recorded them."""
    students = _load(root).get(lesson, {}).get("students", {})
    return {s: Identity(**i) for s, i in students.items()}


def _check_columns(given: dict[str, str | None]) -> None:
    """Refuse a column header of one's own that lacks the platform's id for it."""
    checks = {"canvas": (CANVAS_COLUMN, "the assignment's header in Canvas's own gradebook export, "
                                        "'<name> (<assignment id>)', e.g. 'Lab 2 (4567)'"),
              "blackboard": (BLACKBOARD_COLUMN, "the column's header in Blackboard's Grade Center "
                                                "download, ending in '|<column id>', e.g. "
                                                "'Lab 2 [Total Pts: 15 Score] |123456'")}
    for platform, header in given.items():
        regex, form = checks[platform]
        if header is not None and not regex.match(header):
            raise ValueError(f"the {NAMES[platform]} column {header!r} has no id: give {form}")


def _columns(root: Path, lesson: str, given: dict[str, str | None]) -> dict[str, str]:
    """The Canvas and Blackboard column headers: given now, else remembered, else the lesson."""
    data = _load(root)
    remembered = data.setdefault(lesson, {}).setdefault("columns", {})
    fresh = {p: h for p, h in given.items() if h is not None and remembered.get(p) != h}
    if fresh:
        remembered.update(fresh)
        _save(root, data)
    return {p: remembered.get(p) or lesson for p in ("canvas", "blackboard")}


# ------------------------------------------------------------------ the import files


class _Row(NamedTuple):
    student: str
    score: float
    submitted: datetime | None  # naive UTC, as nbgrader stores it


def _iso(when: datetime | None) -> str:
    return when.replace(tzinfo=UTC).isoformat(timespec="seconds") if when else "-"


def _points(x: float) -> str:
    return f"{x:.2f}"


def _rows(platform: str, lesson: str, graded: list[tuple[_Row, Identity]], max_score: float,
          columns: dict[str, str], now: datetime) -> list[list[str]]:
    if platform == "moodle":
        return [HEADERS["moodle"]] + [
            [f"{MOODLE_PARTICIPANT}{who.id}", who.name, "", "Submitted for grading", _points(row.score),
             _points(max_score), "Yes", _iso(row.submitted), _iso(now.replace(tzinfo=None))]
            for row, who in graded]
    if platform == "canvas":
        return [HEADERS["canvas"] + [columns["canvas"]],
                ["Points Possible", "", "", "", "", _points(max_score)]] + [
            [who.name, who.id, "", "", "", _points(row.score)] for row, who in graded]
    return [HEADERS["blackboard"] + [columns["blackboard"]]] + [
        ["", "", who.id, _points(row.score)] for row, who in graded]


def export(lesson: str, root: Path = COURSE_ROOT, canvas_column: str | None = None,
           blackboard_column: str | None = None, now: datetime | None = None) -> list[str]:
    """Write the lesson's import files for every platform its students came from; the report's lines.

    ``canvas_column``/``blackboard_column``: the header of an existing gradebook column to update
    (remembered for the lesson); ``now``: the time written as Moodle's "Last modified (grade)".
    """
    from nbgrader.api import MissingEntry

    from . import records

    root = Path(root)
    given = {"canvas": canvas_column, "blackboard": blackboard_column}
    _check_columns(given)
    not_graded = ValueError(f"{lesson} is not in the gradebook {root / 'gradebook.db'}: grade it first "
                            f"(make grade LESSON={lesson} SUBMISSIONS=...)")
    if not (root / "gradebook.db").exists():
        raise not_graded
    columns = _columns(root, lesson, given)
    with records.gradebook(root) as gb:
        try:
            assignment = gb.find_assignment(lesson)
        except MissingEntry:
            raise not_graded from None
        max_score = assignment.max_score
        rows = sorted(_Row(s.student_id, s.score, s.timestamp) for s in assignment.submissions)
        ids = recorded(root, lesson)
        held = [r.student for r in rows if r.student in ids and records.is_held(gb, lesson, r.student)]
        by_hand = sorted(s.student_id for s in assignment.submissions
                         if s.needs_manual_grade and s.student_id in ids and s.student_id not in held)
    out_dir = root / "platforms" / lesson
    out_dir.mkdir(parents=True, exist_ok=True)
    when = (now or datetime.now(UTC)).astimezone(UTC)
    written = []
    for platform in PLATFORMS:
        graded = [(row, ids[row.student]) for row in rows
                  if row.student in ids and ids[row.student].platform == platform]
        path = out_dir / FILES[platform]
        if not graded:
            path.unlink(missing_ok=True)  # no student of this lesson came from there (any more)
            continue
        with path.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL if platform == "blackboard" else csv.QUOTE_MINIMAL) \
                .writerows(_rows(platform, lesson, graded, max_score, columns, when))
        written.append(f"{FILES[platform]} ({len(graded)} students)")
    if not written:  # a class from nbgrader's exchange or layout: nothing to say per student
        return [f"platform import files: none (no student of {lesson} was imported from a Moodle, "
                f"Canvas or Blackboard download)"]
    lines = [f"platform import files: {', '.join(written)} in {out_dir}"]
    unknown = [r.student for r in rows if r.student not in ids]
    if unknown:
        lines.append(f"  no platform id for {len(unknown)} student(s), so in no platform file (imported from "
                     f"nbgrader's layout or a file name without one): {' '.join(unknown)}; enter their "
                     f"grades by hand")
    used = {ids[r.student].platform for r in rows if r.student in ids}
    if "moodle" in used:
        lines.append(f"  Moodle: upload in the assignment the files came from (Grading action ▸ Upload "
                     f"grading worksheet); its maximum grade must be {max_score:g}")
    for platform, regex, effect in (
            ("canvas", CANVAS_COLUMN, "updates the assignment of that name or creates it"),
            ("blackboard", BLACKBOARD_COLUMN, "creates a new text column worth 0 points")):
        if platform in used and not regex.match(columns[platform]):
            lines.append(f"  {NAMES[platform]}: the column {columns[platform]!r} has no id, so the upload "
                         f"{effect}; to update your own column, run make export LESSON={lesson} "
                         f"{platform.upper()}_COLUMN='<its header>'")
    if by_hand:
        lines.append(f"  {len(by_hand)} student(s) have answers still to grade by hand, counted as 0 until "
                     f"then (run make export again afterwards): {' '.join(by_hand)}")
    if held:
        lines.append(f"  held for review, 0 in the files until you decide: {' '.join(held)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write a lesson's gradebook import files for Moodle, Canvas and Blackboard from "
                    "the course's gradebook (hand grades included).")
    parser.add_argument("lesson")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT,
                        help="course root (default: grading/, the root nbgrader_config.py sets)")
    parser.add_argument("--canvas-column", help="header of an existing Canvas assignment column, "
                                                "as Canvas exports it: 'Lab 2 (4567)'")
    parser.add_argument("--blackboard-column",
                        help="header of an existing Grade Center column, as Blackboard downloads it: "
                             "'Lab 2 [Total Pts: 15 Score] |123456'")
    args = parser.parse_args(argv)
    try:
        lines = export(args.lesson, args.root, args.canvas_column, args.blackboard_column)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
