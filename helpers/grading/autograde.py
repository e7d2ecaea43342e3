"""Grade a class: import submissions, autograde them in parallel, feedback, gradebook CSV.

    python -m helpers.grading.autograde LESSON SUBMISSIONS [--root grading] [--workers 2]

``SUBMISSIONS`` is either nbgrader's ``submitted/`` layout (``<student>/<LESSON>/<LESSON>.ipynb``)
or a flat folder of downloaded files (``.ipynb`` and ``.zip``), whose student ids are read from
the file names with a regular expression (``--pattern``; by default the text before the first
``_``, ``-`` or ``.``, as in ``alice_02_attention_lookup.ipynb``).

Everything is nbgrader's own machinery: ``generate_assignment`` records the hidden tests in the
gradebook of the grading root, ``autograde`` runs each notebook, ``generate_feedback`` and the
CSV export plugin write the results. Parallelism: nbgrader grades one notebook at a time and
its SQLite gradebook must not be written by several processes, so each worker grades its share
of the class in a course root of its own (a copy of the gradebook) and one process merges the
workers' grades back into the main gradebook.

Nothing is lost: a submission that cannot be graded (not valid JSON, a dead kernel, a timeout
that kills the notebook, a missing notebook) is reported by name with the reason and gets a
recorded zero; the others are graded regardless.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from traitlets.config import Config

from . import sandbox
from ..build import ROOT
from .settings import KERNEL_DIED, TIME_LIMIT_ERRORS, configure, is_cap_marker, offline_feedback

DEFAULT_PATTERN = r"^(?P<student_id>[A-Za-z0-9]+)"


@dataclass
class ClassReport:
    """What happened to every submission of one grading run."""

    lesson: str
    graded: dict[str, float] = field(default_factory=dict)  # student -> automatic score
    failed: dict[str, str] = field(default_factory=dict)  # student -> why it could not be graded
    interrupted: dict[str, list[str]] = field(default_factory=dict)  # student -> cells stopped at the limit
    crashed: dict[str, list[str]] = field(default_factory=dict)  # student -> cells the kernel died in
    limited: dict[str, list[str]] = field(default_factory=dict)  # student -> "limit in cell"
    skipped: list[str] = field(default_factory=list)  # files that belong to no student
    max_score: float = 0.0
    seconds: float = 0.0
    isolation: str = ""  # how students' kernels were sandboxed
    integrity: dict[str, list] = field(default_factory=dict)  # student -> integrity findings
    zeroed: list[str] = field(default_factory=list)  # tampering found: zeroed for review

    def lines(self) -> list[str]:
        n = len(self.graded) + len(self.failed)
        rate = 60.0 * n / self.seconds if self.seconds else 0.0
        out = [f"{self.lesson}: {n} submissions in {self.seconds:.1f} s ({rate:.0f} per minute); "
               f"{len(self.graded)} graded, {len(self.failed)} could not be graded",
               f"  kernels: {self.isolation}"]
        out += [f"  NOT GRADED {s}: {why} (recorded as 0)" for s, why in sorted(self.failed.items())]
        out += [f"  {s}: stopped at the time limit in {', '.join(cells)} (those cells score 0)"
                for s, cells in sorted(self.interrupted.items())]
        out += [f"  {s}: the kernel died in {', '.join(cells)} and was restarted (those cells score 0)"
                for s, cells in sorted(self.crashed.items())]
        out += [f"  {s}: ran into the {'; the '.join(hits)}" for s, hits in sorted(self.limited.items())]
        out += [f"  ignored file {f}: no student id in its name" for f in self.skipped]
        flagged = {s: f for s, f in self.integrity.items() if f}
        if flagged:
            out.append(f"  integrity scan: {len(flagged)} submission(s) to review "
                       f"({len(self.zeroed)} zeroed for tampering)")
            for student, findings in sorted(flagged.items()):
                mark = "ZEROED " if student in self.zeroed else ""
                out += [f"    {mark}{student}: {f.severity} {f.kind} in {f.cell}: {f.detail}"
                        for f in findings]
        return out


# ------------------------------------------------------------------ the course root


def course_api(root: Path, timeout: int | None = None, exchange: Path | None = None,
               kernel_name: str | None = None, ipc_dir: Path | None = None):
    """An NbGraderAPI for a grading root whose sources are this repository's solutions.

    ``exchange`` is the folder nbgrader's exchange hands assignments and feedback through
    (default: ``root/exchange``); ``kernel_name`` overrides the kernel that runs submissions;
    ``ipc_dir`` makes kernels talk over Unix sockets there (a sandboxed kernel has no network).
    """
    from nbgrader.apps import NbGraderAPI

    config = configure(Config(), root)
    config.CourseDirectory.source_directory = str(ROOT / "solutions")
    config.CourseDirectory.release_directory = str(Path(root).resolve() / "release")
    config.Exchange.root = str(Path(exchange or Path(root) / "exchange").resolve())
    if timeout is not None:
        config.Execute.timeout = timeout
    if kernel_name is not None:
        config.Execute.kernel_name = kernel_name
    if ipc_dir is not None:
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(ipc_dir) / "kernel")
    return NbGraderAPI(config=config)


def prepare(lesson: str, root: Path) -> None:
    """Record the lesson (and its hidden tests) in the grading root's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    from ..build import build_solutions

    build_solutions()
    Path(root).mkdir(parents=True, exist_ok=True)
    api = course_api(root)
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        try:
            has_submissions = bool(gb.find_assignment(lesson).submissions)
        except MissingEntry:
            has_submissions = False
    if has_submissions:
        return  # already recorded; nbgrader refuses to change an assignment with submissions
    result = api.generate_assignment(lesson, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader could not record {lesson}:\n{result.get('log', '')}")


# ------------------------------------------------------------------ importing submissions


def import_submissions(lesson: str, source: Path, root: Path,
                       pattern: str = DEFAULT_PATTERN) -> tuple[list[str], list[str]]:
    """Copy submissions into ``root/submitted/<student>/<lesson>/``; returns (students, ignored)."""
    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"no folder of submissions at {source}")
    target = Path(root) / "submitted"
    nested = sorted(p for p in source.glob(f"*/{lesson}") if p.is_dir())
    if nested:  # nbgrader's layout: <student>/<lesson>/...
        students = []
        for folder in nested:
            student = folder.parent.name
            dest = target / student / lesson
            if dest.resolve() != folder.resolve():
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(folder, dest)
            students.append(student)
        return students, []
    return _import_flat(lesson, source, target, pattern)


