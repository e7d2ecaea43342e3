"""nbgrader settings shared by ``nbgrader_config.py``, the build and the tests, and the
preprocessor that keeps hidden tests out of feedback."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbformat.v4 import new_output
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    Execute,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    NbGraderPreprocessor,
    SaveAutoGrades,
)
from nbgrader.utils import is_grade
from traitlets import Integer
from traitlets.config import Config

COURSE_ID = "attention-from-scratch"
# Generous per-cell limit: a grade cell may train a small model for a few seconds.
CELL_TIMEOUT_S = 300
IOPUB_TIMEOUT_S = 20
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
_REMOTE_SCRIPT = re.compile(r'<script[^>]*\ssrc="(https?:)?//[^"]*"[^>]*>.*?</script>\s*', re.S)


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


# Errors a grading run writes into a cell it had to give up on: the kernel died in it, or it
# did not stop when interrupted at the time limit. The report lists the cells by these names.
KERNEL_DIED, UNSTOPPABLE = "DeadKernelError", "CellTimeoutError"
TIME_LIMIT_ERRORS = ("KeyboardInterrupt", UNSTOPPABLE)
TRUNCATED = "[output truncated"  # how a cell's output past the cap is marked


class GuardedExecute(Execute):
    """nbgrader's execution, made robust to what a submission can do to its kernel.

    - **Output cap.** A cell printing gigabytes would make the grading process hold all of it in
      memory; past the cap, outputs are dropped (the cell still runs until the time limit).
    - **Recovery.** When the kernel dies in a cell (``os._exit``, a crash) or a cell does not
      stop when interrupted at the time limit (a fork bomb, ``except: pass`` around an endless
      loop), nbgrader would give up on the whole notebook. Here that cell gets an error saying
      what happened, a new kernel runs the cells above it again (silently), and execution goes
      on with the next cell: the submission loses the points of the cells that needed the lost
      one, and only those. After ``max_restarts`` such cells the rest is not run.
    """

    max_output_bytes = Integer(2_000_000, help="output kept per cell, in bytes").tag(config=True)
    max_restarts = Integer(3, help="new kernels allowed per notebook").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        cells, lost, start, restarts = self.nb.cells, set(), 0, 0
        while start < len(cells):
            current = start
            try:
                with self.setup_kernel():
                    info = self.wait_for_reply(self.kc.kernel_info())
                    self.nb.metadata["language_info"] = info["content"]["language_info"]
                    for current in range(start):
                        if current not in lost and not _time_limited(cells[current]):
                            self._replay(cells[current])
                    for current in range(start, len(cells)):
                        self.preprocess_cell(cells[current], resources, current)
                    start = len(cells)
            except (DeadKernelError, CellTimeoutError) as err:
                died = isinstance(err, DeadKernelError)
                lost.add(current)
                cells[current].setdefault("outputs", []).append(_lost_output(died, self.timeout))
                restarts += 1
                start = max(start, current + 1)
                self.km = self.kc = None
                if restarts > self.max_restarts:
                    for cell in cells[start:]:
                        if cell.cell_type == "code":
                            cell.outputs = [_not_run_output(restarts)]
                    start = len(cells)
        self.set_widgets_metadata()
        return self.nb, self.resources

    def _replay(self, cell) -> None:
        """Run a cell again in a new kernel to rebuild its state, without recording anything."""
        if cell.cell_type != "code" or not cell.source.strip():
            return
        msg_id = self.kc.execute(cell.source, silent=True, store_history=False, allow_stdin=False)
        self.wait_for_reply(msg_id, cell)

    def output(self, outs, msg, display_id, cell_index):
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:
            return super().output(outs, msg, display_id, cell_index)
        size = sum(len(str(o.get("text", ""))) + len(str(o.get("data", ""))) for o in outs)
        if size <= self.max_output_bytes:
            out = super().output(outs, msg, display_id, cell_index)
            if out is None or size + len(str(out.get("text", ""))) <= self.max_output_bytes:
                return out
            if out.get("output_type") == "stream":  # one huge message: keep its beginning
                out["text"] = out["text"][: self.max_output_bytes - size]
        if not outs or not is_cap_marker(outs[-1]):  # a display, so that no stream absorbs it
            outs.append(new_output("display_data", data={"text/plain": (
                f"{TRUNCATED}: this cell printed more than {self.max_output_bytes:,} bytes]")}))
        return None


def is_cap_marker(output) -> bool:
    """Whether ``output`` is the mark that a cell's output was cut at the cap."""
    return output.get("output_type") == "display_data" and \
        str(output.get("data", {}).get("text/plain", "")).startswith(TRUNCATED)


def _time_limited(cell) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") in TIME_LIMIT_ERRORS
               for o in cell.get("outputs", []))


def _lost_output(died: bool, timeout) -> dict:
    what = ("the kernel died while running this cell (os._exit, a crash, or out of memory)" if died
            else f"this cell ran past the time limit ({timeout} s) and did not stop when interrupted")
    return new_output("error", ename=KERNEL_DIED if died else UNSTOPPABLE,
                      evalue=what + "; a new kernel ran the cells above again and grading went on",
                      traceback=[f"{KERNEL_DIED if died else UNSTOPPABLE}: {what}"])


def _not_run_output(restarts: int) -> dict:
    why = f"not run: the kernel had to be restarted {restarts} times in this notebook"
    return new_output("error", ename="NotRun", evalue=why, traceback=[f"NotRun: {why}"])


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


def offline_feedback(page: Path) -> None:
    """Drop the scripts a feedback page would load from the network (nbgrader's template pulls
    MathJax from a CDN); formulas then show as their TeX source, everything else is unchanged."""
    text = page.read_text()
    cleaned = _REMOTE_SCRIPT.sub("", text)
    if cleaned != text:
        page.write_text(cleaned)


def configure(c: Config, root: str | Path) -> Config:
    """Apply the course's nbgrader settings to ``c`` for a course rooted at ``root``."""
    # nbgrader runs the `alembic` command of its own environment; make sure it is found even
    # when that environment's bin/ is not on PATH (e.g. `.venv/bin/python -m ...`).
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    c.CourseDirectory.root = str(Path(root).resolve())
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "notebooks"
    # The .py sources sit beside the built notebooks; students get notebooks only.
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.Execute.timeout = CELL_TIMEOUT_S
    # After a cell's reply (or its interrupt), the time allowed for its remaining output to
    # arrive. nbclient's 4 s is too short for a cell interrupted while flooding its output on a
    # busy machine: its kernel would be taken for stuck and replaced, losing the cell.
    c.Execute.iopub_timeout = IOPUB_TIMEOUT_S
    c.OverwriteCells.add_missing_cells = True
    c.Autograde.autograde_preprocessors = [
        GuardedExecute,
        StderrIsNotFailure,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveAutoGrades,
        AssignLatePenalties,
        CheckCellMetadata,
    ]
    c.GenerateFeedback.preprocessors = [
        GetGrades,
        ClearHiddenTests,
        StripGradeTracebacks,
        CSSHTMLHeaderPreprocessor,
    ]
    return c
