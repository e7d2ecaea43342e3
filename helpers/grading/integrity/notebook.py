"""Scanning whole submissions: each cell of a student's notebook is matched to the released one,
locked cells are only compared (nbgrader restores them), every cell a student can edit is scanned
in the namespace the grade cells will run in, and a class is scanned student by student. When the
graded notebook is given too, what its code displayed at grading time is read for active content
(script for the grader's browser hidden from the source, e.g. decoded from base64)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import nbformat

from .copies import copied_references
from .findings import Finding, finding
from .markup import active_content, cell_outputs_active, markdown_active
from .names import Namespace
from .parsing import parse_cell
from .scan import scan_code


def _load(nb: nbformat.NotebookNode | Path | str) -> nbformat.NotebookNode:
    return nb if isinstance(nb, nbformat.NotebookNode) else nbformat.read(str(nb), as_version=4)


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _norm(text: str) -> str:
    return "".join(text.split())  # `f( x )` and `f(x)` are the same cell


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _grade_id(cell) -> str | None:
    return (_nbgrader(cell) or {}).get("grade_id") or None


def _quoted(quotes: list[str]) -> str:
    """The first quote of active content, and how many more there are."""
    return quotes[0] + (f" (and {len(quotes) - 1} more)" if len(quotes) > 1 else "")


def _markup_findings(label: str, cell) -> list[Finding]:
    """Active content in a markdown or raw cell a student can edit."""
    kind = cell.get("cell_type")
    quotes = markdown_active(_source(cell)) if kind == "markdown" else active_content(_source(cell))
    if not quotes:
        return []
    what = "a markdown answer" if _nbgrader(cell).get("solution") else f"a {kind} cell"
    return [finding(label, None, "javascript", f"active content in {what}: {_quoted(quotes)}")]


def graded_output_findings(graded: nbformat.NotebookNode | Path) -> list[Finding]:
    """Active content in what a graded notebook's code displayed when it ran for grading."""
    findings = []
    for i, cell in enumerate(_load(graded).get("cells", [])):
        quotes = cell_outputs_active(cell)
        if quotes:
            detail = f"active content in an output displayed at grading time: {_quoted(quotes)}"
            findings.append(finding(_grade_id(cell) or f"cell {i + 1}", None, "javascript", detail))
    return findings


