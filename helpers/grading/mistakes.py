"""What a class got wrong: one label per failed grade cell, counted over the class.

A failing check names the likely mistake in its message, "<what> (context): <diagnosis> — <why>",
shown diagnosis first (``helpers.failure_text.mistake_first``)
(how to fix it is kept for ``hint()``; the message only says that it is there).
``mistake_of`` reduces such a message to its diagnosis without the numbers of the random
inputs, so that two students who made the same mistake get the same label. ``class_tables``
puts every student of the class in exactly one column per grade cell (full, partial, wrong,
blank, by hand, unreadable, zeroed, not graded) and counts the mistakes of the graded ones;
``write_class_report`` writes both tables as CSV and the mistakes as a bar chart.
"""

from __future__ import annotations

import csv
import re
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from ..failure_text import as_written, split_what, top_level
from .cells import exercises, load, nbgrader_meta, squash
from .execute import KERNEL_DIED, TIME_LIMIT_ERRORS
from .hidden_tests import own_failures
from .records import COURSE_ID

if TYPE_CHECKING:
    from matplotlib.axes import Axes

NOT_ATTEMPTED = "not attempted"
GENERIC = "wrong values (no known mistake matched)"
TIME_LIMIT = "stopped at the time limit"
DIED = "kernel died"
NOT_RUN = "not run: the kernel was restarted too often"
WRONG_SHAPE = "wrong shape"
WRONG_CHOICE = "wrong answer"
STATUSES = ("graded", "unreadable", "zeroed", "not graded")
COLUMNS = ("full", "partial", "wrong", "blank", "by hand", "unreadable", "zeroed", "not graded")
MAX_LABEL = 100  # characters; longer diagnoses are cut at a word