def _import_flat(lesson: str, source: Path, target: Path, pattern: str):
    """A flat folder of downloads: one notebook (or a zip holding one) per student."""
    regex = re.compile(pattern)
    chosen: dict[str, tuple[float, str, bytes]] = {}  # student -> (mtime, name, content)
    ignored = []
    for path in sorted(source.iterdir()):
        if path.suffix not in (".ipynb", ".zip"):
            continue
        match = regex.match(path.name)
        if not match or not match.groupdict().get("student_id"):
            ignored.append(path.name)
            continue
        student = match.group("student_id")
        if path.suffix == ".zip":
            content = _notebook_in_zip(path, lesson)
            if content is None:
                ignored.append(f"{path.name} (no .ipynb inside)")
                continue
        else:
            content = path.read_bytes()
        mtime = path.stat().st_mtime
        if student not in chosen or mtime >= chosen[student][0]:  # the latest upload wins
            chosen[student] = (mtime, path.name, content)
    for student, (mtime, _, content) in chosen.items():
        dest = target / student / lesson / f"{lesson}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
        os.utime(dest, (mtime, mtime))
    return sorted(chosen), ignored


def _notebook_in_zip(path: Path, lesson: str) -> bytes | None:
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".ipynb") and "checkpoint" not in n]
        names.sort(key=lambda n: (Path(n).stem != lesson, n))  # prefer <lesson>.ipynb
        return archive.read(names[0]) if names else None


