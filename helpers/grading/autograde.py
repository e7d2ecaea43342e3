"""Grade a class: preflight, import, autograde in parallel, feedback, CSVs and the mistakes table.

    python -m helpers.grading.autograde LESSON SUBMISSIONS [--student ID] [--due DATE] [--workers 2]
    python -m helpers.grading.autograde LESSON --feedback [--zip]     # again, from the gradebook
    python -m helpers.grading.autograde LESSON --restore ID           # take back a hold for review

``SUBMISSIONS`` is nbgrader's layout (``<student>/<LESSON>/<LESSON>.ipynb``), a folder of files
downloaded from a learning platform, or both (``helpers.grading.submissions``). Everything goes
to the course root (``grading/``, see ``helpers.grading.settings``).

Everything is nbgrader's own machinery: ``generate_assignment`` records the hidden tests in the
gradebook, ``autograde`` runs each notebook (in the sandbox, ``helpers.grading.execute``),
``generate_feedback`` and the CSV export plugin write the results. Parallelism: nbgrader grades
one notebook at a time and its SQLite gradebook must not be written by several processes, so
each worker grades its share of the class in a course root of its own (a copy of the gradebook)
and one process merges the workers' grades back (``helpers.grading.records``).

Nothing is lost: before grading, one kernel runs the lesson's setup cell exactly as grading will,
with every import of the hidden tests and a check that it imports this course's ``helpers``
(``helpers.grading.environment``); if the machinery fails there or during the run (the same
failure three submissions in a row, the hidden tests failing on a line of their own), grading
stops with exit status 2 and no score is changed. A hand grade on an answer that has changed
since is kept and flagged for grading again. A submission that cannot be graded (not a notebook,
another lesson's) is named with the reason, gets a feedback page saying why and a recorded
zero — unless the student already has a score, which stays.
"""

from __future__ import annotations

import argparse
import json
import math
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

from ..paths import ROOT
from . import cells, exchange, hidden_tests, records, sandbox
from .execute import KERNEL_DIED, TIME_LIMIT_ERRORS, GradingMachineryError, is_cap_marker, warm_up
from .settings import COURSE_ROOT, configure, offline_feedback
from .submissions import DEFAULT_PATTERN, DuplicateStudentError, import_submissions


@dataclass
class ClassReport:
    """What happened to every submission of one grading run."""

    lesson: str
    graded: dict[str, float] = field(default_factory=dict)  # student -> automatic score
    failed: dict[str, str] = field(default_factory=dict)  # student -> why it could not be graded
    interrupted: dict[str, list[str]] = field(default_factory=dict)  # student -> cells stopped at the limit
    crashed: dict[str, list[str]] = field(default_factory=dict)  # student -> cells the kernel died in
    limited: dict[str, list[str]] = field(default_factory=dict)  # student -> "limit in cell"
    imported: list[str] = field(default_factory=list)  # what the import said (times, wrong lessons)
    max_score: float = 0.0
    seconds: float = 0.0
    isolation: str = ""  # how students' kernels were sandboxed
    integrity: dict[str, list] = field(default_factory=dict)  # student -> integrity findings
    zeroed: list[str] = field(default_factory=list)  # tampering found: held at zero for review
    page_scores: dict[str, tuple[float, float]] = field(default_factory=dict)  # held -> (score, max) shown
    kept: list[str] = field(default_factory=list)  # could not be graded now: earlier score kept
    machinery: str = ""  # why the grading machinery stopped, if it did
    not_reached: list[str] = field(default_factory=list)  # left ungraded when the machinery stopped
    mistakes: list[str] = field(default_factory=list)  # per exercise, the mistakes most made
    own_failures: dict[str, list[str]] = field(default_factory=dict)  # student -> hidden tests failing alone
    hand_grades: dict[str, list[str]] = field(default_factory=dict)  # student -> hand grades to redo
    platforms: list[str] = field(default_factory=list)  # the learning platforms' import files
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds (see grade_class)
    no_feedback: dict[str, str] = field(default_factory=dict)  # student -> why no feedback page
    handed_in: dict[str, str] = field(default_factory=dict)  # student -> hand-in time (UTC) that counts
    late: dict[str, float] = field(default_factory=dict)  # student -> seconds after the due time
    hand_in_times: dict[str, str] = field(default_factory=dict)  # student -> times that disagree

    def lines(self) -> list[str]:
        n = len(self.graded) + len(self.failed)
        rate = 60.0 * n / self.seconds if self.seconds else 0.0
        out = [f"{self.lesson}: {n} submissions in {self.seconds:.1f} s ({rate:.0f} per minute); "
               f"{len(self.graded)} graded, {len(self.failed)} could not be graded",
               f"  kernels: {self.isolation}"]
        if self.machinery:
            out.append(f"  STOPPED: the grading machinery failed — {self.machinery}. No score was "
                       f"changed for the {len(self.not_reached)} submission(s) not graded: "
                       + " ".join(sorted(self.not_reached)))
        out += [f"  NOT GRADED {s}: {why} "
                + ("(the earlier score is kept)" if s in self.kept else "(recorded as 0)")
                for s, why in sorted(self.failed.items())]
        out += [f"  {s}: stopped at the time limit in {', '.join(cells)} (those cells score 0)"
                for s, cells in sorted(self.interrupted.items())]
        out += [f"  {s}: the kernel died in {', '.join(cells)} and was restarted (those cells score 0)"
                for s, cells in sorted(self.crashed.items())]
        out += [f"  {s}: ran into the {'; the '.join(hits)}" for s, hits in sorted(self.limited.items())]
        out += [f"  {s}: the hidden tests failed on a line of their own, not on the answer, in "
                f"{'; '.join(why)} — not counted as a mistake; those cells score 0 until graded again"
                for s, why in sorted(self.own_failures.items())]
        out += [f"  {s}: the answer to {', '.join(cells)} changed since it was graded by hand: the hand "
                f"grade is kept and flagged for grading again in the formgrader"
                for s, cells in sorted(self.hand_grades.items())]
        out += [f"  NO FEEDBACK {s}: {why}" for s, why in sorted(self.no_feedback.items())]
        out += [f"  LATE {s}: handed in {self.handed_in.get(s, '?')}, {late:.0f} s after the due time"
                for s, late in sorted(self.late.items())]
        out += [f"  HAND-IN TIME of {s}: {why}" for s, why in sorted(self.hand_in_times.items())]
        out += [f"  {line}" for line in self.imported]
        if self.mistakes:
            out.append("  what the class got wrong (mistakes_" + self.lesson + ".csv, .png):")
            out += [f"    {line}" for line in self.mistakes]
        flagged = {s: f for s, f in self.integrity.items() if f and s not in self.failed}
        if flagged:
            out.append(f"  integrity scan: {len(flagged)} submission(s) to review "
                       f"({len(self.zeroed)} held for review for tampering)")
            for student, findings in sorted(flagged.items()):
                mark = self._held_mark(student)
                out += [f"    {mark}{student}: {f.severity} {f.kind} in {f.cell}: {f.detail}"
                        for f in findings]
        out += [f"  {line}" for line in self.platforms]
        return out

    def _held_mark(self, student: str) -> str:
        """How a held submission is marked: ZEROED when its page shows 0, else the score it
        keeps (a hold overrides the automatic points only; hand grades stay)."""
        if student not in self.zeroed:
            return ""
        score, most = self.page_scores.get(student, (0.0, 0.0))
        if not score:
            return "ZEROED "
        return (f"HELD FOR REVIEW (automatic points 0, hand grades kept: the page shows "
                f"{score:g}/{most:g}) ")


