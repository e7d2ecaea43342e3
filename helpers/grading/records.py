"""What grading writes into the gradebook, and the rules that keep a grade from being lost.

- A score, once recorded, is never replaced by a "could not be graded" zero: a later run that
  cannot grade a student leaves the earlier score and says so.
- A submission held for review after the integrity scan keeps its automatic scores; a manual
  score of 0 on each automatically graded cell overrides them, the notebook is flagged and the
  reason is written as a comment — all of which the formgrader shows, where the instructor
  decides. ``restore`` takes the override back in one step.
- A hand grade belongs to the answer it was given on. When a new submission changes that answer
  (compared with the graded copy the instructor saw, before it is replaced), the hand grade is
  kept but flagged for grading again: the formgrader lists it as needing a manual grade, the
  notebook is flagged, a note for the instructor says why, and the report names it.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

COURSE_ID = "attention-from-scratch"  # in the gradebook, the exchange and every nbgrader setting
HOLD = "Held for review: "  # how the comments that hold a score at zero begin
NOT_GRADED = "Not graded: "
FOR_INSTRUCTOR = "For the instructor (left out of feedback): "  # review notes in the formgrader
# On a hand-graded cell whose answer changed since its hand grade was given.
HAND_GRADE_CHANGED = FOR_INSTRUCTOR + "the answer changed since it was graded by hand"


@contextlib.contextmanager
def gradebook(root: Path):
    """The course root's gradebook, as a context manager.

    nbgrader's own code makes SQLAlchemy warn about objects "not in session" when a student or
    submission is created; the warning is harmless and would bury the grading report.
    """
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}", course_id=COURSE_ID) as gb:
            yield gb


def has_score(gb, lesson: str, student: str) -> bool:
    """Whether ``student`` already has an automatic score recorded for ``lesson``."""
    from nbgrader.api import MissingEntry

    try:
        nb = gb.find_submission_notebook(lesson, lesson, student)
    except MissingEntry:
        return False
    return any(g.auto_score is not None for g in nb.grades if g.cell.cell_type == "code")


def total(gb, lesson: str, student: str) -> float:
    """The student's score on the automatically graded cells (manual overrides included)."""
    nb = gb.find_submission_notebook(lesson, lesson, student)
    return sum(g.score or 0.0 for g in nb.grades if g.cell.cell_type == "code")


def page_score(gb, lesson: str, student: str) -> tuple[float, float]:
    """(score, maximum) of the whole notebook, hand-graded cells included: what its feedback
    page shows."""
    nb = gb.find_submission_notebook(lesson, lesson, student)
    return nb.score, nb.max_score


def merge(lesson: str, source_root: Path, root: Path, students: list[str]) -> None:
    """Copy a worker's grades, comments, flags and timestamps into the course root's gradebook.

    Hand grades already in the course root are left as they are: only what grading computes is
    copied — automatic scores, automatic comments, and whether the submission is held for review.
    """
    if not students:
        return
    with gradebook(source_root) as src, gradebook(root) as dst:
        for student in students:
            done = src.find_submission(lesson, student)
            dst.update_or_create_student(student)
            dst.update_or_create_submission(lesson, student, timestamp=done.timestamp)
            held = is_held(src, lesson, student)
            was_held = is_held(dst, lesson, student)
            for nb in done.notebooks:
                for g in nb.grades:
                    mine = dst.find_grade(g.name, nb.name, lesson, student)
                    mine.auto_score = g.auto_score
                    if g.cell.cell_type == "code" and (held or was_held):
                        mine.manual_score, mine.needs_manual_grade = g.manual_score, g.needs_manual_grade
                    elif mine.manual_score is None:
                        mine.needs_manual_grade = g.needs_manual_grade
                for c in nb.comments:
                    dst.find_comment(c.name, nb.name, lesson, student).auto_comment = c.auto_comment
                mine_nb = dst.find_submission_notebook(nb.name, lesson, student)
                mine_nb.late_submission_penalty = nb.late_submission_penalty
                mine_nb.flagged = nb.flagged or (mine_nb.flagged and not was_held)
        dst.db.commit()  # the worker's share at once


def record_not_graded(root: Path, lesson: str, student: str, reason: str, timestamp=None) -> bool:
    """A submission that could not be graded: a recorded 0 with the reason and the time it was
    handed in (aware datetime), unless the student already has a score, which stays. Returns
    whether a zero was recorded."""
    from datetime import UTC

    with gradebook(root) as gb:
        if has_score(gb, lesson, student):
            return False
        gb.update_or_create_student(student)
        when = {} if timestamp is None else \
            {"timestamp": timestamp.astimezone(UTC).replace(tzinfo=None)}  # nbgrader: naive UTC
        submission = gb.update_or_create_submission(lesson, student, **when)
        for nb in submission.notebooks:
            for g in nb.grades:
                if g.cell.cell_type == "code":
                    g.auto_score, g.needs_manual_grade = 0.0, False
            for c in nb.comments:
                c.auto_comment = f"{NOT_GRADED}{reason}."
        gb.db.commit()
    return True


def hold_for_review(root: Path, lesson: str, student: str, why: str, details: str) -> None:
    """Override the automatic scores with 0 until the instructor decides; flag the notebook.

    ``why`` is shown to the student (feedback) and the instructor; ``details`` (one finding per
    line) only to the instructor, in the manual comment of the first answer cell.
    """
    with gradebook(root) as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        for g in nb.grades:
            if g.cell.cell_type == "code":
                g.manual_score, g.needs_manual_grade = 0.0, True
        nb.flagged = True
        order = _answer_order(lesson)
        comments = sorted(nb.comments, key=lambda c: order.get(c.name, len(order)))
        if comments:  # under the first answer of the notebook, where the student starts reading
            comments[0].auto_comment = HOLD + why
        gb.db.commit()
    flag(root, lesson, student, details)


