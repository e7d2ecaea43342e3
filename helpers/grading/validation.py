"""What ``nbgrader validate`` and JupyterLab's Validate button say about a course notebook.

nbgrader's own defaults would stop each cell after 30 s (grading allows 300 s), pass a notebook
whose slow or endless cell was stopped, and fail one whose correct answer printed a warning
(grading does not). With these settings validation runs like grading: the same per-cell limit;
any cell that raised an error or was stopped at the limit is a failure, listed with its error;
text on stderr is not (the course's helpers send it to stdout while validating, see
``helpers/__init__.py``).

Applied by the instructors' ``nbgrader_config.py`` (through ``settings.configure``), by the
learner's ``make lab`` and by the class hub's student settings (``hub/classhub.py``), which
load it in the Jupyter server: it imports nothing but the standard library.
"""

from __future__ import annotations

# Generous per-cell limit: a grade cell may train a small model for a few seconds.
CELL_TIMEOUT_S = 300
# After a cell's reply (or its interrupt), the time allowed for its remaining output to arrive.
IOPUB_TIMEOUT_S = 20
# nbgrader validate shows about 70 characters of each line: what happened comes first.
TIME_LIMIT = f"stopped at the course's limit of {CELL_TIMEOUT_S} s per cell"
TIME_LIMIT_WHY = "grading stops it too: a loop that never ends, or far more work than asked?"
FAILED_WARNING = (
    "VALIDATION FAILED ON {num_failed} CELL(S): a check did not pass, a cell raised an error, or "
    f"a cell ran past the limit of {CELL_TIMEOUT_S} s and was stopped. Each one is shown below "
    "with its error; fix them and validate again before you hand in.\n")


def configure_validation(c) -> None:
    """Set ``c`` (an nbgrader config) to validate as the course grades."""
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.iopub_timeout = IOPUB_TIMEOUT_S
    c.Execute.error_on_timeout = {"ename": "CellTimeoutError", "evalue": f"{TIME_LIMIT}; {TIME_LIMIT_WHY}",
                                  "traceback": [f"CellTimeoutError: {TIME_LIMIT}", f"  {TIME_LIMIT_WHY}"]}
    c.Validator.validate_all = True
    c.Validator.failed_warning = FAILED_WARNING