# ------------------------------------------------------------------ the course root


def course_api(root: Path = COURSE_ROOT, timeout: int | None = None, exchange: Path | None = None,
               hide: tuple[str, ...] = (), sandboxed: bool = True, warm: bool = True):
    """An NbGraderAPI for the course root ``root`` with the course's settings.

    ``exchange``: the folder nbgrader's exchange hands assignments and feedback through;
    ``hide``: more folders graded kernels must not see (a worker hides the main course root);
    ``sandboxed``/``warm``: how kernels run (``helpers.grading.execute.GuardedExecute``).
    """
    from nbgrader.apps import NbGraderAPI

    config = configure(Config(), root, exchange=exchange)
    if timeout is not None:
        config.Execute.timeout = timeout
    config.GuardedExecute.hidden_paths = [*config.GuardedExecute.hidden_paths, *map(str, hide)]
    config.GuardedExecute.sandbox = sandboxed
    config.GuardedExecute.warm = warm
    return NbGraderAPI(config=config)


def prepare(lesson: str, root: Path) -> None:
    """Record the lesson (and its hidden tests) in the grading root's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    from tooling.build import build_solutions

    build_solutions(lessons=[lesson])
    Path(root).mkdir(parents=True, exist_ok=True)
    api = course_api(root)
    # Recording the lesson regenerates its student version: into the root's release/, so the
    # committed notebooks/ are never rewritten by grading.
    api.coursedir.release_directory = str(Path(root).resolve() / "release")
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


# ------------------------------------------------------------------ grading in workers


def _worker(lesson: str, root: Path, students: list[str], timeout: int | None,
            warm: bool = True, sandboxed: bool = True, hide: tuple[str, ...] = ()) -> dict:
    """Autograde ``students`` in the course root ``root``.

    Returns ``{"outcome": {student: "" or why it could not be graded}, "machinery": ""}``;
    ``machinery`` says why grading stopped early when the machinery failed (a kernel that
    cannot start, or the same failure three submissions in a row), and the students not
    reached are left out of ``outcome``.
    """
    api = course_api(root, timeout, hide=hide, sandboxed=sandboxed, warm=warm)
    outcome: dict[str, str] = {}
    streak: list[str] = []  # the last students who failed, all for the same reason
    own = _OwnStreak(lesson, Path(root), min(REPEATED_FAILURES, len(students)))
    for student in students:
        begin = time.perf_counter()
        result = api.autograde(lesson, student, force=True, create=True)
        SECONDS_PER_NOTEBOOK.append(time.perf_counter() - begin)
        if result["success"]:
            outcome[student], streak = "", []
            if own.add(student):
                for s in own.students:
                    del outcome[s]  # the hidden tests failed, not the students: nothing recorded
                return {"outcome": outcome, "machinery": own.reason()}
            continue
        text = f"{result.get('error', '')}\n{result.get('log', '')}"
        if GradingMachineryError.__name__ in text:
            return {"outcome": outcome, "machinery": _machinery_reason(text)}
        reason = _failure_reason(result.get("log", "") + "\n" + result.get("error", ""))
        streak = [*streak, student] if streak and outcome[streak[-1]] == reason else [student]
        outcome[student] = reason
        if len(streak) >= REPEATED_FAILURES and not _student_caused(reason):
            for s in streak:
                del outcome[s]  # the same failure every time: the machinery, not the students
            return {"outcome": outcome, "machinery": f"{len(streak)} submissions in a row failed "
                    f"the same way: {reason}"}
    return {"outcome": outcome, "machinery": ""}


REPEATED_FAILURES = 3
# How a worker starts: nbformat's import pulls in jsonschema's optional IRI checker
# (rfc3987-syntax), which builds a grammar for over a second in every new process; nothing in
# grading validates an IRI, so a worker goes without it.
WORKER_START = ("import sys; sys.modules['rfc3987_syntax'] = None; "
                "from helpers.grading.autograde import main; sys.exit(main())")
SECONDS_PER_NOTEBOOK: list[float] = []  # a worker's start (to warm), then its time for each notebook
LAUNCHED = "ATTENTION_WORKER_LAUNCHED"  # when the worker's process was launched (time.time())


class _OwnStreak:
    """The last submissions in a row whose hidden tests failed on a line of their own, the same
    way (``helpers.grading.hidden_tests``). A submission that never reached that line (a blank
    answer stops its cell first) neither counts nor breaks the row; one that ran it breaks it."""

    def __init__(self, lesson: str, root: Path, limit: int):
        self.lesson, self.root, self.limit = lesson, root, limit
        self.students: list[str] = []
        self.failure = None

    def add(self, student: str) -> bool:
        """Record ``student``'s graded notebook; whether the row is long enough to stop."""
        path = self.root / "autograded" / student / self.lesson / f"{self.lesson}.ipynb"
        if not path.exists():
            return False
        nb = nbformat.read(path, as_version=4)
        failures = list(hidden_tests.own_failures(nb, self.lesson).values())
        same = [f for f in failures if self.failure is not None and f.key == self.failure.key]
        if same:
            self.students.append(student)
        elif failures:
            self.students, self.failure = [student], failures[0]
        elif self.failure is not None and hidden_tests.ran_without_error(nb, self.failure.statement):
            self.students, self.failure = [], None
        return bool(self.students) and len(self.students) >= self.limit

    def reason(self) -> str:
        return (f"{len(self.students)} submissions in a row failed on a line of the hidden tests "
                f"themselves, which no answer changes: {self.failure} — the grading environment or "
                f"the lesson's hidden tests are broken, not the students' work")