def scan_notebook(submitted: nbformat.NotebookNode | Path, released: nbformat.NotebookNode | Path,
                  graded: nbformat.NotebookNode | Path | None = None) -> list[Finding]:
    """Every finding for one submission, in notebook order; duplicated and deleted cells last, then
    what ``graded`` (the notebook as it ran for grading, if given) displayed."""
    sub, rel = _load(submitted), _load(released)
    rel_cells, cells = rel.get("cells", []), sub.get("cells", [])
    course = {_grade_id(c): c for c in rel_cells if _grade_id(c)}
    plain = {c.get("id"): c for c in rel_cells if not _grade_id(c) and c.get("id")}
    plain_sources = {_norm(_source(c)) for c in plain.values() if c.get("cell_type") == "code"}
    ids = [_grade_id(c) for c in cells]
    last = {gid: i for i, gid in enumerate(ids) if gid}  # nbgrader keeps the last of duplicates

    plan = []  # (label, cell, the released source it replaces, mode)
    for i, cell in enumerate(cells):
        gid, orig = ids[i], plain.get(cell.get("id"))
        if gid in course:
            locked = _nbgrader(course[gid]).get("locked") and last[gid] == i
            label = gid if last[gid] == i else f"{gid} (copy in cell {i + 1})"
            plan.append((label, cell, _source(course[gid]), "locked" if locked else "scan"))
        elif orig is not None and orig.get("cell_type") == cell.get("cell_type"):
            same = _norm(_source(cell)) == _norm(_source(orig))
            plan.append((f"cell {i + 1}", cell, _source(orig), "same" if same else "scan"))
        elif cell.get("cell_type") == "code" and _norm(_source(cell)) in plain_sources:
            plan.append((f"cell {i + 1}", cell, _source(cell), "same"))
        else:
            plan.append((f"added cell {i + 1}", cell, "", "scan"))
    locked_trees = [parse_cell(_source(c))[0] for c in rel_cells
                    if c.get("cell_type") == "code" and _nbgrader(c).get("locked")]
    trees = [parse_cell(_source(c))[0] for _, c, _, mode in plan
             if mode != "locked" and c.get("cell_type") == "code"]
    ns = Namespace.build([t for t in locked_trees if t], [t for t in trees if t])

    findings = []
    for label, cell, original, mode in plan:
        source, code = _source(cell), cell.get("cell_type") == "code"
        if mode == "locked":
            findings += _compare_locked(label, cell, course[label])
        elif mode == "scan" and not code:
            findings += _markup_findings(label, cell)
        elif mode == "scan" and code:
            # what the released cell already did (a course demo using `reference`) is not the student's
            baseline = {(k, d) for _, k, d, _ in scan_code(original, replace(ns, rebound=set(ns.rebound)))}
            findings += [finding(label, line, kind, detail, target) for line, kind, detail, target
                         in scan_code(source, ns) if (kind, detail) not in baseline]
            tree = parse_cell(source)[0]
            findings += [finding(label, line, "copies-reference",
                                 f"{where.rsplit('.', 1)[1]} is the course's own {where} statement for "
                                 "statement (local names, comments and layout aside)", where)
                         for line, where in (copied_references(tree) if tree is not None else [])]
        saved = cell_outputs_active(cell)
        if saved:
            detail = f"a saved output holds active content (nbgrader clears outputs): {_quoted(saved)}"
            findings.append(finding(label, None, "script-output", detail))

    for gid, n in Counter(g for g in ids if g).items():
        if n > 1:
            meta = _nbgrader(course.get(gid, {}))
            shadows = meta.get("grade") or meta.get("locked")
            why = "a copy of a grade cell" if shadows else "a copied solution cell"
            detail = f"grade_id {gid} appears {n} times ({why}; nbgrader grades the last)"
            findings.append(finding(gid, None, "duplicate-grade-id", detail))
    for gid, c in course.items():
        meta = _nbgrader(c)
        if gid not in last and (meta.get("grade") or meta.get("locked")):
            what = f"grade cell ({meta.get('points', 0)} points)" if meta.get("grade") else "locked cell"
            findings.append(finding(gid, None, "deleted-grade-cell", f"the {what} {gid} was deleted"))
    return findings + ([] if graded is None else graded_output_findings(graded))


def _compare_locked(gid: str, cell, original) -> list[Finding]:
    """A locked cell whose text changed: nbgrader restores it, but someone tried."""
    if cell.get("cell_type") != original.get("cell_type"):
        return [finding(gid, None, "edited-locked-cell",
                        f"changed from {original.get('cell_type')} to {cell.get('cell_type')}")]
    if _norm(_source(cell)) == _norm(_source(original)):
        return []
    new, old = _source(cell).splitlines(), _source(original).splitlines()
    k = next((j for j, (a, b) in enumerate(zip(new, old)) if _norm(a) != _norm(b)), min(len(new), len(old)))
    shown = repr(new[k].strip()[:50]) if k < len(new) else "lines removed"
    return [finding(gid, k + 1, "edited-locked-cell", f"differs from the release: {shown}")]


def scan_class(root: Path, lesson: str, released: Path) -> dict[str, list[Finding]]:
    """Findings for every root/submitted/<student>/<lesson>/<lesson>.ipynb, by student."""
    release, results = _load(released), {}
    for folder in sorted(Path(root, "submitted").glob(f"*/{lesson}")):
        try:
            results[folder.parent.name] = scan_notebook(_load(folder / f"{lesson}.ipynb"), release)
        except Exception as err:  # a missing or broken file is reported; the class scan goes on
            results[folder.parent.name] = [finding("notebook", None, "unreadable",
                                                   f"{type(err).__name__}: {str(err)[:120]}")]
    return results