def _answer_order(lesson: str) -> dict[str, int]:
    """grade_id -> position of each answer cell in the released notebook."""
    import nbformat

    from ..paths import ROOT

    released = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    if not released.exists():
        return {}
    cells = nbformat.read(released, as_version=4).cells
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in cells
           if c.metadata.get("nbgrader", {}).get("solution")]
    return {gid: i for i, gid in enumerate(ids)}


def flag(root: Path, lesson: str, student: str, details: str) -> None:
    """Flag a submission for the instructor's look. ``details`` go into the formgrader, as an
    automatic comment beginning with ``FOR_INSTRUCTOR`` (which feedback pages leave out), and
    to ``<root>/review/<lesson>/<student>.txt``."""
    with gradebook(root) as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        nb.flagged = True
        order = _answer_order(lesson)
        free = [c for c in nb.comments if not c.auto_comment or (
            c.auto_comment.startswith(FOR_INSTRUCTOR) and not c.auto_comment.startswith(HAND_GRADE_CHANGED))]
        if free:
            min(free, key=lambda c: order.get(c.name, len(order))).auto_comment = \
                FOR_INSTRUCTOR + details.strip()
        gb.db.commit()
    notes = Path(root) / "review" / lesson
    notes.mkdir(parents=True, exist_ok=True)
    (notes / f"{student}.txt").write_text(details.rstrip() + "\n")


def is_held(gb, lesson: str, student: str) -> bool:
    """Whether the student's score for ``lesson`` is held at zero for review."""
    from nbgrader.api import MissingEntry

    try:
        nb = gb.find_submission_notebook(lesson, lesson, student)
    except MissingEntry:
        return False
    return any((c.auto_comment or "").startswith(HOLD) for c in nb.comments)


def restore(root: Path, lesson: str, student: str) -> float:
    """Take back a hold for review: the automatic scores count again. Returns the score."""
    with gradebook(root) as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        if not is_held(gb, lesson, student):
            raise ValueError(f"{student}'s {lesson} is not held for review")
        for g in nb.grades:
            if g.cell.cell_type == "code" and g.manual_score == 0.0:
                g.manual_score, g.needs_manual_grade = None, False
        for c in nb.comments:
            if (c.auto_comment or "").startswith(HOLD):
                c.auto_comment = None
        nb.flagged = False
        gb.db.commit()
        return total(gb, lesson, student)


# ------------------------------------------------------------------ hand grades and changed answers


def hand_graded(gb, lesson: str, student: str) -> dict[str, float]:
    """grade_id -> manual score of the cells graded by hand (a hold for review's zeros left out),
    from the open gradebook ``gb``."""
    from nbgrader.api import MissingEntry

    try:
        nb = gb.find_submission_notebook(lesson, lesson, student)
    except MissingEntry:
        return {}
    held = is_held(gb, lesson, student)
    return {g.name: g.manual_score for g in nb.grades if g.manual_score is not None
            and not (held and g.cell.cell_type == "code")}


def review_hand_grades(root: Path, lesson: str, student: str, changed: list[str]) -> None:
    """Flag the hand grades of ``changed`` cells for grading again: the formgrader lists them as
    needing a manual grade, the notebook is flagged, and the cell's comment for the instructor
    says why (feedback pages leave it out). The hand grade stays until the instructor decides.
    A note on a cell the instructor has graded again since is taken away."""
    with gradebook(root) as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        comments = {c.name: c for c in nb.comments}
        for grade in nb.grades:
            note = comments.get(grade.name)
            if grade.name in changed:
                grade.needs_manual_grade = True
                nb.flagged = True
                if note is not None:
                    note.auto_comment = (f"{HAND_GRADE_CHANGED} ({grade.manual_score:g} of "
                                         f"{grade.max_score:g} points kept until you grade it again)")
            elif note is not None and (note.auto_comment or "").startswith(HAND_GRADE_CHANGED) \
                    and not grade.needs_manual_grade:
                note.auto_comment = None
        gb.db.commit()


def hand_grades_to_review(gb, lesson: str, student: str) -> list[str]:
    """The student's hand-graded cells whose answer changed and that wait to be graded again,
    from the open gradebook ``gb``."""
    from nbgrader.api import MissingEntry

    try:
        nb = gb.find_submission_notebook(lesson, lesson, student)
    except MissingEntry:
        return []
    waiting = {c.name for c in nb.comments if (c.auto_comment or "").startswith(HAND_GRADE_CHANGED)}
    return sorted(g.name for g in nb.grades if g.name in waiting and g.needs_manual_grade
                  and g.manual_score is not None)


def class_status(root: Path, lesson: str) -> dict[str, str]:
    """Every student with a submission of ``lesson`` in the gradebook, as the class tables count
    them (``helpers.grading.mistakes``): "zeroed" (held for review), "unreadable" (recorded as
    not graded) or "graded"."""
    from nbgrader.api import MissingEntry

    if not (Path(root) / "gradebook.db").exists():
        return {}
    status = {}
    with gradebook(root) as gb:
        try:
            submissions = gb.assignment_submissions(lesson)
        except MissingEntry:
            return {}
        for submission in submissions:
            student = submission.student.id
            notes = [c.auto_comment or "" for nb in submission.notebooks for c in nb.comments]
            if is_held(gb, lesson, student):
                status[student] = "zeroed"
            elif any(n.startswith(NOT_GRADED) for n in notes):
                status[student] = "unreadable"
            else:
                status[student] = "graded"
    return status