def _student_caused(reason: str) -> bool:
    return reason.startswith(("not a readable notebook", "the notebook"))


def _machinery_reason(text: str) -> str:
    for line in reversed(text.splitlines()):
        if GradingMachineryError.__name__ in line:
            return line.split(GradingMachineryError.__name__, 1)[1].lstrip(": ").strip() or line
    return "the grading machinery failed"


# What an error in a graded cell says about the limits the cell ran into (see helpers.grading.sandbox).
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


def launch_workers(lesson: str, root: Path, workers: int, timeout: int | None, warm: bool = True,
                   sandboxed: bool = True,
                   check_environment: bool = False) -> list[tuple[Path, subprocess.Popen]]:
    """Start ``workers`` grading processes ahead of the class they will grade: each imports
    nbgrader and starts its warm server (the libraries every kernel needs) while this process
    imports the submissions, then waits for its share of the students on stdin
    (``_run_workers``). Nothing is graded until a share arrives; ``stop_workers`` ends the ones
    that never get one. With ``check_environment``, the first worker's server first runs the
    ``preflight`` and prints its outcome as one line (``_preflight_of``): no server is started
    for the check alone."""
    root = Path(root).resolve()
    # Each worker's kernels get their share of the cores: two kernels each running PyTorch on
    # every core spend their time waiting for each other (lesson 07 graded twice as slowly).
    # A worker is a grader, but nothing in it needs the grader's tokens or keys: it gets the
    # kernels' allow-list (helpers.grading.sandbox.kernel_environment) and the grader's HOME.
    env = sandbox.kernel_environment(home=os.environ.get("HOME") or os.path.expanduser("~"))
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(workers, 1))))
    procs = []
    for i in range(max(workers, 1)):
        wroot = root / ".workers" / f"w{i}"
        shutil.rmtree(wroot, ignore_errors=True)
        (wroot / "submitted").mkdir(parents=True)
        args = [sys.executable, "-c", WORKER_START, "--worker", lesson, str(wroot),
                "--hide", str(root), *(["--timeout", str(timeout)] if timeout else []),
                *([] if warm else ["--cold"]), *([] if sandboxed else ["--no-sandbox"]),
                *(["--check-environment-of", str(root)] if check_environment and i == 0 else []),
                "--students", "-"]
        with (wroot / "worker.log").open("w") as log:  # nbgrader's log: read on a crash
            launched = {**env, LAUNCHED: str(time.time())}
            procs.append((wroot, subprocess.Popen(args, cwd=ROOT, env=launched, stdin=subprocess.PIPE,
                                                  stdout=subprocess.PIPE, stderr=log, text=True)))
    return procs


def _preflight_of(worker: tuple[Path, subprocess.Popen]) -> None:
    """Wait for the ``preflight`` of the first worker; raise ``GradingMachineryError`` with its
    error, or with the end of the worker's log if it ended without saying."""
    wroot, proc = worker
    line = proc.stdout.readline()
    try:
        why = json.loads(line)["preflight"]
    except (ValueError, KeyError, TypeError):
        proc.wait()
        err = (wroot / "worker.log").read_text(errors="replace")
        tail = " ".join(err.strip().splitlines()[-3:])[:400]
        raise GradingMachineryError("the grading worker that checks the environment ended before "
                                    f"it could ({tail or 'no output'})") from None
    if why:
        raise GradingMachineryError(why)


def stop_workers(procs: list[tuple[Path, subprocess.Popen]], wait_s: float = 120) -> None:
    """End workers that are still waiting for a share (grading stopped before it began): an empty
    share lets each stop its warm server on the way out; one that does not end in ``wait_s`` is
    killed."""
    for _, proc in procs:
        if proc.poll() is None and not proc.stdin.closed:
            try:
                proc.stdin.write("[]\n")
                proc.stdin.close()
            except OSError:
                pass
    for _, proc in procs:
        if proc.returncode is None:  # its result was not read
            try:
                proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
            _output(proc)


def _output(proc: subprocess.Popen) -> str:
    """What a worker printed, once it has ended (its stdin is closed; its stderr goes to its log)."""
    out = proc.stdout.read()
    proc.wait()
    return out


