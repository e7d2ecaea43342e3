"""Findings of the integrity scan and how they are told: ``SEVERITY``, the one table of kinds; the
``Finding`` record; one line each for the grader, a CSV for the class, and a short paragraph for
the student whose score is held for review."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from .rules import BUILTIN_NAMES, COMPARING, FRAME_ATTRS, GRADER_MODULES, KERNEL_PATHS

SEVERITY = {
    "monkeypatch": "tamper",  # replaces or changes numpy, torch, a builtin or a check
    "redefines-grader": "tamper",  # rebinds a check, np/torch or a builtin to another function or object
    "hidden-files": "tamper",  # a path into solutions, the gradebook, grading folders or others' work
    "kernel-hooks": "tamper",  # the shell's hooks, tracing, the interpreter's stack frames
    "javascript": "tamper",  # script, or markup that runs or loads pages, for the grader's browser
    "shell": "review",  # !cmd, %pip, %%bash, files = !ls
    "magic": "review",  # a magic that is not an everyday one: %reset, %load_ext of another extension
    "network": "review",
    "dynamic-code": "review",
    "process": "review",
    "file-access": "review",
    "script-output": "review",  # a saved output with active content: nbgrader clears outputs first
    "duplicate-grade-id": "review",
    "edited-locked-cell": "review",
    "deleted-grade-cell": "review",
    "shadows-name": "review",
    "uses-reference": "review",
    "copies-reference": "review",  # an exercise function whose body is the course's own, pasted
    "syntax-error": "review",
    "unreadable": "review",
}


@dataclass(frozen=True)
class Finding:
    """One thing a reviewer should see: where, what kind, how serious, in words.

    ``target`` names what was touched (numpy.allclose, check_softmax, the course's solutions) for
    the student's explanation; it is not compared.
    """

    cell: str
    line: int | None
    kind: str
    severity: str
    detail: str
    target: str = field(default="", compare=False)


def finding(cell: str, line: int | None, kind: str, detail: str, target: str = "") -> Finding:
    """A finding of this kind, with the severity ``SEVERITY`` gives it."""
    return Finding(cell, line, kind, SEVERITY[kind], detail, target)


def is_tampering(findings: list[Finding]) -> bool:
    """Whether any finding has severity tamper."""
    return any(f.severity == "tamper" for f in findings)


def review_lines(findings: list[Finding]) -> list[str]:
    """One line per finding, for the grader: severity, kind, cell and line, what was found."""
    return [f"{f.severity:6} {f.kind:18} {f.cell}{'' if f.line is None else f' line {f.line}'}: {f.detail}"
            for f in findings]


def summarise(findings: list[Finding]) -> str:
    """The review lines of a report as one text, or "no findings"."""
    return "\n".join(review_lines(findings)) or "no findings"


def write_report(results: dict[str, list[Finding]], path: Path) -> Path:
    """A CSV of every finding (student, cell, line, kind, severity, detail), sorted by student."""
    path = Path(path)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "cell", "line", "kind", "severity", "detail"])
        for student in sorted(results):
            writer.writerows([student, x.cell, "" if x.line is None else x.line, x.kind, x.severity, x.detail]
                             for x in results[student])
    return path


def _plainly(f: Finding) -> str:
    """What a tamper finding means, in words a student understands."""
    what, words = f.target, re.findall(r"\w+", f.target)
    if f.kind == "monkeypatch":
        compares = words and words[-1] in COMPARING
        why = "the checks use to compare results" if compares else "the checks rely on"
        return f"replaces {what}, which {why}" if what else f"replaces part of a library {why}"
    if f.kind == "redefines-grader":
        if what in GRADER_MODULES:
            return f"gives {what} a new meaning, while the checks compute with it"
        if what in BUILTIN_NAMES:
            return f"redefines Python's built-in {what}, which the grade cells use"
        return f"redefines {what}, which the grading uses to check your answers"
    if f.kind == "hidden-files":
        return f"tries to reach {what or 'files the grading keeps hidden'}"
    if f.kind == "kernel-hooks" and (what in FRAME_ATTRS or what.startswith(KERNEL_PATHS)):
        return "reaches into the interpreter's stack frames or tracing, where the grader's own objects live"
    if f.kind == "kernel-hooks":
        return f"hooks into the notebook's shell ({what or 'the kernel'}), which runs the checks"
    if f.kind == "javascript" and f.detail.startswith("active content in an output"):
        return "displays, when it runs, content meant to run in the grader's browser"
    if f.kind == "javascript" and f.detail.startswith("active content"):
        return "holds markup meant to run in the grader's browser (script, a frame or a plugin)"
    if f.kind == "javascript":
        return "holds Javascript, which would run in the grader's browser"
    return f.detail


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]


def explain(findings: list[Finding], most: int = 4) -> str:
    """A short paragraph for the student's feedback on why the submission is held for review ("" if
    it is not); it follows "Held for review: " on the feedback page."""
    said: dict[str, list[str]] = {}
    for f in findings:
        if f.severity == "tamper" and _plainly(f) not in said.setdefault(f.cell, []):
            said[f.cell].append(_plainly(f))
    said = {cell: phrases for cell, phrases in said.items() if phrases}
    if not said:
        return ""
    parts = [("" if cell.startswith(("cell ", "added cell ")) else "cell ") + f"{cell} {_listed(phrases[:3])}"
             for cell, phrases in list(said.items())[:most]]
    if len(said) > most:
        parts.append(f"{len(said) - most} more cell{'s' if len(said) - most > 1 else ''} do the same")
    return (f"The automatic scan found code that could change how answers are checked: {'; '.join(parts)}. "
            "Your score is on hold until your instructor has looked; nothing is decided yet, and if there "
            "is an innocent reason, tell them.")
