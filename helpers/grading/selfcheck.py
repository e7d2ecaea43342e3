"""Self-check: a learner working alone grades their own notebook exactly as an instructor would.

``make check LESSON=03_scaling`` (or ``python -m helpers.grading.selfcheck 03_scaling [NOTEBOOK]``)
grades the saved notebook ``notebooks/03_scaling/03_scaling.ipynb`` with the same hidden tests,
the same sandbox and the same feedback page as ``make grade``, in a course root of its own
(``.selfcheck/``, git-ignored), so an instructor's gradebook in ``grading/`` is never touched.
It prints the score of every graded cell, the mistake a failing check named, and the reason given
for every quiz and claim answered, then writes the feedback page next to the notebook
(``notebooks/03_scaling/feedback/03_scaling.html``, where JupyterLab's file browser shows it) and,
on a desktop, opens it. Neither the summary nor the page shows a hidden test's source.

Where the course's sources are absent — a class handed only ``notebooks/``, or the environment
students get on a class hub — there are no hidden tests to grade with, and it says that grading
is the instructor's (exit status 3). A failure of the grading machinery (no kernel, no sandbox)
stops with exit status 2 and the real error: it is never reported as a score.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
import webbrowser
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..paths import ROOT
from .execute import GradingMachineryError
from .mistakes import cell_errors, mistake_of

LEARNER = "you"  # the student id the self-check grades under, in its own course root
SELF_ROOT = ROOT / ".selfcheck"


class NoHiddenTests(RuntimeError):
    """This copy of the course has no lesson sources: grading is the instructor's."""


@dataclass
class CellResult:
    """One graded cell of the learner's notebook."""

    grade_id: str
    points: float
    max_points: float
    said: str = ""  # what the hidden tests said: the named mistake, or a quiz's reason

    @property
    def full(self) -> bool:
        return self.points >= self.max_points


@dataclass
class SelfCheck:
    """The outcome: a score per graded cell, the total and the feedback page."""

    lesson: str
    cells: list[CellResult] = field(default_factory=list)
    hand_graded: list[str] = field(default_factory=list)  # answers only a person can grade
    page: Path | None = None

    @property
    def score(self) -> float:
        return sum(c.points for c in self.cells)

    @property
    def max_score(self) -> float:
        return sum(c.max_points for c in self.cells)

    def lines(self) -> list[str]:
        out = [f"{self.lesson}: {self.score:g} of {self.max_score:g} points, graded as your instructor "
               "would (hidden tests on fresh inputs, in the sandbox)", ""]
        for c in self.cells:
            mark = "✓" if c.full else "✗"
            out.append(f"  {mark} {c.grade_id:<34} {c.points:g} / {c.max_points:g}")
            if c.said:
                out += [f"      {line}" for line in _wrap(c.said)]
        if self.hand_graded:
            out += ["", "Graded by hand, not here: " + ", ".join(self.hand_graded)
                    + " (the model answers are your instructor's)."]
        if self.page:
            out += ["", f"Feedback page: {self.page}"]
        return out


def _wrap(text: str, width: int = 96) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width) or [""]


def sources_present(lesson: str, root: Path = ROOT) -> bool:
    return (Path(root) / "solutions" / lesson / f"{lesson}.py").is_file()


