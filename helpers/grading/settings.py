"""The course's nbgrader settings, shared by ``nbgrader_config.py``, ``make grade``, the
formgrader, the build and the tests, and the preprocessors they name.

One course root: every instructor command — ``make grade``, ``nbgrader`` run from the
repository root, the formgrader, export, feedback — reads and writes ``grading/`` (gradebook,
``submitted/``, ``autograded/``, ``feedback/``), takes the lesson sources from ``solutions/``
and releases into ``notebooks/``.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import sys
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader import api as nbgrader_api
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    NbGraderPreprocessor,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from nbgrader.utils import is_grade, is_locked, is_solution
from traitlets.config import Config

from ..paths import ROOT
from .execute import GuardedExecute
from .records import COURSE_ID
from .sanitize import configure_pages
from .validation import configure_validation

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
# The course root: gradebook, submitted/, autograded/, feedback/ (git-ignored). An instructor
# may keep it elsewhere (a backed-up disk) by setting ATTENTION_COURSE_ROOT for every command.
COURSE_ROOT = Path(os.environ.get("ATTENTION_COURSE_ROOT") or ROOT / "grading").resolve()
DEFAULT_EXCHANGE = "/srv/nbgrader/exchange"  # nbgrader's own default
_REMOTE_SCRIPT = re.compile(r'<script[^>]*\ssrc="(https?:)?//[^"]*"[^>]*>.*?</script>\s*', re.S)


def server_root() -> Path:
    """The folder the formgrader's Jupyter server must serve: the repository, or the folder
    holding both it and the course root when that lies elsewhere (the formgrader refuses a
    course root outside the server's folder)."""
    return Path(os.path.commonpath([ROOT, COURSE_ROOT]))


class StripGradeTracebacks(NbGraderPreprocessor):
    """Reduce errors in grade cells to ``Name: message``.

    A traceback quotes the source lines around the failing one, hidden tests included; the
    message of a check already says what went wrong.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


class HideInstructorNotes(NbGraderPreprocessor):
    """Leave the grading's notes to the instructor (``records.FOR_INSTRUCTOR``) out of feedback."""

    def preprocess_cell(self, cell, resources, index):
        from .records import FOR_INSTRUCTOR

        meta = cell.metadata.get("nbgrader", {})
        if str(meta.get("comment") or "").startswith(FOR_INSTRUCTOR):
            meta["comment"] = None
        return cell, resources


class KeepLastCopy(NbGraderPreprocessor):
    """Of several cells with the same grade_id (a student pasted a second copy), keep the last.

    nbgrader's own ``DeduplicateIds`` keeps the last too but leaves the others with empty
    nbgrader metadata, on which its restoring of missing cells then fails (``KeyError:
    'grade_id'``) and the whole submission goes ungraded. Here the earlier copies become
    ordinary cells: they still run, nothing of theirs is graded.
    """

    def preprocess(self, nb, resources):
        seen = set()
        for cell in reversed(nb.cells):
            if not (is_grade(cell) or is_solution(cell) or is_locked(cell)):
                continue
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in seen:
                self.log.warning("Cell %s appears more than once: the last copy is graded", grade_id)
                del cell.metadata["nbgrader"]
            else:
                seen.add(grade_id)
        return nb, resources


class HoldTampering(NbGraderPreprocessor):
    """After the scores are saved: scan the submission as the student sent it, and what it
    displayed as it ran (``helpers.grading.integrity``), and hold it at zero for review when it
    tampers with grading, on every path that autogrades (``make grade``, ``nbgrader autograde``,
    the formgrader). A hold of an earlier, tampering version is taken back when the new one is
    clean."""

    def preprocess(self, nb, resources):
        from . import integrity, records

        info = resources["nbgrader"]
        root = Path(info["db_url"][len("sqlite:///"):]).parent
        lesson, student = info["assignment"], info["student"]
        submitted = root / "submitted" / student / lesson / f"{info['notebook']}.ipynb"
        released = ROOT / "notebooks" / lesson / f"{info['notebook']}.ipynb"
        if not (submitted.exists() and released.exists()):
            return nb, resources
        # `nb` ran just now: what it displayed (script decoded at run time) is scanned too
        findings = integrity.scan_notebook(submitted, released, graded=nb)
        if integrity.is_tampering(findings):
            records.hold_for_review(root, lesson, student, integrity.explain(findings),
                                    integrity.summarise(findings))
            self.log.warning("%s is held at zero for review: %s", student,
                             "; ".join(integrity.review_lines(findings)))
        else:
            with records.gradebook(root) as gb:
                held = records.is_held(gb, lesson, student)
            if held:
                records.restore(root, lesson, student)
        return nb, resources


class StderrIsNotFailure(NbGraderPreprocessor):
    """In grade cells, turn stderr text into stdout before scoring.

    nbgrader scores a grade cell 0 if anything reaches stderr, so a correct answer whose code
    emits a warning would lose its points; failures are errors, and those stay errors.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
        return cell, resources


# A check's message is one long line: wrap it in the page instead of cutting it at the edge.
WRAP_OUTPUT = "<style>.output_subarea pre { white-space: pre-wrap; overflow-wrap: anywhere; }</style>"


def offline_feedback(page: Path) -> None:
    """Drop the scripts a feedback page would load from the network (nbgrader's template pulls
    MathJax from a CDN); formulas then show as their TeX source. Long output lines wrap."""
    text = page.read_text()
    cleaned = _REMOTE_SCRIPT.sub("", text)
    if WRAP_OUTPUT not in cleaned:
        cleaned = cleaned.replace("</head>", WRAP_OUTPUT + "\n</head>", 1)
    if cleaned != text:
        page.write_text(cleaned)


@functools.cache
def _alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema, read in this process. nbgrader asks
    its ``alembic`` command for it whenever it creates a gradebook: a second Python start, about
    1 s of CPU for each new course root."""
    import nbgrader
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()


def configure(c: Config, root: str | Path = COURSE_ROOT, exchange: str | Path | None = None) -> Config:
    """Apply the course's nbgrader settings to ``c`` for the course root ``root``.

    Sources always come from this repository's ``solutions/``. The course root (``grading/``
    or ``$ATTENTION_COURSE_ROOT``) releases from ``notebooks/``, what students get; any other
    root (a scratch grading) keeps its own ``release/``, so the committed notebooks are never
    rewritten.
    """
    # nbgrader runs the `alembic` command of its own environment; make sure it is found even
    # when that environment's bin/ is not on PATH (e.g. `.venv/bin/python -m ...`).
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    nbgrader_api.get_alembic_version = _alembic_head
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    exchange = exchange or os.environ.get("ATTENTION_EXCHANGE") or None  # set on the class hub
    c.CourseDirectory.root = str(root)
    # A course root shared by a group (setgid, as the class hub's course copy): nbgrader keeps what
    # it writes group-writable, so any instructor can grade again what another one graded.
    c.CourseDirectory.groupshared = bool(root.stat().st_mode & stat.S_ISGID)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.source_directory = str(ROOT / "solutions")
    c.CourseDirectory.release_directory = str(ROOT / "notebooks" if root == COURSE_ROOT
                                              else root / "release")
    # The .py sources sit beside the built notebooks; students get notebooks only.
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]
    if exchange is not None:
        c.Exchange.root = str(Path(exchange).resolve())
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    # The per-cell limit, and the time allowed after a cell's reply (or its interrupt) for its
    # remaining output to arrive: nbclient's 4 s is too short for a cell interrupted while flooding
    # its output on a busy machine, whose kernel would be taken for stuck and replaced, losing the
    # cell. `nbgrader validate` runs with the same settings (see .validation).
    configure_validation(c)
    # Kernels never see the hidden tests, the exchange or (through the course root) any
    # submission or gradebook; see helpers.grading.sandbox.
    c.GuardedExecute.hidden_paths = [str(ROOT / "solutions"), str(exchange or DEFAULT_EXCHANGE)]
    c.OverwriteCells.add_missing_cells = True
    c.Autograde.sanitize_preprocessors = [
        ClearOutput,
        KeepLastCopy,
        OverwriteKernelspec,
        OverwriteCells,
        CheckCellMetadata,
    ]
    c.Autograde.autograde_preprocessors = [
        GuardedExecute,
        StderrIsNotFailure,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveAutoGrades,
        HoldTampering,
        AssignLatePenalties,
        CheckCellMetadata,
    ]
    c.GenerateFeedback.preprocessors = [
        GetGrades,
        HideInstructorNotes,
        ClearHiddenTests,
        StripGradeTracebacks,
        CSSHTMLHeaderPreprocessor,
    ]
    # What the formgrader and the feedback pages render of a submission is cleaned of script,
    # and feedback pages carry a policy that runs none (see helpers.grading.sanitize).
    configure_pages(c)
    return c
