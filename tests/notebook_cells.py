"""Run code the way a notebook does, without a kernel: in one shared namespace.

A function defined in a notebook looks up the names it calls in the notebook's namespace
(its ``__globals__``); these helpers build such namespaces for the tests of the checks and of
the grade cells.
"""

from __future__ import annotations

import textwrap

from tooling.build import solution_notebook


def notebook(source: str, **names) -> dict:
    """The namespace of a notebook whose cells ran ``source`` after ``names`` were defined."""
    namespace = {"__name__": "__main__", **names}
    exec(textwrap.dedent(source), namespace)
    return namespace


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def lesson_namespace(lesson: str) -> dict:
    """A lesson's setup cell and every solution cell run, as a learner's kernel holds them before
    the grade cells; the demos, figures and experiments between them are left out."""
    namespace = {"__name__": "__main__"}
    for cell in solution_notebook(lesson).cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and (meta.get("grade_id") == "setup"
                                         or (meta.get("solution") and not meta.get("grade"))):
            exec(cell.source, namespace)
    return namespace


def grade_cell(lesson: str, grade_id: str) -> str:
    """The full source of a grade cell, hidden tests included."""
    for cell in solution_notebook(lesson).cells:
        if _nbgrader(cell).get("grade_id") == grade_id:
            return cell.source
    raise KeyError(f"{lesson} has no cell {grade_id}")
