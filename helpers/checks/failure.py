"""What a learner sees when a check fails.

Help comes in steps. The message names the mistake and says why it is wrong; the first
``hint()`` after a failure gives the idea to think about or where to look
(``ideas.IDEAS``), and only a second ``hint()`` (or ``hint(2)``) gives the fix — the line to
write, the recipe. In IPython and Jupyter a failure shows the
learner's cells and functions only, never the checks' own code; when the learner's function
raised inside a check, its own frames and error are shown, with one line that says which call
of the check raised it; an untouched stub shows the check's cell and the stub's ``raise`` line.
nbgrader records the message itself as the error's value, the mistake first: a message written
"<what> (context): <diagnosis>" is shown as "<diagnosis>", then "checked: <what> (context)" on
the next line, so that even a display that cuts lines short (``nbgrader validate`` keeps about 70
characters of each) shows the named mistake.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from ..failure_text import mistake_first

HINT_LINE = "\n  call hint() for a hint, and again for the fix"
# Frames of these files are the checks' own machinery: a learner never needs to read them.
_HERE = Path(__file__).resolve().parent
_CHECKER_FILES = (str(_HERE) + os.sep, str(_HERE.parent / "quiz.py"))


class CheckFailed(AssertionError):
    """A check found a wrong result: the message names the likely mistake and why it is wrong.

    ``fix`` says how to put it right; it is not part of the message (``hint()`` prints it).
    ``crash`` is the learner's own exception when their function raised inside the check, and
    ``note`` says which of the check's calls raised it.
    """

    def __init__(self, message: str, fix: str = "", crash: BaseException | None = None, note: str = ""):
        super().__init__(mistake_first(message) + (HINT_LINE if fix else ""))
        self.message, self.fix, self.crash, self.note = message, fix, crash, note
        self.exercise = ""  # set by the check that raised it (``hinted``)
        self.idea_shown = False  # hint() has given its first step (the idea) for this failure

    def _render_traceback_(self) -> list[str]:
        """What IPython and Jupyter show: the learner's frames and the message, no checker frames.

        When the learner's function raised, its own frames and error come first, then one line
        that says on which of the check's inputs.
        """
        try:
            return _render(self)
        except Exception:  # never lose the message over the way it is shown
            return [f"{type(self).__name__}: {self}"]


def _visible(tb: TracebackType | None) -> list[TracebackType]:
    """The entries of ``tb`` a learner should see: not the checks' own, not IPython's."""
    import IPython

    ipython = str(Path(IPython.__file__).resolve().parent) + os.sep
    hidden = (*_CHECKER_FILES, ipython)
    entries = []
    while tb is not None:
        filename = str(Path(tb.tb_frame.f_code.co_filename).resolve())
        if not filename.startswith(hidden):
            entries.append(tb)
        tb = tb.tb_next
    return entries


def _chain(entries: list[TracebackType]) -> TracebackType | None:
    """A new traceback made of ``entries``, outermost first."""
    tb = None
    for entry in reversed(entries):
        tb = TracebackType(tb, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return tb


def _render(err: CheckFailed) -> list[str]:
    from IPython import get_ipython

    shell = get_ipython()
    entries = _visible(err.__traceback__)
    if err.crash is not None:
        shown = err.crash
        entries += _visible(err.crash.__traceback__)
    else:
        shown = err
        err.__cause__, err.__suppress_context__ = None, True  # the check's own inner errors stay hidden
    tb = _chain(entries)
    if shell is not None:
        lines = shell.InteractiveTB.structured_traceback(type(shown), shown, tb, tb_offset=0)
    else:
        lines = traceback.format_exception(type(shown), shown, tb)
    if err.crash is not None:
        by = f"check_{err.exercise}" if err.exercise else "the check"
        lines.append(f"(raised while {by} called {err.note})" + (HINT_LINE if err.fix else ""))
    return lines


def show_stub(err: NotImplementedError) -> NotImplementedError:
    """Let IPython show an unfinished exercise (its stub raises ``NotImplementedError``) by the
    learner's own lines only: the cell that ran the check and the stub's ``raise`` line.

    The error keeps its type, so nbgrader and the release checks still see a ``NotImplementedError``.
    """
    err._render_traceback_ = functools.partial(_render_stub, err)
    return err


def _render_stub(err: NotImplementedError) -> list[str]:
    try:
        from IPython import get_ipython

        shell, tb = get_ipython(), _chain(_visible(err.__traceback__))
        if shell is not None:
            return shell.InteractiveTB.structured_traceback(type(err), err, tb, tb_offset=0)
        return traceback.format_exception(type(err), err, tb)
    except Exception:  # never lose the error over the way it is shown
        return [f"{type(err).__name__}: {err}"]


# The last failure of each exercise's check, the most recent last: what ``hint()`` explains.
_FAILURES: dict[str, CheckFailed] = {}


def hinted(check: Callable) -> Callable:
    """Decorate a ``check_<exercise>``: when it fails, ``hint()`` can give the fix; when it passes,
    there is nothing left to hint for that exercise."""
    exercise = check.__name__.removeprefix("check_")

    @functools.wraps(check)
    def checked(*args, **kwargs):
        try:
            result = check(*args, **kwargs)
        except NotImplementedError as err:  # the exercise is not done yet: show the learner's stub
            show_stub(err)
            raise
        except CheckFailed as err:
            err.exercise = err.exercise or exercise
            _FAILURES.pop(exercise, None)
            _FAILURES[exercise] = err
            raise
        _FAILURES.pop(exercise, None)
        return result

    return checked


def hint(exercise: str | int | None = None, stage: int | None = None) -> None:
    """Help with what the last failing check found — or, given an exercise's name
    (``hint("masked_attention")``), what its check found last.

    The first call gives the idea to think about or where to look; the next call (or ``hint(2)``,
    ``hint("masked_attention", 2)``) gives the fix."""
    from .ideas import IDEAS

    if isinstance(exercise, int):
        exercise, stage = None, exercise
    if exercise is not None:
        exercise = exercise.removeprefix("check_").removesuffix("_tests")
        err = _FAILURES.get(exercise)
        if err is None:
            print(f"check_{exercise} has not failed since the kernel started (or it passes now): "
                  "nothing to hint.")
            return
    elif _FAILURES:
        exercise, err = list(_FAILURES.items())[-1]
    else:
        print("No check has failed since the kernel started (or they all pass now): nothing to hint.")
        return
    print(f"check_{exercise} said: {err.message}")
    idea = IDEAS.get(exercise)
    if idea and err.fix and stage != 2 and not err.idea_shown:
        err.idea_shown = True  # the next hint() for this failure gives the fix
        print(f"\nA hint: {idea}\n\n(Stuck? Call hint() again for the fix.)")
    elif err.fix:
        print(f"\nHow to fix it: {err.fix}")
    else:
        print("\nThere is no more to add: compare what the message describes with the exercise's "
              "instructions.")
