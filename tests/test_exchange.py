"""The nbgrader exchange round trip on a local exchange folder: the instructor releases, a
student fetches and submits, the instructor collects, autogrades and returns feedback, and the
student fetches it."""

import getpass

import nbformat
from conftest import ROOT
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeSubmit
from traitlets.config import Config

from helpers.grading.autograde import course_api, solution_answers
from helpers.grading.settings import COURSE_ID

LESSON = "02_attention_lookup"


def _student(exchange, home):
    config = Config()
    config.CourseDirectory.root = str(home)
    config.CourseDirectory.course_id = COURSE_ID
    config.Exchange.root = str(exchange)
    config.Exchange.assignment_dir = str(home)
    return config


def _as_student(kind, config):
    step = kind(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
                config=config)
    step.coursedir.assignment_id = LESSON
    step.start()


def test_release_fetch_submit_collect_grade_feedback(tmp_path, built_solutions):
    exchange, instructor, home = tmp_path / "exchange", tmp_path / "course", tmp_path / "home"
    for folder in (exchange, instructor, home):
        folder.mkdir()
    exchange.chmod(0o777)
    api = course_api(instructor, timeout=120, exchange=exchange)
    assert api.generate_assignment(LESSON)["success"]
    assert api.release_assignment(LESSON)["success"]

    student = _student(exchange, home)
    _as_student(ExchangeFetchAssignment, student)
    work = home / LESSON / f"{LESSON}.ipynb"
    assert work.exists(), "the student did not receive the notebook"

    nb = nbformat.read(work, as_version=4)
    answers = solution_answers(LESSON)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and gid in answers:
            cell.source = answers[gid]
    nbformat.write(nb, work)
    _as_student(ExchangeSubmit, student)

    assert api.collect(LESSON)["success"]
    me = getpass.getuser()
    assert (instructor / "submitted" / me / LESSON / f"{LESSON}.ipynb").exists()
    assert api.autograde(LESSON, me, force=True, create=True)["success"]
    submission = api.get_submission(LESSON, me)
    assert submission["score"] == 13.0
    assert api.generate_feedback(LESSON, me)["success"]
    assert api.release_feedback(LESSON, me)["success"]

    _as_student(ExchangeFetchFeedback, student)
    pages = list((home / LESSON / "feedback").glob(f"*/{LESSON}.html"))
    assert len(pages) == 1 and "softmax_tests" in pages[0].read_text()
    assert "BEGIN HIDDEN TESTS" not in pages[0].read_text()
    assert ROOT.exists()
