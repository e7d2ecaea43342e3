"""What a lesson's hidden tests need, and how to tell their own failures from the learner's.

- ``imports`` lists every import statement of a lesson's grade cells (hidden tests included),
  from the lesson source and from the copy recorded in the gradebook (the one grading runs):
  the preflight runs them all in a graded kernel before any score is touched.
- ``own_failures`` finds the grade cells of an autograded notebook that failed on a line of
  their own code that does not depend on the learner's answer — an import of the hidden tests,
  a name the course provides, a library call on the tests' own data. No answer can cause or
  fix such a failure: when several submissions fail that way, grading stops as a machinery
  failure, and the class's mistakes table never counts it as a learner's mistake.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import nbformat

from .cells import nbgrader_meta
from .execute import KERNEL_DIED, TIME_LIMIT_ERRORS

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_FRAME = re.compile(r"^\s*Cell In\s*\[(\d+)\],\s*line (\d+)")
_FILE_FRAME = re.compile(r"^\s*File [^\n]*:\d+")
_MAGIC = re.compile(r"^\s*[%!]")
# Errors in which a test passes judgement on the answer, and those of the cell's limits (time,
# memory, a kernel lost to what an answer did): never the tests' own failure.
JUDGEMENTS = ("AssertionError", "CheckFailed", "NotImplementedError")
LIMITS = (*TIME_LIMIT_ERRORS, KERNEL_DIED, "NotRun", "MemoryError")


def _tree(source: str) -> ast.Module | None:
    """The cell's syntax tree, IPython magics and shell lines left out; None if it does not parse."""
    text = "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


# ------------------------------------------------------------------ what the hidden tests import


def cell_imports(source: str) -> list[str]:
    """The import statements of one cell, as code, in order (relative imports left out)."""
    tree = _tree(source)
    if tree is None:  # keep the lines that read as imports
        return [line.split("#")[0].strip() for line in source.splitlines()
                if re.match(r"\s*(import|from)\s+[\w.]+", line) and "(" not in line]
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
             and not (isinstance(node, ast.ImportFrom) and node.level)]
    return [ast.unparse(node) for node in sorted(found, key=lambda n: n.lineno)]


def imports(lesson: str, root: Path | None = None) -> dict[str, list[str]]:
    """import statement -> the grade cells that make it, over the lesson's grade cells in its
    source (``solutions/``) and, when ``root``'s gradebook has recorded the lesson, there."""
    from tooling.build import solution_notebook

    cells = [(nbgrader_meta(c)["grade_id"], c.source) for c in solution_notebook(lesson).cells
             if c.cell_type == "code" and nbgrader_meta(c).get("grade")]
    if root is not None and (Path(root) / "gradebook.db").exists():
        cells += _recorded_grade_cells(lesson, Path(root))
    found: dict[str, list[str]] = {}
    for grade_id, source in cells:
        for statement in cell_imports(source):
            found.setdefault(statement, [])
            if grade_id not in found[statement]:
                found[statement].append(grade_id)
    return found


def _recorded_grade_cells(lesson: str, root: Path) -> list[tuple[str, str]]:
    """(grade_id, source) of the lesson's code grade cells as the gradebook recorded them."""
    from nbgrader.api import MissingEntry

    from .records import gradebook

    with gradebook(root) as gb:
        try:
            notebook = gb.find_notebook(lesson, lesson)
        except MissingEntry:
            return []
        return [(c.name, c.source or "") for c in notebook.source_cells
                if c.cell_type == "code" and c.name in {g.name for g in notebook.grade_cells}]


# ------------------------------------------------------------------ the tests' own failures


@lru_cache(maxsize=32)
def learner_names(lesson: str) -> frozenset[str]:
    """Names the learner's answers define: what the lesson's solution cells bind."""
    from tooling.build import solution_notebook

    names: set[str] = set()
    for cell in solution_notebook(lesson).cells:
        if cell.cell_type == "code" and nbgrader_meta(cell).get("solution"):
            tree = _tree(cell.source)
            if tree is not None:
                names |= _bound(tree.body)
    return frozenset(names)