def _run_workers(lesson: str, root: Path, students: list[str], launched: list[tuple[Path, subprocess.Popen]],
                 timings: dict[str, float] | None = None) -> tuple[dict[str, str], str]:
    """Split the class over the ``launched`` workers, each with its own copy of the gradebook;
    merge what they graded. Returns ({student: "" or why not graded}, why the machinery stopped).
    ``timings`` gets where the time went: the workers' wall time, their start (warm server
    included), each worker's first notebook, the median of the others, and the merge."""
    timings = {} if timings is None else timings
    begin = time.perf_counter()
    root = Path(root).resolve()
    n = len(launched)
    shares = [students[i::n] for i in range(n)]
    procs = []
    for (wroot, proc), share in zip(launched, shares, strict=True):
        if share:
            shutil.copy2(root / "gradebook.db", wroot / "gradebook.db")
            for student in share:
                (wroot / "submitted" / student).symlink_to((root / "submitted" / student).resolve())
        try:
            proc.stdin.write(json.dumps(share) + "\n")
            proc.stdin.close()
        except OSError:
            pass  # the worker died while starting: its empty answer says so below
        if share:
            procs.append((wroot, share, proc))
        else:
            _output(proc)
    outcome: dict[str, str] = {}
    stopped = ""
    results = []
    for wroot, share, proc in procs:
        out = _output(proc)
        try:
            results.append((wroot, share, json.loads(out.strip().splitlines()[-1])))
        except (ValueError, IndexError):
            err = (wroot / "worker.log").read_text(errors="replace")
            tail = " ".join(err.strip().splitlines()[-3:])[:400]
            stopped = stopped or f"a grading worker crashed ({tail or 'no output'})"
            continue
        stopped = stopped or results[-1][2]["machinery"]
    timings["workers"] = time.perf_counter() - begin
    starts = [r["seconds"][0] for *_, r in results if len(r.get("seconds", [])) > 1]
    firsts = [r["seconds"][1] for *_, r in results if len(r.get("seconds", [])) > 1]
    others = sorted(t for *_, r in results for t in r.get("seconds", [])[2:])
    if starts:
        timings["start of a worker, warm server included (overlaps the above)"] = max(starts)
    if firsts:
        timings["first notebook of a worker (warm-up included)"] = max(firsts)
    if others:
        timings["each further notebook (median)"] = others[len(others) // 2]
    begin = time.perf_counter()
    for wroot, share, result in results:
        if stopped:  # the machinery failed: what the hidden tests failed on by themselves is not kept
            for student in [s for s in share if result["outcome"].get(s) == ""]:
                graded_nb = wroot / "autograded" / student / lesson / f"{lesson}.ipynb"
                if graded_nb.exists() and hidden_tests.own_failures(graded_nb, lesson):
                    del result["outcome"][student]
        outcome.update(result["outcome"])
        done = [s for s in share if result["outcome"].get(s) == ""]
        with records.gradebook(root) as gb:
            hand = {s: records.hand_graded(gb, lesson, s) for s in done}
            waiting = {s: records.hand_grades_to_review(gb, lesson, s) for s in done if hand[s]}
        records.merge(lesson, wroot, root, done)
        for student in done:
            dest = root / "autograded" / student / lesson
            # the copy the hand grades were given on, before it is replaced
            changed = cells.changed_answers(lesson, dest / f"{lesson}.ipynb",
                                              wroot / "autograded" / student / lesson / f"{lesson}.ipynb",
                                              hand[student])
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(wroot / "autograded" / student / lesson, dest)
            if hand[student]:  # flagged before and not graded again since: still waiting
                records.review_hand_grades(root, lesson, student, sorted({*changed, *waiting[student]}))
    timings["merge"] = time.perf_counter() - begin
    return outcome, stopped


# ------------------------------------------------------------------ synthetic classes

_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def solution_answers(lesson: str) -> dict[str, str]:
    """grade_id -> each solution cell's text as a student would type it (no markers)."""
    from tooling.build import solution_notebook

    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(
        line for line in c.source.splitlines() if not _MARKERS.match(line))
        for c in solution_notebook(lesson).cells if c.metadata.get("nbgrader", {}).get("solution")}


