"""Times a student cannot forge: an exchange submission's hand-in time is the later of what the
student wrote (the folder's name, its timestamp.txt) and what the file system recorded when its
files were written (their inode change times, which no user can set back). A backdated hand-in
after the due time is late and flagged by name; an honest one is neither."""

import csv
import getpass
import os
from datetime import UTC, datetime, timedelta

import nbformat
import pytest

from helpers.grading import exchange
from helpers.grading.autograde import fill_notebook, main, solution_answers
from helpers.grading.settings import COURSE_ID
from helpers.grading.submissions import TIMESTAMP_FORMAT

LESSON = "02_attention_lookup"
ME = getpass.getuser()  # the folder's owner must be the student it names


def _submit(ex, when: datetime) -> str:
    """What nbgrader's Submit leaves in inbound/, named and stamped ``when`` — written now."""
    stamp = when.strftime(TIMESTAMP_FORMAT)
    name = f"{ME}+{LESSON}+{stamp}+r0"
    folder = ex / COURSE_ID / "inbound" / name
    folder.mkdir(parents=True)
    nbformat.write(fill_notebook(LESSON, solution_answers(LESSON)), folder / f"{LESSON}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text("0123456789abcdef")
    # Backdating what a user can: the files' modified times too (their change times stay now).
    os.utime(folder / f"{LESSON}.ipynb", (when.timestamp(),) * 2)
    return name


def test_an_honest_hand_in_keeps_its_time_and_is_not_flagged(tmp_path):
    ex, root = tmp_path / "exchange", tmp_path / "course"
    now = datetime.now(UTC)
    _submit(ex, now)
    got = exchange.collect(LESSON, root, ex)
    assert got.times == {} and not any("HAND-IN TIME" in line for line in got.lines())
    entry = got.collected[ME]
    assert abs((entry.counted - now).total_seconds()) <= exchange.TIME_TOLERANCE_S


def test_a_backdated_hand_in_counts_when_its_files_were_written(tmp_path):
    ex, root = tmp_path / "exchange", tmp_path / "course"
    _submit(ex, datetime.now(UTC) - timedelta(minutes=11))
    got = exchange.collect(LESSON, root, ex)
    entry = got.collected[ME]
    assert (datetime.now(UTC) - entry.counted).total_seconds() < 60  # now, not 11 minutes ago
    assert ME in got.times and "the later time counts" in got.times[ME]
    written = (root / "collected" / ME / LESSON / "timestamp.txt").read_text()
    assert written == entry.counted.strftime(TIMESTAMP_FORMAT)  # what grading reads


@pytest.fixture
def backdated_class(tmp_path, monkeypatch, built_solutions):
    """A hand-in named and stamped 11 minutes ago, written now; due 5 minutes ago."""
    ex = tmp_path / "exchange"
    now = datetime.now(UTC)
    _submit(ex, now - timedelta(minutes=11))
    monkeypatch.setenv("ATTENTION_EXCHANGE", str(ex))
    return tmp_path / "course", (now - timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_make_grade_names_the_backdated_hand_in_late(backdated_class, capsys):
    root, due = backdated_class
    code = main([LESSON, "exchange", "--root", str(root), "--due", due, "--workers", "1",
                 "--timeout", "60", "--no-feedback"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    late = [line for line in out.splitlines() if line.strip().startswith(f"LATE {ME}:")]
    assert late and "s after the due time" in late[0], out
    flagged = [line for line in out.splitlines() if f"HAND-IN TIME of {ME}" in line]
    assert flagged and "the later time counts" in flagged[0], out
    report = (root / f"report_{LESSON}.txt").read_text()
    assert late[0].strip() in report and flagged[0].strip() in report
    with (root / f"handins_{LESSON}.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["student"] == ME and 200 < float(row["late_seconds"]) < 600
    assert "the later time counts" in row["hand_in_time_finding"]
