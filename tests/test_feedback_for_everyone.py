"""One bad entry never blocks the class: a collected submission without the exchange's
``submission_secret.txt`` costs its student their released page, named with the file, and every
other student still gets theirs (``make feedback LESSON=… RELEASE=1``). And the report's words
about a held submission match the score its page shows."""

import glob
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import notebook_hash

from helpers.grading.autograde import ClassReport, fill_notebook, grade_class, main, solution_answers
from helpers.grading.settings import COURSE_ID

LESSON = "02_attention_lookup"
SECRETS = {"ana": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "chloe": "0f9e8d7c6b5a49382716f5e4d3c2b1a0"}


def _hand_in(folder: Path, student: str, secret: str | None) -> None:
    """What a collection from the exchange leaves: the notebook, timestamp.txt and, when it came
    through nbgrader's Submit, submission_secret.txt."""
    lesson = folder / student / LESSON
    lesson.mkdir(parents=True)
    nbformat.write(fill_notebook(LESSON, solution_answers(LESSON)), lesson / f"{LESSON}.ipynb")
    (lesson / "timestamp.txt").write_text("2026-03-01 12:00:00.000000 UTC")
    if secret is not None:
        (lesson / "submission_secret.txt").write_text(secret)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, built_solutions):
    tmp = tmp_path_factory.mktemp("one-bad-entry")
    for student in ("ana", "ben", "chloe"):
        _hand_in(tmp / "collected", student, SECRETS.get(student))
    report = grade_class(LESSON, tmp / "collected", tmp / "course", workers=2, timeout=60)
    assert sorted(report.graded) == ["ana", "ben", "chloe"], report.lines()
    return tmp


def test_every_other_student_gets_feedback_and_the_bad_entry_is_named(graded_class, monkeypatch, capsys):
    exchange = graded_class / "exchange"
    exchange.mkdir()
    monkeypatch.setenv("ATTENTION_EXCHANGE", str(exchange))
    root = graded_class / "course"
    code = main([LESSON, "--feedback", "--zip", "--release", "--root", str(root)])
    out, err = capsys.readouterr()
    assert code == 1, out + err  # not 2: nothing of the machinery failed
    assert "STOPPED" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("NO FEEDBACK")]
    assert "ben" in line and "submission_secret.txt missing in" in line
    assert str(root / "feedback" / "ben" / LESSON) in line
    assert "released to 2 student(s)" in out
    released = {Path(p).name for p in glob.glob(str(exchange / COURSE_ID / "feedback" / "*.html"))}
    assert released == {f"{notebook_hash(secret=SECRETS[s], notebook_id=LESSON)}.html" for s in SECRETS}
    zips = sorted(p.name for p in (root / "return" / LESSON).glob("*.zip"))
    assert zips == [f"{s}_{LESSON}_feedback.zip" for s in ("ana", "ben", "chloe")]  # ben's page exists


def test_an_unwritable_exchange_still_stops_loudly(graded_class, monkeypatch, capsys):
    exchange = graded_class / "no-exchange-here" / "exchange"  # its folder does not exist
    monkeypatch.setenv("ATTENTION_EXCHANGE", str(exchange))
    (graded_class / "no-exchange-here").write_text("a file where the exchange's folder should be")
    code = main([LESSON, "--feedback", "--release", "--root", str(graded_class / "course")])
    _, err = capsys.readouterr()
    assert code == 2 and "STOPPED writing or releasing feedback" in err, err
    assert "before grading" not in err


def test_the_report_says_held_with_the_score_the_page_shows():
    report = ClassReport(LESSON, graded={"ana": 0.0, "ben": 0.0}, zeroed=["ana", "ben"],
                         page_scores={"ana": (0.0, 23.0), "ben": (2.0, 23.0)})

    class Finding:
        severity, kind, cell, detail = "tamper", "monkeypatch", "softmax", "np.allclose replaced"

    report.integrity = {"ana": [Finding()], "ben": [Finding()]}
    text = "\n".join(report.lines())
    assert "ZEROED ana" in text  # its page shows 0/23
    assert "ZEROED ben" not in text
    assert "HELD FOR REVIEW (automatic points 0, hand grades kept: the page shows 2/23) ben" in text