def _bound(body) -> set[str]:
    """Names a list of top-level statements binds."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Store)}
    return names


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _tainted(tree: ast.Module, learner: frozenset[str]) -> set[str]:
    """The learner's names and every name the cell computes from them, directly or not."""
    tainted = set(learner)
    flows = []  # (names read, names written) of each binding in the cell
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            flows.append((_names(node.value), set().union(*(_names(t) for t in node.targets))))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            flows.append((_names(node.value) | _names(node.target), _names(node.target)))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            flows.append((_names(node.iter), _names(node.target)))
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                flows.append((_names(item.context_expr), _names(item.optional_vars)))
        elif isinstance(node, ast.NamedExpr):
            flows.append((_names(node.value), _names(node.target)))
    changed = True
    while changed:
        changed = False
        for read, written in flows:
            if read & tainted and not written <= tainted:
                tainted |= written
                changed = True
    return tainted


def _statement_at(tree: ast.Module, line: int):
    """The innermost statement that spans ``line`` of the cell."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno):
                best = node
    return best


def _read_on(statement) -> set[str]:
    """Names a statement reads, leaving out the statements nested in its bodies."""
    nested = {id(s) for field in ("body", "orelse", "finalbody", "handlers")
              for s in getattr(statement, field, []) or []}
    names: set[str] = set()
    todo = [statement]
    while todo:
        node = todo.pop()
        if id(node) in nested:
            continue
        if isinstance(node, ast.Name):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def failing_frame(traceback: list[str]) -> tuple[int, int] | None:
    """(execution count, line) of the innermost frame when it is a notebook cell's code."""
    last = None
    for entry in traceback:
        text = _ANSI.sub("", entry)
        cell = _CELL_FRAME.match(text)
        if cell:
            last = (int(cell.group(1)), int(cell.group(2)))
        elif _FILE_FRAME.match(text):
            last = None  # the innermost frame so far is in a module, not in a cell
    return last


@dataclass(frozen=True)
class OwnFailure:
    """A grade cell's failure on a line of its own: where, and what was raised."""

    line: int
    statement: str
    ename: str
    evalue: str

    @property
    def key(self) -> tuple[str, str, str]:
        """The same for every submission that failed this way, in whichever cell."""
        return self.statement, self.ename, self.evalue

    def __str__(self) -> str:
        return f"`{self.statement}` raised {self.ename}: {self.evalue}"


def own_failure(cell, learner: frozenset[str]) -> OwnFailure | None:
    """How a grade cell failed on a line of its own that no answer affects, or None.

    The error's innermost frame must be the grade cell itself (not the learner's function, not a
    check), the error not a judgement (a failed assertion or check), and the failing statement
    must read none of the learner's names nor anything the cell computed from them.
    """
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if cell.get("cell_type") != "code" or not nbgrader_meta(cell).get("grade") or not errors:
        return None
    error = errors[-1]
    if error.get("ename") in JUDGEMENTS + LIMITS:
        return None
    frame = failing_frame(error.get("traceback") or [])
    if frame is None or frame[0] != cell.get("execution_count"):
        return None
    tree = _tree(cell.source)
    statement = _statement_at(tree, frame[1]) if tree is not None else None
    if statement is None or _read_on(statement) & _tainted(tree, learner):
        return None
    lines = cell.source.splitlines()
    text = lines[frame[1] - 1] if frame[1] <= len(lines) else ""
    text = re.sub(r"\s+#.*$", "", text).strip()  # the code, without its comment
    return OwnFailure(frame[1], text, str(error.get("ename")),
                      " ".join(str(error.get("evalue", "")).split())[:200])


def own_failures(autograded: Path | nbformat.NotebookNode, lesson: str) -> dict[str, OwnFailure]:
    """grade_id -> how, for the grade cells of an autograded notebook that failed on their own."""
    nb = autograded if isinstance(autograded, nbformat.NotebookNode) else \
        nbformat.read(str(autograded), as_version=4)
    learner = learner_names(lesson)
    found = {}
    for cell in nb.cells:
        failure = own_failure(cell, learner)
        if failure:
            found[nbgrader_meta(cell).get("grade_id", "?")] = failure
    return found


def ran_without_error(autograded: nbformat.NotebookNode, statement: str) -> bool:
    """Whether a grade cell containing ``statement`` ran to its end in this notebook."""
    return any(cell.cell_type == "code" and nbgrader_meta(cell).get("grade") and statement in cell.source
               and cell.get("outputs") is not None
               and not any(o.get("output_type") == "error" for o in cell.outputs)
               and cell.get("execution_count") is not None
               for cell in autograded.cells)