def self_check(lesson: str, notebook: Path | None = None, root: Path = SELF_ROOT,
               sandboxed: bool = True) -> SelfCheck:
    """Grade ``notebook`` (default: the lesson's notebook in ``notebooks/``) as an instructor
    would, in the course root ``root``; the outcome, cell by cell.

    Raises ``NoHiddenTests`` where the course's sources are absent and ``GradingMachineryError``
    when grading itself cannot run."""
    from .autograde import grade_class

    if not sources_present(lesson):
        raise NoHiddenTests(
            f"This copy of the course has no hidden tests for {lesson} (there is no "
            f"solutions/{lesson}/{lesson}.py here), so grading is your instructor's. The check "
            "cell after each exercise still tells you whether your function is right.")
    notebook = Path(notebook or ROOT / "notebooks" / lesson / f"{lesson}.ipynb")
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook to check at {notebook}: save your work there, or name "
                                "the file: make check LESSON=... NOTEBOOK=path/to/file.ipynb")
    root = Path(root).resolve()
    shutil.rmtree(root / "autograded" / LEARNER / lesson, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="selfcheck-") as tmp:
        folder = Path(tmp) / LEARNER / lesson
        folder.mkdir(parents=True)
        shutil.copyfile(notebook, folder / f"{lesson}.ipynb")
        report = grade_class(lesson, Path(tmp), root=root, workers=1, sandboxed=sandboxed)
    if report.machinery:  # nothing was graded: say why, not that the learner's file is missing
        raise GradingMachineryError(f"grading could not run, so {notebook} was not graded: "
                                    f"{report.machinery}")
    if LEARNER in report.failed:
        raise ValueError(f"{notebook} could not be graded: {report.failed[LEARNER]}")
    outcome = read_outcome(lesson, root)
    if outcome.page:  # next to the notebook, where JupyterLab's file browser shows it
        beside = notebook.parent / "feedback" / f"{notebook.stem}.html"
        beside.parent.mkdir(exist_ok=True)
        shutil.copyfile(outcome.page, beside)
        outcome.page = beside
    return outcome


def read_outcome(lesson: str, root: Path) -> SelfCheck:
    """The learner's graded cells, from the gradebook and the autograded notebook in ``root``."""
    from .records import gradebook

    graded = root / "autograded" / LEARNER / lesson / f"{lesson}.ipynb"
    nb = nbformat.read(graded, as_version=4)
    errors = cell_errors(graded)
    outcome = SelfCheck(lesson)
    with gradebook(root) as gb:
        submission = gb.find_submission_notebook(lesson, lesson, LEARNER)
        scores = {g.name: (g.score, g.max_score, g.cell_type) for g in submission.grades}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if not meta.get("grade") or grade_id not in scores:
            continue
        score, max_score, kind = scores[grade_id]
        if kind == "markdown" or meta.get("solution"):
            outcome.hand_graded.append(grade_id)
            continue
        said = ""
        if grade_id in errors:
            ename, evalue = errors[grade_id]
            said = evalue if ename == "CheckFailed" else mistake_of(ename, evalue)
        else:
            said = _reason(cell)
        outcome.cells.append(CellResult(grade_id, float(score or 0), float(max_score), said))
    page = root / "feedback" / LEARNER / lesson / f"{lesson}.html"
    outcome.page = page if page.exists() else None
    return outcome


def _reason(cell) -> str:
    """A passing quiz cell's reason ("right — …"); nothing for a passing exercise."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")
    for line in text.splitlines():
        if "right — " in line:
            return line[line.index("right — "):].strip()
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade your own notebook as an instructor would.")
    parser.add_argument("lesson", help="e.g. 03_scaling")
    parser.add_argument("notebook", nargs="?", type=Path,
                        help="the notebook to grade (default: notebooks/LESSON/LESSON.ipynb)")
    parser.add_argument("--no-open", action="store_true", help="do not open the feedback page")
    args = parser.parse_args(argv)
    from .sandbox import private_process

    private_process()  # the learner's environment is theirs: no graded kernel reads it
    try:
        outcome = self_check(args.lesson, args.notebook)
    except NoHiddenTests as err:
        print(err)
        return 3
    except GradingMachineryError as err:
        print(f"GRADING COULD NOT RUN — this is not your score:\n{err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as err:
        print(err, file=sys.stderr)
        return 1
    print("\n".join(outcome.lines()))
    # a browser only where there is a screen: in a terminal on a server, a text browser would take
    # over the terminal; the page is next to the notebook, for JupyterLab's file browser
    if outcome.page and not args.no_open and (sys.platform == "darwin" or os.environ.get("DISPLAY")
                                              or os.environ.get("WAYLAND_DISPLAY")):
        webbrowser.open(outcome.page.as_uri())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