def unreadable_reason(path: Path) -> str | None:
    """Why a submitted notebook cannot be graded before running it, or None."""
    if not path.exists():
        return "the notebook is missing from the submission"
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # any parse failure means the file is not a notebook
        return f"not a readable notebook ({type(err).__name__}: {str(err)[:120]})"
    if not nb.get("cells"):
        return "the notebook has no cells"
    return None


# ------------------------------------------------------------------ grading in workers


def _worker(lesson: str, root: Path, students: list[str], timeout: int | None,
            warm: bool = True, sandbox_root: Path | None = None) -> dict:
    """Autograde ``students`` in the course root ``root``; returns {student: error or ""}.

    With ``warm``, kernels are forked from a server that has imported the course's libraries
    once (``helpers.warmkernel``) instead of starting cold for every notebook. With
    ``sandbox_root`` (the grading folder to hide) and a machine that allows it, every kernel
    runs in the sandbox of ``helpers.sandbox``.
    """
    from .warmkernel import KERNEL_NAME, WarmServer

    api = course_api(root, timeout)
    server = None
    if warm and students:
        folder = Path(root).resolve() / ".warm"
        prefix = sandbox.launcher() if sandbox_root is not None else None
        policy, ipc = None, None
        if prefix is not None:
            ipc = folder / "ipc"
            ipc.mkdir(parents=True, exist_ok=True)
            ipc.chmod(0o1777)  # the kernel, as nobody, creates its sockets here
            policy = sandbox.course_policy(ROOT, sandbox_root, writable=(str(ipc),))
        server = WarmServer.start(folder, policy=policy, prefix=prefix)
        spec_dir = server.kernelspec(folder / "share")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(
            p for p in (str(spec_dir), os.environ.get("JUPYTER_PATH", "")) if p)
        api = course_api(root, timeout, kernel_name=KERNEL_NAME, ipc_dir=ipc)
    outcome = {}
    try:
        for student in students:
            result = api.autograde(lesson, student, force=True, create=True)
            outcome[student] = "" if result["success"] else _failure_reason(result.get("log", ""))
    finally:
        if server is not None:
            server.stop()
    return outcome


# What an error in a graded cell says about the limits the cell ran into (see helpers.sandbox).
_LIMIT_SIGNS = (("memory limit", "MemoryError", ""),
                ("process limit", "", "Resource temporarily unavailable"),
                ("process limit", "RuntimeError", "can't start new thread"),
                ("file size limit", "", "File too large"),
                ("open files limit", "", "Too many open files"))


def cell_events(path: Path) -> dict[str, list[str]]:
    """What happened in the cells of an autograded notebook, as {event: [cell, ...]}.

    Events: ``time limit`` (interrupted, or replaced for ignoring the interrupt), ``kernel died``,
    a sandbox limit (``memory limit``, ``process limit``, ...) and ``output cap``.
    """
    found: dict[str, list[str]] = {}
    if not path.exists():
        return found
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        name = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {i}"
        events = set()
        for out in cell.get("outputs", []):
            if is_cap_marker(out):
                events.add("output cap")
            if out.get("output_type") != "error":
                continue
            ename, evalue = out.get("ename", ""), str(out.get("evalue", ""))
            if ename in TIME_LIMIT_ERRORS:
                events.add("time limit")
            elif ename == KERNEL_DIED:
                events.add("kernel died")
            events.update(limit for limit, sign_name, sign_text in _LIMIT_SIGNS
                          if (not sign_name or ename == sign_name) and sign_text in evalue)
        for event in sorted(events):
            found.setdefault(event, []).append(name)
    return found


def _failure_reason(log: str) -> str:
    for needle, reason in (("DeadKernelError", "the kernel died (os._exit, a crash or out of memory)"),
                           ("CellTimeoutError", "a cell ran past the time limit"),
                           ("TimeoutError", "a cell ran past the time limit"),
                           ("NotJSONError", "not a readable notebook"),
                           ("Timeout waiting for", "the kernel did not respond in time")):
        if needle in log:
            return reason
    last = [ln for ln in log.strip().splitlines() if ln.strip()]
    return "autograding failed: " + (last[-1][:200] if last else "no log")


