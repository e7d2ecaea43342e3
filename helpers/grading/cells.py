"""The cells of a lesson's notebooks as grading reads them: nbgrader's metadata, an answer's text
with whitespace aside, which answers each grade cell grades, and which answers changed."""

from __future__ import annotations

from pathlib import Path

import nbformat

from ..paths import ROOT


def load(nb: nbformat.NotebookNode | Path | str) -> nbformat.NotebookNode:
    """A notebook, read from ``nb`` unless it is one already."""
    return nb if isinstance(nb, nbformat.NotebookNode) else nbformat.read(str(nb), as_version=4)


def nbgrader_meta(cell) -> dict:
    """The cell's nbgrader metadata ({} for a cell nbgrader does not know)."""
    return cell.get("metadata", {}).get("nbgrader") or {}


def squash(cell) -> str:
    """The cell's source with all whitespace removed: two answers that differ only in spacing agree."""
    src = cell.get("source", "")
    return "".join(("".join(src) if isinstance(src, list) else str(src)).split())


def exercises(released_nb: nbformat.NotebookNode | Path) -> dict[str, list[str]]:
    """grade cell -> the solution cells it grades: the cell itself if it is one, else those since
    the previous grade cell (or, when there are none, the same ones as the previous grade cell)."""
    found, pending, last = {}, [], []
    for cell in load(released_nb).cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if not gid:
            continue
        if meta.get("grade"):
            found[gid] = [gid] if meta.get("solution") else (pending or last)
            last, pending = found[gid], []
        elif meta.get("solution"):
            pending.append(gid)
    return found


def changed_answers(lesson: str, before: Path, after: Path, cells) -> list[str]:
    """Of the grade cells ``cells``, those whose answer differs between two graded copies of a
    submission (whitespace aside). The answer of a grade cell is its own text when the learner
    writes in it (a free-text answer), else the answer cells it grades. Without the earlier copy
    no answer can be shown unchanged: every one counts as changed."""
    if not cells:
        return []
    if not Path(before).exists():
        return sorted(cells)
    graded_by = exercises(ROOT / "notebooks" / lesson / f"{lesson}.ipynb")

    def texts(path):
        cells = load(path).cells
        return {nbgrader_meta(c)["grade_id"]: squash(c) for c in cells if nbgrader_meta(c).get("grade_id")}

    old, new = texts(before), texts(after)
    return sorted(cell for cell in cells
                  if any(old.get(answer) != new.get(answer) for answer in graded_by.get(cell, [cell])))