_CRASH = re.compile(r" raised ([A-Z][\w.]*): ")
_SHAPE = re.compile(r"\bha(?:s|ve) shape \([^()]*\),? expected\b")
_GOT_VALUE = re.compile(r"[)\]] = [^:]*\bexpected\b")  # "f(n) = 0.04, expected 0.041": no diagnosis
_QUIZ_FORMAT = re.compile(r"must be (one letter out of|True or False)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FIX = re.compile(r" [—–] |; |: |\n|\.\s+(?=[A-Z])")  # where a diagnosis ends and its fix begins
_COLON = re.compile(r": ")
# Numbers that come from the random inputs of one run: seeds, sizes, shapes, indices, values.
_NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_VALUE = rf"(?:{_NUM}|\[[^\]]*\]|\((?:\s*{_NUM}\s*,?)+\))(?![\w·^/])"
_RUN_NUMBERS = [
    re.compile(rf",?\s*\b(?:of |has |have )?shape\s*\((?:\s*{_NUM}\s*,?)*\)"),  # shape (5, 3)
    re.compile(r"\s*\((?=[^()]*(?:\d\.\d|\w\s*=\s*-?\d))[^()]*\)"),  # (seed=3, n=4), (about d_k = 64)
    re.compile(rf"(?:\b\w+\s*)?=\s*{_VALUE}"),  # seed=7, n_q = 3, positions=[4, 1], = 0.167
    re.compile(rf"[(\[]\s*{_NUM}(?:\s*,\s*{_NUM})*\s*,?\s*[)\]]"),  # (5, 3), [5, 5, 4]
    re.compile(r"\b\d+(?:\.\d+)?\s*(?:[KMG]i?B|bytes)\b"),  # 428 KiB
    re.compile(r"(?<![\w^/.·])-?\d+\.\d+(?:[eE][+-]?\d+)?(?![\w/·])"),  # 0.737
]


# ------------------------------------------------------------------ one failed cell


def mistake_of(ename: str, evalue: str) -> str:
    """A short label of the mistake a failed grade cell names, the same for every student who made it."""
    if ename == "NotImplementedError":
        return NOT_ATTEMPTED
    if ename in TIME_LIMIT_ERRORS:
        return TIME_LIMIT
    if ename == KERNEL_DIED:
        return DIED
    if ename == "NotRun":
        return NOT_RUN
    if ename not in ("CheckFailed", "AssertionError"):
        return f"raised {ename}"  # the learner's code crashed outside a check
    text = as_written(_ANSI.sub("", str(evalue)).strip())
    if not text:
        return "a hidden test failed"
    first = text.splitlines()[0]
    crash = _CRASH.search(first)
    if crash:
        return f"raised {crash.group(1)}"
    if first.startswith("code in this notebook replaced"):
        return "replaced functions the checks rely on"
    if first.startswith("not quite"):
        return WRONG_CHOICE
    if _QUIZ_FORMAT.search(first):
        return "answer not in the expected format"
    if " differs from the reference" in first or "\n  hint: " in text:
        return GENERIC  # no known mistake matched (older checks then added "hint:" to the message)
    if " contains NaN or inf " in first:
        return "NaN or inf where the result is finite"
    if _SHAPE.search(first):
        return WRONG_SHAPE
    prefix, rest = split_what(text)
    if prefix is None and _GOT_VALUE.search(first):
        return GENERIC
    diagnosis = ""
    while rest and not re.search(r"[^\W\d_]{3,}", diagnosis):
        end = top_level(rest, _FIX)
        diagnosis = _clean(rest if end < 0 else rest[:end])
        rest = rest[end + 2:] if end >= 0 and _COLON.match(rest, end) else ""
    if prefix is not None and not re.search(r"[^\W\d_]{3,}", diagnosis):
        diagnosis = _clean(prefix)  # "f(x) must return an int, got str: '197'"
    return _shorten(diagnosis) or _shorten(_clean(first)) or "a check failed"


def _clean(text: str) -> str:
    """``text`` without the numbers of one run, on one line."""
    text = re.sub(r",\s*expected\b.*$", "", " ".join(text.split()))
    for pattern in _RUN_NUMBERS:
        text = pattern.sub("", text)
    text = re.sub(r"\(\s*(?:,\s*)+", "(", text)
    text = re.sub(r"(?:\s*,)+\s*\)", ")", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    text = re.sub(r"\s+([,;:)]|\.(?=\s|$))", r"\1", re.sub(r"\s{2,}", " ", text))
    text = re.sub(r",(?:\s*,)+", ",", text)
    return text.strip(" ,;:.")


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_LABEL else textwrap.shorten(text, MAX_LABEL, placeholder=" …")


# ------------------------------------------------------------------ blank submissions


def blank_cells(submitted_nb: nbformat.NotebookNode | Path,
                released_nb: nbformat.NotebookNode | Path) -> set[str]:
    """grade_ids of the solution cells left as released (whitespace aside; a deleted cell counts)."""
    released = {nbgrader_meta(c)["grade_id"]: squash(c) for c in load(released_nb).cells
                if nbgrader_meta(c).get("solution") and nbgrader_meta(c).get("grade_id")}
    changed = {nbgrader_meta(c).get("grade_id") for c in load(submitted_nb).cells
               if nbgrader_meta(c).get("grade_id") in released
               and squash(c) != released[nbgrader_meta(c)["grade_id"]]}
    return set(released) - changed


def is_blank(submitted_nb: nbformat.NotebookNode | Path, released_nb: nbformat.NotebookNode | Path) -> bool:
    """Whether every solution cell of the submission is as released."""
    released = load(released_nb)
    solutions = {nbgrader_meta(c).get("grade_id") for c in released.cells if nbgrader_meta(c).get("solution")}
    return bool(solutions) and blank_cells(submitted_nb, released) == solutions


def cell_errors(path: Path) -> dict[str, tuple[str, str]]:
    """grade_id -> (ename, evalue) of the error a grade cell of an autograded notebook ended with."""
    errors = {}
    for cell in load(path).cells if Path(path).exists() else []:
        outs = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        gid = nbgrader_meta(cell).get("grade_id")
        if gid and nbgrader_meta(cell).get("grade") and outs:
            errors[gid] = (str(outs[-1].get("ename", "")), str(outs[-1].get("evalue", "")))
    return errors


# ------------------------------------------------------------------ the class


def class_tables(root: Path, lesson: str, status: dict[str, str],
                 released: Path) -> tuple[list[dict], list[dict]]:
    """Per grade cell: how many students fall in each column, and which mistakes the graded made.

    ``status``: student -> "graded", "unreadable", "zeroed" or "not graded". Returns
    (summary rows, mistake rows); every student is counted once in each summary row.
    """
    from nbgrader.api import Gradebook, MissingEntry

    unknown = {s: v for s, v in status.items() if v not in STATUSES}
    if unknown:
        raise ValueError(f"unknown status {unknown}; expected one of {', '.join(STATUSES)}")
    root = Path(root)
    released_nb = load(released)
    graded_by = exercises(released_nb)
    order = {gid: i for i, gid in enumerate(graded_by)}
    summary: list[dict] = []
    who: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    if not (root / "gradebook.db").exists():
        return summary, []  # nothing recorded yet; opening the gradebook would create one
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        try:
            cells = sorted(gb.find_notebook(lesson, lesson).grade_cells,
                           key=lambda c: (order.get(c.name, len(order)), c.name))
        except MissingEntry:
            cells = []
        per_student = {s: _student_view(root, lesson, s, released_nb) for s, v in status.items()
                       if v == "graded"}
        for cell in cells:
            row = {"grade_cell": cell.name, "points": cell.max_score, "kind": cell.cell_type,
                   **dict.fromkeys(COLUMNS, 0)}
            for student in sorted(status):
                column, label = _place(gb, lesson, cell, student, status[student],
                                       per_student.get(student), graded_by.get(cell.name, []))
                row[column] += 1
                if label:
                    who[cell.name][label].append(student)
            summary.append(row)
    mistakes = [{"grade_cell": cell, "mistake": label, "students_count": len(students),
                 "students": " ".join(students)}
                for cell in who
                for label, students in sorted(who[cell].items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return summary, mistakes


def _student_view(root: Path, lesson: str, student: str, released_nb) -> dict:
    """What the report needs of one graded submission: its blank cells and its cells' errors."""
    submitted = root / "submitted" / student / lesson / f"{lesson}.ipynb"
    try:
        blanks = blank_cells(submitted, released_nb) if submitted.exists() else set()
        whole = bool(blanks) and is_blank(submitted, released_nb)
    except Exception:  # a graded notebook that no longer reads is not blank
        blanks, whole = set(), False
    autograded = root / "autograded" / student / lesson / f"{lesson}.ipynb"
    try:
        errors = cell_errors(autograded)
        own = set(own_failures(autograded, lesson)) if autograded.exists() else set()
    except Exception:  # without the executed notebook the scores still count, unlabelled
        errors, own = {}, set()
    return {"blank": blanks, "whole": whole, "errors": errors, "own": own}


def _place(gb, lesson: str, cell, student: str, status: str, view: dict | None,
           solutions: list[str]) -> tuple[str, str | None]:
    """(column, mistake label or None) of one student in one grade cell's row."""
    from nbgrader.api import MissingEntry

    if status != "graded":
        return status, None
    if view["whole"]:
        return "blank", NOT_ATTEMPTED
    try:
        grade = gb.find_grade(cell.name, lesson, lesson, student)
    except MissingEntry:
        return "not graded", None
    # Grade.score reads 0 when neither score is set yet; a manual score overrides the automatic one.
    score = grade.manual_score if grade.manual_score is not None else grade.auto_score
    if score is not None:
        score += grade.extra_credit or 0.0
    if score is not None and score >= cell.max_score:
        return "full", None  # even from a function written outside its solution cell
    error = view["errors"].get(cell.name)
    if (solutions and set(solutions) <= view["blank"]) or (error and error[0] == "NotImplementedError"):
        return "blank", NOT_ATTEMPTED
    if score is None:
        return "by hand", None
    if cell.name in view["own"]:
        return "not graded", None  # the hidden tests failed on a line of their own, not the learner
    if error is not None:
        label = mistake_of(*error)
    elif cell.cell_type == "markdown":
        label = "marked down by hand"
    else:
        label = "partial credit" if score > 0 else "scored 0 without an error"
    return ("partial" if score > 0 else "wrong"), label


def mistakes_lines(tables: tuple[list[dict], list[dict]], top: int = 3) -> list[str]:
    """One console line per grade cell with mistakes: its ``top`` most common, with counts."""
    by_cell: dict[str, list[dict]] = defaultdict(list)
    for row in tables[1]:
        by_cell[row["grade_cell"]].append(row)
    return [f"{cell}: " + ", ".join(f"{r['students_count']} {r['mistake']}" for r in rows[:top])
            + (f" (+{len(rows) - top} more)" if len(rows) > top else "")
            for cell, rows in by_cell.items()]


# ------------------------------------------------------------------ files


def plot_mistakes(mistakes: list[dict], title: str = "", ax: Axes | None = None, width: int = 44) -> Axes:
    """Horizontal bars: for each grade cell with mistakes, how many students made each one."""
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(10, _height(mistakes, width)), layout="constrained")[1]
    if not mistakes:
        ax.text(0.5, 0.5, "no mistakes to show: every graded answer was right,\n"
                "or no submission was graded", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        ax.set_title(title)
        return ax
    cells = list(dict.fromkeys(r["grade_cell"] for r in mistakes))
    y, ticks, labels, most = 0.0, [], [], max(r["students_count"] for r in mistakes)
    for cell in cells:
        ax.axhline(y - 0.3, color="0.8", lw=0.8)
        ax.text(0, y, f" {cell}", weight="bold", va="center", ha="left")
        y += 1.0
        rows = [r for r in mistakes if r["grade_cell"] == cell]
        for r in sorted(rows, key=lambda r: r["mistake"] == NOT_ATTEMPTED):  # blanks last, in grey
            text = textwrap.fill(r["mistake"], width)
            lines = text.count("\n") + 1
            y += 0.28 * (lines - 1)
            grey = r["mistake"] == NOT_ATTEMPTED
            ax.barh(y, r["students_count"], height=0.7, color="0.75" if grey else "tab:red")
            ax.text(r["students_count"] + most * 0.01, y, str(r["students_count"]), va="center")
            ticks.append(y)
            labels.append(text)
            y += 1.0 + 0.28 * (lines - 1)
    ax.set_yticks(ticks, labels, fontsize=9)
    ax.set_ylim(y - 0.4, -0.7)
    ax.set_xlim(0, most * 1.08 + 0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("students")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title)
    return ax


def _height(mistakes: list[dict], width: int) -> float:
    """Figure height in inches that keeps every wrapped label readable at 100 % zoom."""
    lines = sum(textwrap.fill(r["mistake"], width).count("\n") + 1 for r in mistakes)
    return min(2.0 + 0.32 * (lines + len({r["grade_cell"] for r in mistakes})), 60.0) if mistakes else 2.5


def write_class_report(root: Path, lesson: str, status: dict[str, str], released: Path,
                       tables: tuple[list[dict], list[dict]] | None = None) -> dict[str, Path]:
    """``summary_<lesson>.csv``, ``mistakes_<lesson>.csv`` and ``mistakes_<lesson>.png`` in ``root``,
    from ``tables`` when the caller has already made them with ``class_tables``."""
    from matplotlib.figure import Figure

    root = Path(root)
    summary, mistakes = tables or class_tables(root, lesson, status, released)
    paths = {"summary": root / f"summary_{lesson}.csv", "mistakes": root / f"mistakes_{lesson}.csv",
             "chart": root / f"mistakes_{lesson}.png"}
    _write_csv(paths["summary"], ["grade_cell", "points", "kind", *COLUMNS], summary)
    _write_csv(paths["mistakes"], ["grade_cell", "mistake", "students_count", "students"], mistakes)
    graded = sum(v == "graded" for v in status.values())
    fig = Figure(figsize=(10, _height(mistakes, 44)), layout="constrained")
    plot_mistakes(mistakes, f"{lesson}: mistakes in a class of {len(status)} ({graded} graded)",
                  ax=fig.subplots())
    fig.savefig(paths["chart"], dpi=100)
    return paths


def _write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
