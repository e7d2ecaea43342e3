"""Scanning whole submissions: each cell of a student's notebook is matched to the released one,
locked cells are only compared (nbgrader restores them), every cell a student can edit is scanned
in the namespace the grade cells will run in, and a class is scanned student by student."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import nbformat

from .findings import Finding, finding
from .names import Namespace
from .parsing import parse_cell
from .rules import SCRIPT
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


def _script_output(cell) -> bool:
    """Whether a code cell's saved outputs hold script for the browser."""
    for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
        data = out.get("data", {}) if isinstance(out, dict) else {}
        if isinstance(data, dict) and ("application/javascript" in data
                                       or SCRIPT.search(str(data.get("text/html", "")))):
            return True
    return False


def scan_notebook(submitted: nbformat.NotebookNode | Path,
                  released: nbformat.NotebookNode | Path) -> list[Finding]:
    """Every finding for one submission, in notebook order; duplicated and deleted cells last."""
    sub, rel = _load(submitted), _load(released)
    rel_cells, cells = rel.get("cells", []), sub.get("cells", [])
    graded = {_grade_id(c): c for c in rel_cells if _grade_id(c)}
    plain = {c.get("id"): c for c in rel_cells if not _grade_id(c) and c.get("id")}
    plain_sources = {_norm(_source(c)) for c in plain.values() if c.get("cell_type") == "code"}
    ids = [_grade_id(c) for c in cells]
    last = {gid: i for i, gid in enumerate(ids) if gid}  # nbgrader keeps the last of duplicates

    plan = []  # (label, cell, the released source it replaces, mode)
    for i, cell in enumerate(cells):
        gid, orig = ids[i], plain.get(cell.get("id"))
        if gid in graded:
            locked = _nbgrader(graded[gid]).get("locked") and last[gid] == i
            label = gid if last[gid] == i else f"{gid} (copy in cell {i + 1})"
            plan.append((label, cell, _source(graded[gid]), "locked" if locked else "scan"))
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
            findings += _compare_locked(label, cell, graded[label])
        elif mode == "scan" and not code and SCRIPT.search(source):
            findings.append(finding(label, None, "javascript",
                                    "markdown holding Javascript (it runs in the grader's browser)"))
        elif mode == "scan" and code:
            # what the released cell already did (a course demo using `reference`) is not the student's
            baseline = {(k, d) for _, k, d, _ in scan_code(original, replace(ns, rebound=set(ns.rebound)))}
            findings += [finding(label, line, kind, detail, target) for line, kind, detail, target
                         in scan_code(source, ns) if (kind, detail) not in baseline]
        if _script_output(cell):
            findings.append(finding(label, None, "script-output", "a saved output holds script for "
                                                                  "the browser (nbgrader clears outputs)"))

    for gid, n in Counter(g for g in ids if g).items():
        if n > 1:
            meta = _nbgrader(graded.get(gid, {}))
            shadows = meta.get("grade") or meta.get("locked")
            why = "a copy of a grade cell" if shadows else "a copied solution cell"
            detail = f"grade_id {gid} appears {n} times ({why}; nbgrader grades the last)"
            findings.append(finding(gid, None, "duplicate-grade-id", detail))
    for gid, c in graded.items():
        meta = _nbgrader(c)
        if gid not in last and (meta.get("grade") or meta.get("locked")):
            what = f"grade cell ({meta.get('points', 0)} points)" if meta.get("grade") else "locked cell"
            findings.append(finding(gid, None, "deleted-grade-cell", f"the {what} {gid} was deleted"))
    return findings


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