def _run_workers(lesson: str, root: Path, students: list[str], workers: int,
                 timeout: int | None, warm: bool = True, sandboxed: bool = True) -> dict[str, str]:
    """Split the class over ``workers`` processes, each with its own copy of the gradebook."""
    hide = Path(root).resolve() if sandboxed else None
    if workers <= 1 or len(students) <= 1:
        return _worker(lesson, root, students, timeout, warm, hide)
    shares = [students[i::workers] for i in range(workers)]
    procs = []
    for i, share in enumerate(s for s in shares if s):
        wroot = root / ".workers" / f"w{i}"
        shutil.rmtree(wroot, ignore_errors=True)
        (wroot / "submitted").mkdir(parents=True)
        shutil.copy2(root / "gradebook.db", wroot / "gradebook.db")
        for student in share:
            (wroot / "submitted" / student).symlink_to((root / "submitted" / student).resolve())
        args = [sys.executable, "-m", "helpers.grading.autograde", "--worker", lesson, str(wroot),
                *(["--timeout", str(timeout)] if timeout else []), *([] if warm else ["--cold"]),
                *(["--sandbox-root", str(hide)] if hide else []),
                "--students", *share]
        procs.append((wroot, share, subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                                     stderr=subprocess.DEVNULL, text=True)))
    outcome: dict[str, str] = {}
    for wroot, share, proc in procs:
        out, _ = proc.communicate()
        try:
            outcome.update(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            outcome.update({s: "the grading worker crashed" for s in share})
            continue
        _merge(lesson, wroot, root, [s for s in share if not outcome.get(s)])
    return outcome


def _merge(lesson: str, wroot: Path, root: Path, students: list[str]) -> None:
    """Copy the workers' grades, comments and autograded notebooks into the main root."""
    from nbgrader.api import Gradebook

    if not students:
        return
    api = course_api(root)
    with Gradebook(f"sqlite:///{wroot / 'gradebook.db'}", course_id=api.coursedir.course_id) as src, \
            Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as dst:
        for student in students:
            done = src.find_submission(lesson, student)
            dst.update_or_create_student(student)
            dst.update_or_create_submission(lesson, student, timestamp=done.timestamp)
            for nb in done.notebooks:
                for g in nb.grades:
                    mine = dst.find_grade(g.name, nb.name, lesson, student)
                    mine.auto_score, mine.needs_manual_grade = g.auto_score, g.needs_manual_grade
                for c in nb.comments:
                    dst.find_comment(c.name, nb.name, lesson, student).auto_comment = c.auto_comment
                mine_nb = dst.find_submission_notebook(nb.name, lesson, student)
                mine_nb.flagged = nb.flagged
            dst.db.commit()
            dest = root / "autograded" / student / lesson
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(wroot / "autograded" / student / lesson, dest)


def _record_zero(lesson: str, root: Path, student: str, reason: str) -> None:
    """Give a submission that could not be graded a recorded 0 and say why in its comments."""
    from nbgrader.api import Gradebook

    api = course_api(root)
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        gb.update_or_create_student(student)
        submission = gb.update_or_create_submission(lesson, student)
        for nb in submission.notebooks:
            for g in nb.grades:
                g.auto_score, g.needs_manual_grade = 0.0, False
            for c in nb.comments:
                c.auto_comment = f"Not graded: {reason}."
        gb.db.commit()


# ------------------------------------------------------------------ synthetic classes

_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def solution_answers(lesson: str) -> dict[str, str]:
    """grade_id -> each solution cell's text as a student would type it (no markers)."""
    from ..build import solution_notebook

    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(
        line for line in c.source.splitlines() if not _MARKERS.match(line))
        for c in solution_notebook(lesson).cells if c.metadata.get("nbgrader", {}).get("solution")}