def fill_notebook(lesson: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The committed student notebook with the solution cells in ``answers`` filled in."""
    nb = nbformat.read(_released(lesson), as_version=4)
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


def _released(lesson: str) -> Path:
    """The released student notebook of ``lesson``, or a ValueError naming what is missing."""
    released = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    if not released.exists():
        raise ValueError(f"no lesson {lesson!r}: {released} does not exist")
    return released


def preflight(lesson: str, root: Path = COURSE_ROOT, timeout: int | None = None,
              sandboxed: bool = True, warm: bool = True, *, api=None, work_root: Path | None = None) -> None:
    """Start one graded kernel, exactly as grading will, on the released lesson's setup cells;
    in it, run every import the lesson's hidden tests (recorded in ``root``) make and check that
    the course package it imports is this course's (``helpers.grading.environment``).

    ``api``: a grading worker's nbgrader API, whose warm server (kept running) starts that kernel
    in the worker's folder ``work_root``; without it, a server of its own, stopped at the end.

    Raises ``GradingMachineryError`` with the real error when that fails (no kernel, a broken
    sandbox, a missing library, an environment set up for another checkout): then nothing is
    graded and no score is touched.
    """
    from . import environment
    from .execute import GuardedExecute, stop_servers

    nb = nbformat.read(_released(lesson), as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells = nb.cells[: first + 1]  # the setup cell: the imports every graded cell relies on
    imports = hidden_tests.imports(lesson, root)
    nb.cells.append(nbformat.v4.new_code_cell(environment.probe_code(list(imports))))
    nb.cells.append(nbformat.v4.new_code_cell("print('ready')"))
    own_server = api is None
    api = api or course_api(root, timeout, sandboxed=sandboxed, warm=warm)
    work = Path(work_root or root).resolve() / ".preflight" / lesson
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        GuardedExecute(config=api.config).preprocess(
            nb, {"metadata": {"path": str(work)}, "nbgrader": {"db_url": api.coursedir.db_url}})
    finally:
        if own_server:
            stop_servers()
        shutil.rmtree(work, ignore_errors=True)
    out = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    if "ready" not in out:
        raise GradingMachineryError("a grading kernel ran the setup cell but not the next one: "
                                    f"{nb.cells[-1].get('outputs')}")
    found = environment.read_probe("".join(o.get("text", "") for o in nb.cells[-2].get("outputs", [])))
    if found is None:
        raise GradingMachineryError("a grading kernel could not describe its environment: "
                                    f"{nb.cells[-2].get('outputs')}")
    wrong = environment.problems(found, imports)
    if wrong:
        raise GradingMachineryError("the grading environment is not this course's:\n  - "
                                    + "\n  - ".join(wrong))


def grade_class(lesson: str, submissions: Path, root: Path = COURSE_ROOT, workers: int = 2,
                pattern: str = DEFAULT_PATTERN, timeout: int | None = None,
                feedback: bool = True, warm: bool = True, sandboxed: bool = True,
                only: list[str] | None = None, due: str | None = None,
                keep_latest: bool = False, tz: str = "UTC",
                hand_in_times: dict[str, str] | None = None) -> ClassReport:
    """Import, autograde (in parallel), record what could not be graded, hold tampering for
    review, feedback, export; a report.

    ``only``: grade just these students (the others' grades stay as they are); ``due``: later
    hand-ins are named late (report, ``handins_<lesson>.csv``, nbgrader's late penalty);
    ``hand_in_times``: student -> why their hand-in times disagree (the exchange's collection).
    Raises ``GradingMachineryError`` before touching anything when a graded kernel cannot start.
    """
    start = time.perf_counter()
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    report = ClassReport(lesson, hand_in_times=dict(hand_in_times or {}))
    report.isolation = sandbox.status() if sandboxed else \
        "WARNING: NOT SANDBOXED — sandboxing was switched off for this run"
    _released(lesson)
    launched = launch_workers(lesson, root, min(workers, len(only)) if only else workers, timeout, warm,
                              sandboxed, check_environment=True)
    try:
        return _grade_class(lesson, submissions, root, launched, report, start, pattern, timeout, feedback,
                            warm, sandboxed, only, due, keep_latest, tz)
    finally:
        stop_workers(launched)


def _grade_class(lesson: str, submissions: Path, root: Path, launched, report: ClassReport, start: float,
                 pattern: str, timeout: int | None, feedback: bool, warm: bool, sandboxed: bool,
                 only: list[str] | None, due: str | None, keep_latest: bool, tz: str) -> ClassReport:
    from .integrity import explain, graded_output_findings, is_tampering, scan_class, summarise, write_report
    from .platforms import export as write_platform_files

    # While the first worker checks the environment: the files are copied in and scanned, which
    # records nothing in the gradebook; no score is touched before the check has passed.
    imported = import_submissions(lesson, submissions, root, pattern, keep_latest=keep_latest, tz=tz)
    students, report.imported = imported.students, imported.lines()
    if only:
        report.imported += [f"  {s}: left as it is (not among the students asked for)"
                            for s in students if s not in only]
        missing = sorted(set(only) - set(students))
        if missing:
            raise ValueError(f"no submission of {', '.join(missing)} in {submissions}")
        students = [s for s in students if s in only]
    released = _released(lesson)
    scanned = scan_class(root, lesson, released)
    report.timings["import and scan"] = time.perf_counter() - start
    _preflight_of(launched[0])
    report.timings["environment check (after the import)"] = \
        time.perf_counter() - start - report.timings["import and scan"]
    prepare(lesson, root)
    with records.gradebook(root) as gb:
        if due:
            from nbgrader.utils import parse_utc

            gb.update_or_create_assignment(lesson, duedate=parse_utc(due))
        for student in students:
            gb.update_or_create_student(student)
        report.max_score = sum(g.max_score for g in gb.find_notebook(lesson, lesson).grade_cells
                               if g.cell_type == "code")

    _hand_in_times(report, imported, students, due, root / f"handins_{lesson}.csv")
    report.integrity = {s: f for s, f in scanned.items() if s in students}
    write_report(report.integrity, root / f"integrity_{lesson}.csv")
    gradable = []
    for student in students:
        why = imported.unreadable.get(student) or (
            f"this is the notebook of lesson {imported.wrong_lesson[student]}, not {lesson}"
            if student in imported.wrong_lesson else None)
        if why:
            report.failed[student] = why
        else:
            gradable.append(student)
    outcome, report.machinery = _run_workers(lesson, root, gradable, launched, report.timings)
    after = time.perf_counter()
    report.not_reached = [s for s in gradable if s not in outcome]
    report.failed.update({s: why for s, why in outcome.items() if why})
    for student, why in report.failed.items():
        when = imported.timestamps.get(student)
        if not records.record_not_graded(root, lesson, student, why, when and when.time):
            report.kept.append(student)
    graded_now = [s for s, why in outcome.items() if not why]
    for student in graded_now:  # and what the code displayed as it ran, which its source does not show
        graded_nb = root / "autograded" / student / lesson / f"{lesson}.ipynb"
        shown = graded_output_findings(graded_nb) if graded_nb.exists() else []
        if shown:
            report.integrity[student] = [*report.integrity.get(student, []), *shown]
    write_report(report.integrity, root / f"integrity_{lesson}.csv")
    for student in graded_now:
        findings = report.integrity.get(student, [])
        if is_tampering(findings):
            records.hold_for_review(root, lesson, student, explain(findings), summarise(findings))
            report.zeroed.append(student)
        elif findings:
            records.flag(root, lesson, student, summarise(findings))
    with records.gradebook(root) as gb:
        for student in graded_now:
            report.graded[student] = records.total(gb, lesson, student)
            if student in report.zeroed:
                report.page_scores[student] = records.page_score(gb, lesson, student)
            waiting = records.hand_grades_to_review(gb, lesson, student)
            if waiting:
                report.hand_grades[student] = waiting
    for student in graded_now:
        graded_nb = root / "autograded" / student / lesson / f"{lesson}.ipynb"
        events = cell_events(graded_nb)
        if "time limit" in events:
            report.interrupted[student] = events.pop("time limit")
        if "kernel died" in events:
            report.crashed[student] = events.pop("kernel died")
        if events:
            report.limited[student] = [f"{event} in {', '.join(cells)}"
                                       for event, cells in sorted(events.items())]
        own = hidden_tests.own_failures(graded_nb, lesson) if graded_nb.exists() else {}
        if own:
            report.own_failures[student] = [f"{cell} ({why})" for cell, why in own.items()]
    if feedback:
        try:
            write_feedback(lesson, root, graded_now, problems=report.no_feedback)
        except GradingMachineryError as err:  # the scores are recorded: say so, student by student
            report.no_feedback.update(dict.fromkeys(graded_now, str(err)))
        for student, why in report.failed.items():
            not_graded_page(lesson, root, student, why, kept=student in report.kept)
    # The whole class, not only this run's students: a one-student regrade rewrites every row,
    # and a student the run did not reach counts with the score kept from before.
    everyone = records.class_status(root, lesson)
    status = everyone | {s: "graded" for s in [*report.graded, *report.kept]} | \
        {s: "zeroed" for s in report.zeroed} | \
        {s: "unreadable" for s in report.failed if s not in report.kept} | \
        {s: "not graded" for s in report.not_reached if s not in everyone}
    report.mistakes = export(lesson, root, status)
    report.platforms = write_platform_files(lesson, root)  # Moodle, Canvas, Blackboard gradebook imports
    report.timings["feedback, tables, platform files"] = time.perf_counter() - after
    report.seconds = time.perf_counter() - start
    return report


def _hand_in_times(report: ClassReport, imported, students: list[str], due: str | None,
                   table: Path) -> None:
    """Who handed in when, and how late after ``due``: into ``report`` and the CSV ``table``
    (student, handed_in, time_from, due, late_seconds, hand_in_time_finding)."""
    import csv
    from datetime import UTC

    from nbgrader.utils import parse_utc

    deadline = parse_utc(due) if due else None  # naive UTC, as nbgrader keeps it
    rows = []
    for student in students:
        when = imported.timestamps.get(student)
        late = ""
        if when is not None:
            report.handed_in[student] = f"{when.time:%Y-%m-%d %H:%M:%S} UTC"
            if deadline is not None:
                seconds = (when.time.astimezone(UTC).replace(tzinfo=None) - deadline).total_seconds()
                late = str(max(math.ceil(seconds), 0))  # a fraction of a second late is late: 1, not 0
                if seconds > 0:
                    report.late[student] = seconds
        rows.append({"student": student, "handed_in": report.handed_in.get(student, ""),
                     "time_from": when.source if when else "", "due": f"{deadline} UTC" if deadline else "",
                     "late_seconds": late, "hand_in_time_finding": report.hand_in_times.get(student, "")})
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "handed_in", "time_from", "due", "late_seconds",
                                               "hand_in_time_finding"])
        writer.writeheader()
        writer.writerows(rows)


# What nbgrader's release reads beside each student's feedback page: the submission's time and
# the secret its Submit wrote, from which the page's name in the exchange is made.
RELEASE_NEEDS = ("timestamp.txt", "submission_secret.txt")


def release_feedback(lesson: str, root: Path = COURSE_ROOT,
                     problems: dict[str, str] | None = None) -> list[str]:
    """Hand the lesson's feedback pages to the students through nbgrader's exchange, one student
    at a time; the students who got theirs. One whose pages cannot be released is named in
    ``problems`` with the file and why, and the others still get theirs; when not one can be
    released (the exchange itself is broken), ``GradingMachineryError``."""
    problems = {} if problems is None else problems
    api = course_api(root)
    released, failed, logs = [], {}, []
    for folder in sorted((Path(root) / "feedback").glob(f"*/{lesson}")):
        student = folder.parent.name
        submitted = Path(root) / "submitted" / student / lesson
        for name in RELEASE_NEEDS:  # a page for a submission that could not be graded has none
            if not (folder / name).is_file() and (submitted / name).is_file():
                shutil.copy2(submitted / name, folder / name)
        missing = [name for name in RELEASE_NEEDS if not (folder / name).is_file()]
        if not any(folder.glob("*.html")):
            problems[student] = f"no feedback page in {folder}"
        elif missing:
            problems[student] = (f"{' and '.join(missing)} missing in {folder} (nbgrader's Submit writes "
                                 f"it: this submission was not handed in through the exchange)")
        else:
            result = api.release_feedback(lesson, student)
            if result["success"]:
                released.append(student)
            else:
                failed[student] = f"nbgrader could not release it: {_last_line(result)}"
                logs.append(result.get("log", "") or result.get("error", ""))
    if failed and not released:
        raise GradingMachineryError(f"nbgrader could not release the feedback of {lesson} to any "
                                    f"student:\n{logs[0]}")
    problems.update(failed)
    return released


def _last_line(result: dict) -> str:
    """The last line nbgrader logged for a failed step (its error, else its log)."""
    text = f"{result.get('log', '')}\n{result.get('error', '')}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no log"


def write_feedback(lesson: str, root: Path = COURSE_ROOT, students: list[str] | None = None,
                   problems: dict[str, str] | None = None) -> list[Path]:
    """nbgrader's feedback pages, from the gradebook (hand grades and comments included) and
    the autograded notebooks: no student code runs. Default: every graded student. A student
    whose page nbgrader cannot write is named in ``problems`` and the others still get theirs;
    when every page fails, ``GradingMachineryError``."""
    api = course_api(root)
    if students is None:
        students = sorted(p.parent.name for p in (Path(root) / "autograded").glob(f"*/{lesson}")
                          if (p / f"{lesson}.ipynb").exists())
    pages, failed = [], {}
    for student in students:
        result = api.generate_feedback(lesson, student, force=True)
        if not result["success"]:
            failed[student] = f"nbgrader could not write the feedback page: {_last_line(result)}"
            continue
        for page in (Path(root) / "feedback" / student / lesson).glob("*.html"):
            offline_feedback(page)
            pages.append(page)
    if failed and len(failed) == len(students):
        student, why = next(iter(failed.items()))
        raise GradingMachineryError(f"no feedback page of {lesson} could be written ({student}: {why})")
    if failed and problems is None:
        raise RuntimeError("; ".join(f"{s}: {why}" for s, why in failed.items()))
    if problems is not None:
        problems.update(failed)
    return pages


def not_graded_page(lesson: str, root: Path, student: str, why: str, kept: bool = False) -> Path:
    """A feedback page for a submission that could not be graded, saying why."""
    import html

    score = ("Your earlier score for this lesson stays as it was." if kept else
             "It is recorded as 0 for now; once you send a notebook that can be graded, it will be.")
    page = Path(root) / "feedback" / student / lesson / f"{lesson}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(lesson)}: not graded"
        f"</title></head><body style='font-family:sans-serif;max-width:42em;margin:2em auto'>"
        f"<h1>{html.escape(lesson)}: your submission could not be graded</h1>"
        f"<p><b>Why:</b> {html.escape(why)}.</p><p>{score}</p>"
        f"<p>Open the lesson in JupyterLab, check that it runs and that you saved it as "
        f"<code>{html.escape(lesson)}.ipynb</code>, and send it again — or ask your instructor."
        f"</p></body></html>\n")
    return page


def return_zips(lesson: str, root: Path = COURSE_ROOT) -> list[Path]:
    """One zip per student with their feedback, to upload to a learning platform."""
    out = Path(root) / "return" / lesson
    out.mkdir(parents=True, exist_ok=True)
    zips = []
    for folder in sorted((Path(root) / "feedback").glob(f"*/{lesson}")):
        student = folder.parent.name
        path = out / f"{student}_{lesson}_feedback.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for page in sorted(folder.glob("*.html")):
                archive.write(page, page.name)
        zips.append(path)
    return zips


def export(lesson: str, root: Path, status: dict[str, str]) -> list[str]:
    """``grades.csv`` (nbgrader's export of the whole gradebook) and, for the students in
    ``status`` (the whole class), ``summary_<lesson>.csv``, ``mistakes_<lesson>.csv`` and
    ``mistakes_<lesson>.png`` (``helpers.grading.mistakes``); returns the report's lines on the
    mistakes."""
    from nbgrader.plugins import CsvExportPlugin

    from .mistakes import class_tables, mistakes_lines, write_class_report

    with records.gradebook(root) as gb:
        CsvExportPlugin(to=str(Path(root) / "grades.csv")).export(gb)
    released = _released(lesson)
    tables = class_tables(root, lesson, status, released)
    write_class_report(root, lesson, status, released, tables)
    return mistakes_lines(tables)


def benchmark(lesson: str, n: int, workers: int = 2) -> list[tuple[str, float]]:
    """Grade the same generated class of ``n`` with nbgrader's own ``nbgrader autograde`` (one
    process, one notebook at a time; still sandboxed, as every path is) and with ``grade_class``
    (``workers`` processes); print and return notebooks per minute."""
    import tempfile

    rates = []
    with tempfile.TemporaryDirectory() as tmp:
        fake_class(lesson, Path(tmp) / "class", n)
        for label in ("sequential nbgrader autograde", f"make grade, {workers} workers"):
            root = Path(tmp) / f"root{len(rates)}"
            prepare(lesson, root)  # recording the lesson is paid once per course, not timed
            if label.startswith("sequential"):
                import_submissions(lesson, Path(tmp) / "class", root)
                (root / "nbgrader_config.py").write_text(
                    "from helpers.grading.settings import configure\n"
                    f"configure(get_config(), {str(root)!r})\n")
                begin = time.perf_counter()
                subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "autograde", lesson,
                                "--force"], cwd=root, check=True, capture_output=True)
                seconds = time.perf_counter() - begin
            else:
                report = grade_class(lesson, Path(tmp) / "class", root, workers, feedback=False)
                seconds = report.seconds
            rates.append((label, 60.0 * n / seconds))
            print(f"{label:>32}: {seconds:6.1f} s for {n} notebooks = {rates[-1][1]:5.1f} per minute",
                  flush=True)
        print("where make grade's time went:")
        for phase, took in report.timings.items():
            print(f"{phase:>50}: {took:6.2f} s")
    print(f"speed-up: {rates[-1][1] / rates[0][1]:.2f}x")
    return rates


def _feedback(lesson: str, root: Path, zips: bool, release: bool) -> int:
    """``--feedback``: every page that can be written, zipped and released is; then each student
    who could not be served is named with why, and the exit status is 1 (2: the machinery)."""
    problems: dict[str, str] = {}
    try:
        pages = write_feedback(lesson, root, problems=problems)
        print(f"{len(pages)} feedback pages in {root / 'feedback'}")
        if zips:
            made = return_zips(lesson, root)
            print(f"{len(made)} zips to return in {root / 'return' / lesson}")
        if release:
            released = release_feedback(lesson, root, problems)
            print(f"feedback of {lesson} released to {len(released)} student(s): they fetch it in "
                  f"the Assignments tab")
    except GradingMachineryError as err:
        print(f"STOPPED writing or releasing feedback: {err}\nNo score was changed.", file=sys.stderr)
        return 2
    for student, why in sorted(problems.items()):
        print(f"NO FEEDBACK for {student}: {why}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Autograde a class's submissions of one lesson, or redo its feedback.",
        epilog="Exit status: 0 when every submission was accounted for, 2 when the grading "
               "machinery failed (nothing or only part was graded; no score was lost); with "
               "--feedback, 1 when some students' pages could not be written or released (each "
               "named, the others served).")
    parser.add_argument("lesson")
    parser.add_argument("submissions", type=Path, nargs="?",
                        help="a folder of submissions, or 'exchange' to collect them first from "
                             "nbgrader's exchange (a class hub)")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT,
                        help="course root: gradebook, submitted/, autograded/, feedback/, CSVs "
                             "(default: grading/, the root nbgrader_config.py sets)")
    parser.add_argument("--student", action="append", metavar="ID",
                        help="grade only this student (repeatable); the others are left alone")
    parser.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="regex with a named group student_id, matched at the start of each "
                             "downloaded file's name (default: Moodle, Canvas, Blackboard and "
                             "'<id>_...' names; see helpers/grading/submissions.py)")
    parser.add_argument("--keep-latest", action="store_true",
                        help="when several files map to one student, grade the newest")
    parser.add_argument("--timezone", default="UTC",
                        help="zone of submission times that carry none (default: UTC)")
    parser.add_argument("--due", help="due date, e.g. '2026-03-01 23:59:00 UTC': later submissions are late")
    parser.add_argument("--timeout", type=int, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--no-feedback", action="store_true")
    parser.add_argument("--feedback", action="store_true",
                        help="only redo the feedback pages from the gradebook (hand grades "
                             "included); no student code runs")
    parser.add_argument("--zip", action="store_true",
                        help="with --feedback: also one zip per student in <root>/return/<lesson>/")
    parser.add_argument("--release", action="store_true",
                        help="with --feedback: hand the pages to the students through nbgrader's "
                             "exchange (a class hub), where they fetch them in the Assignments tab")
    parser.add_argument("--restore", metavar="ID",
                        help="take back the hold for review of this student's score")
    parser.add_argument("--preflight", action="store_true",
                        help="only check that a graded kernel starts, runs the setup cell and the "
                             "hidden tests' imports, and imports this course's helpers")
    parser.add_argument("--cold", action="store_true",
                        help="start every kernel from scratch (only without the sandbox)")
    parser.add_argument("--benchmark", type=int, metavar="N",
                        help="grade a generated class of N with plain `nbgrader autograde` and "
                             "with WORKERS workers, and print notebooks per minute")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run students' code with the grader's rights (not recommended)")
    parser.add_argument("--hide", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-environment-of", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--students", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sandbox.private_process()
    if args.worker:  # internal: one worker's share, result as one JSON line on stdout
        students = args.students
        if students == ["-"]:  # started ahead: warm up, then take the share from stdin
            api = course_api(Path(args.submissions), args.timeout, hide=tuple(args.hide),
                             sandboxed=not args.no_sandbox, warm=not args.cold)
            if args.check_environment_of:  # the class's preflight, in this worker's own server
                why = ""
                try:
                    warm_up(api.config, Path(args.submissions))
                    preflight(args.lesson, args.check_environment_of, args.timeout, not args.no_sandbox,
                              not args.cold, api=api, work_root=Path(args.submissions))
                except (GradingMachineryError, Exception) as err:  # GradingMachineryError is no Exception
                    why = str(err) or repr(err)
                print(json.dumps({"preflight": why}), flush=True)
                if why:
                    return 0
            else:
                warm_up(api.config, Path(args.submissions))
            if os.environ.get(LAUNCHED):
                SECONDS_PER_NOTEBOOK.append(time.time() - float(os.environ[LAUNCHED]))
            students = json.loads(sys.stdin.readline() or "[]")
            if not students:
                return 0
        result = _worker(args.lesson, Path(args.submissions), students, args.timeout,
                         warm=not args.cold, sandboxed=not args.no_sandbox, hide=tuple(args.hide))
        print(json.dumps({**result, "seconds": SECONDS_PER_NOTEBOOK}))
        return 0
    if args.benchmark:
        benchmark(args.lesson, args.benchmark, args.workers)
        return 0
    try:
        if args.preflight:
            preflight(args.lesson, args.root, args.timeout, not args.no_sandbox, not args.cold)
            print(f"{args.lesson}: a graded kernel starts, runs the setup cell and every import of the "
                  f"hidden tests, and imports this course's helpers ({sandbox.status()})")
            return 0
        if args.restore:
            score = records.restore(args.root, args.lesson, args.restore)
            print(f"{args.restore}: the hold is taken back; {args.lesson} scores {score:g} again "
                  f"(run `make feedback LESSON={args.lesson}` to update the feedback page)")
            return 0
        if args.feedback:
            return _feedback(args.lesson, args.root, args.zip, args.release)
        if args.submissions is None:
            parser.error("give the folder of submissions")
        collection = None
        if str(args.submissions) == "exchange":  # each submission from its owner only
            collection = exchange.collect(args.lesson, args.root)
            print("\n".join(collection.lines()))
            args.submissions = collection.folder
            print(f"collected from the exchange into {args.submissions}")
        report = grade_class(args.lesson, args.submissions, args.root, args.workers, args.pattern,
                             args.timeout, feedback=not args.no_feedback, warm=not args.cold,
                             sandboxed=not args.no_sandbox, only=args.student, due=args.due,
                             keep_latest=args.keep_latest, tz=args.timezone,
                             hand_in_times=collection.times if collection is not None else None)
    except GradingMachineryError as err:
        print(f"STOPPED before grading: {err}\nNo score was changed.", file=sys.stderr)
        return 2
    except (ValueError, DuplicateStudentError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if collection is not None:
        report.imported += [f"  {line}" for line in collection.refusals()
                            if not line.startswith("HAND-IN TIME")]  # the report names those itself
    text = "\n".join(report.lines())
    print(text)
    (args.root / f"report_{args.lesson}.txt").write_text(text + "\n")
    print(f"gradebook: {args.root / 'gradebook.db'}; grades: {args.root / 'grades.csv'}; "
          f"per grade cell: {args.root / f'summary_{args.lesson}.csv'}; hand-in times: "
          f"{args.root / f'handins_{args.lesson}.csv'}; feedback: {args.root / 'feedback'}; "
          f"this report: {args.root / f'report_{args.lesson}.txt'}")
    return 2 if report.machinery else 1 if report.no_feedback else 0


if __name__ == "__main__":
    sys.exit(main())