def fill_notebook(lesson: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The committed student notebook with the solution cells in ``answers`` filled in."""
    nb = nbformat.read(ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in answers:
            cell.source = answers[meta["grade_id"]]
    return nb


def fake_class(lesson: str, folder: Path, n: int, broken: dict[str, str] | None = None) -> None:
    """Write ``n`` submissions in nbgrader's layout: full, blank and partly wrong answers mixed.

    ``broken`` maps extra student ids to raw file contents (e.g. not JSON) for failure tests.
    """
    full = solution_answers(lesson)
    for i in range(n):
        kind = i % 4
        answers = dict(full)
        if kind == 1:  # left blank
            answers = {}
        elif kind == 2:  # one exercise undone
            answers.pop(sorted(answers)[i % len(answers)])
        dest = Path(folder) / f"student{i:03d}" / lesson / f"{lesson}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(fill_notebook(lesson, answers), dest)
    for student, content in (broken or {}).items():
        dest = Path(folder) / student / lesson / f"{lesson}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(content)


# ------------------------------------------------------------------ the whole run


def grade_class(lesson: str, submissions: Path, root: Path = ROOT / "grading", workers: int = 2,
                pattern: str = DEFAULT_PATTERN, timeout: int | None = None,
                feedback: bool = True, warm: bool = True, sandboxed: bool = True) -> ClassReport:
    """Import, autograde (in parallel), record failures as zeros, feedback, export; a report."""
    from nbgrader.api import Gradebook

    start = time.perf_counter()
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    prepare(lesson, root)
    students, ignored = import_submissions(lesson, submissions, root, pattern)
    report = ClassReport(lesson, skipped=ignored)
    api = course_api(root)
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        for student in students:
            gb.update_or_create_student(student)
        report.max_score = sum(g.max_score for g in gb.find_notebook(lesson, lesson).grade_cells
                               if g.cell_type == "code")

    from .integrity import is_tampering, scan_class, write_report

    released = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    report.integrity = scan_class(root, lesson, released)
    write_report(report.integrity, root / f"integrity_{lesson}.csv")
    gradable = []
    for student in students:
        why = unreadable_reason(root / "submitted" / student / lesson / f"{lesson}.ipynb")
        if why:
            report.failed[student] = why
        else:
            gradable.append(student)
    report.isolation = sandbox.status() if (sandboxed and warm) else \
        "WARNING: NOT SANDBOXED — sandboxing was switched off for this run"
    for student, error in _run_workers(lesson, root, gradable, workers, timeout, warm,
                                       sandboxed).items():
        if error:
            report.failed[student] = error
    for student, findings in report.integrity.items():
        if is_tampering(findings) and student not in report.failed:
            report.zeroed.append(student)
    for student, why in report.failed.items():
        _record_zero(lesson, root, student, why)
    for student in report.zeroed:  # graded, then zeroed: the instructor decides after review
        kinds = sorted({f.kind for f in report.integrity[student] if f.severity == "tamper"})
        _record_zero(lesson, root, student, "zeroed for review: the integrity scan found "
                     + ", ".join(kinds) + f" (see integrity_{lesson}.csv)")

    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        for student in students:
            if student not in report.failed:
                nb = gb.find_submission_notebook(lesson, lesson, student)
                report.graded[student] = sum(g.auto_score or 0.0 for g in nb.grades
                                             if g.cell.cell_type == "code")
    for student in report.graded:
        events = cell_events(root / "autograded" / student / lesson / f"{lesson}.ipynb")
        if "time limit" in events:
            report.interrupted[student] = events.pop("time limit")
        if "kernel died" in events:
            report.crashed[student] = events.pop("kernel died")
        if events:
            report.limited[student] = [f"{event} in {', '.join(cells)}"
                                       for event, cells in sorted(events.items())]
    if feedback:
        for student in report.graded:
            api.generate_feedback(lesson, student, force=True)
            for page in (root / "feedback" / student / lesson).glob("*.html"):
                offline_feedback(page)
    export(lesson, root)
    report.seconds = time.perf_counter() - start
    return report


def export(lesson: str, root: Path) -> tuple[Path, Path]:
    """``grades.csv`` (nbgrader's export) and ``summary.csv``: per grade cell, how many passed."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    api = course_api(root)
    grades_csv, summary_csv = Path(root) / "grades.csv", Path(root) / f"summary_{lesson}.csv"
    with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
        CsvExportPlugin(to=str(grades_csv)).export(gb)
        cells = sorted(gb.find_notebook(lesson, lesson).grade_cells, key=lambda c: c.name)
        rows = []
        for cell in cells:
            counts = {"full": 0, "partial": 0, "zero": 0, "by hand": 0}
            for sub in gb.notebook_submissions(lesson, lesson):
                g = gb.find_grade(cell.name, lesson, lesson, sub.student.id)
                if g.auto_score is None:
                    counts["by hand"] += 1
                elif g.auto_score >= cell.max_score:
                    counts["full"] += 1
                elif g.auto_score > 0:
                    counts["partial"] += 1
                else:
                    counts["zero"] += 1
            rows.append({"grade_cell": cell.name, "points": cell.max_score, **counts})
    with summary_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["grade_cell", "points", "full", "partial", "zero",
                                               "by hand"])
        writer.writeheader()
        writer.writerows(rows)
    return grades_csv, summary_csv


def benchmark(lesson: str, n: int, configs=((1, False), (2, True))) -> list[tuple[str, float]]:
    """Grade the same generated class of ``n`` under each (workers, warm); notebooks per minute."""
    import tempfile

    rates = []
    with tempfile.TemporaryDirectory() as tmp:
        fake_class(lesson, Path(tmp) / "class", n)
        for workers, warm in configs:
            root = Path(tmp) / f"root_{workers}_{warm}"
            prepare(lesson, root)  # recording the lesson is paid once per course, not timed
            report = grade_class(lesson, Path(tmp) / "class", root, workers, feedback=False, warm=warm)
            label = f"{workers} worker{'s' if workers > 1 else ''}, {'warm' if warm else 'cold'} kernels"
            rates.append((label, 60.0 * n / report.seconds))
            print(f"{label:>28}: {report.seconds:6.1f} s for {n} notebooks = {rates[-1][1]:5.1f} per minute",
                  flush=True)
    print(f"speed-up: {rates[-1][1] / rates[0][1]:.2f}x")
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Autograde a class's submissions of one lesson.")
    parser.add_argument("lesson")
    parser.add_argument("submissions", type=Path, nargs="?")
    parser.add_argument("--root", type=Path, default=ROOT / "grading",
                        help="grading folder: gradebook, autograded/, feedback/, CSVs (default: grading/)")
    parser.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="regex with a named group student_id, for a flat folder of downloads")
    parser.add_argument("--timeout", type=int, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--no-feedback", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="start every kernel from scratch instead of forking warm kernels")
    parser.add_argument("--benchmark", type=int, metavar="N",
                        help="grade a generated class of N twice (1 cold worker vs WORKERS warm) and "
                             "print notebooks per minute")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run students' code with the grader's rights (not recommended)")
    parser.add_argument("--sandbox-root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--students", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # internal: one worker's share, result as one JSON line on stdout
        outcome = _worker(args.lesson, Path(args.submissions), args.students, args.timeout,
                          warm=not args.cold, sandbox_root=args.sandbox_root)
        print(json.dumps(outcome))
        return 0
    if args.benchmark:
        benchmark(args.lesson, args.benchmark, ((1, False), (args.workers, True)))
        return 0
    if args.submissions is None:
        parser.error("give the folder of submissions")
    report = grade_class(args.lesson, args.submissions, args.root, args.workers, args.pattern,
                         args.timeout, feedback=not args.no_feedback, warm=not args.cold,
                         sandboxed=not args.no_sandbox)
    print("\n".join(report.lines()))
    print(f"gradebook: {args.root / 'gradebook.db'}; grades: {args.root / 'grades.csv'}; "
          f"per grade cell: {args.root / f'summary_{args.lesson}.csv'}; feedback: {args.root / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
