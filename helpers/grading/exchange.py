"""Collect a lesson's submissions from nbgrader's exchange on a class hub, each from its owner.

    python -m helpers.grading.exchange LESSON                      # every submission and its verdict
    python -m helpers.grading.exchange LESSON --discard 'ENTRY'    # never collect this one again

A student's *Submit* leaves a folder ``<student>+<lesson>+<time>+<random>`` in the exchange's
``inbound/``, made by (and owned by) that student's Linux account. Anyone can write there, so the
name proves nothing: a student can make a folder named after a classmate. nbgrader's own collect
only warns when the owner and the name differ, and then takes the newest folder per name, so a
fake with a later time would be graded in the classmate's place. Here the rule is strict:

- a folder whose Linux owner is not the student it names (or no account at all), and anything
  that is not a plain folder (a link), is refused: never copied, never graded, named with its
  owner in the report;
- of each student's accepted folders, the newest is collected into
  ``<root>/collected/<student>/<lesson>/``, replacing what an earlier collection put there; a
  student with no accepted folder left loses the earlier copy, so a regrade never grades a
  submission that has since been refused or discarded;
- only the student's own regular files are copied (no links into other people's files);
- the hand-in time is the later of what the student wrote (the name, ``timestamp.txt``) and when
  the file system recorded the files written (``recorded_time``); the collected copy's
  ``timestamp.txt`` says that time, and a mismatch of more than ``TIME_TOLERANCE_S`` is named.

Submissions belong to the students, so an instructor cannot delete one; ``--discard`` records its
name in ``<root>/discarded.txt`` instead, and no collection takes it again.
"""

from __future__ import annotations

import argparse
import getpass
import os
import pwd
import shutil
import stat
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .settings import COURSE_ID, COURSE_ROOT, DEFAULT_EXCHANGE
from .submissions import TIMESTAMP_FORMAT

DISCARDED = "discarded.txt"
# The student writes both the folder's name and its timestamp.txt, so either can say any time.
# The time that counts is the later of those and of what the file system recorded, which no user
# can set back; further apart than this, the mismatch is named in the report.
TIME_TOLERANCE_S = 120


class ExchangeError(ValueError):
    """The exchange cannot be read as a class hub's instructor expects; the message says why."""


@dataclass
class Entry:
    """One folder in the exchange's inbound/: who it names, who owns it, when it was handed in."""

    name: str
    path: Path
    student: str
    when: datetime | None  # None: the time in the name cannot be read
    owner: str | None  # the Linux account that owns the folder; None: no such account
    refused: str = ""  # why it is not collected; empty when it is accepted
    recorded: datetime | None = None  # when the file system saw it last written (``recorded_time``)
    written: datetime | None = None  # the time in its timestamp.txt, if readable

    @property
    def counted(self) -> datetime | None:
        """The hand-in time that counts: the latest of the name's, timestamp.txt's and the
        file system's."""
        times = [t for t in (self.when, self.written, self.recorded) if t is not None]
        return max(times) if times else None

    def time_finding(self) -> str:
        """What the report says when the times the student wrote and the file system's disagree
        by more than ``TIME_TOLERANCE_S``; "" when they agree."""
        claimed = max((t for t in (self.when, self.written) if t is not None), default=None)
        if claimed is None or self.recorded is None:
            return ""
        gap = (self.recorded - claimed).total_seconds()
        if abs(gap) <= TIME_TOLERANCE_S:
            return ""
        said = f"{self.student}'s {self.name!r} says it was handed in at {claimed:%Y-%m-%d %H:%M:%S} UTC"
        if gap > 0:
            return (f"{said}, but the exchange recorded its files at {self.recorded:%Y-%m-%d %H:%M:%S} "
                    f"UTC, {gap:.0f} s later: the later time counts")
        return f"{said}, {-gap:.0f} s after the exchange recorded its files: the later time counts"


@dataclass
class Collection:
    """What one collection took, refused and removed."""

    lesson: str
    folder: Path
    collected: dict[str, Entry] = field(default_factory=dict)  # student -> the entry collected
    refused: list[Entry] = field(default_factory=list)
    discarded: list[Entry] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # students whose earlier copy was taken away
    skipped: list[str] = field(default_factory=list)  # files inside accepted entries not copied
    times: dict[str, str] = field(default_factory=dict)  # student -> the hand-in times disagree

    def refusals(self) -> list[str]:
        """The report's lines about what was not collected, and why."""
        out = [f"REFUSED {e.name!r}: {e.refused} (not collected, not graded)" for e in self.refused]
        out += [f"discarded by an instructor: {e.name!r} (owner {e.owner})" for e in self.discarded]
        out += [f"{s}: no accepted submission in the exchange now; the earlier collected copy was "
                "removed (their recorded score stays until they submit again)" for s in self.removed]
        out += [f"not copied: {why}" for why in self.skipped]
        out += [f"HAND-IN TIME of {s}: {why}" for s, why in sorted(self.times.items())]
        return out

    def lines(self) -> list[str]:
        return [f"{self.lesson}: collected the newest accepted submission of {len(self.collected)} "
                f"student(s) into {self.folder}", *(f"  {line}" for line in self.refusals())]


def exchange_root(exchange: str | Path | None = None) -> Path:
    """The exchange: ``exchange``, else ``$ATTENTION_EXCHANGE`` (the class hub's), else nbgrader's default."""
    return Path(exchange or os.environ.get("ATTENTION_EXCHANGE") or DEFAULT_EXCHANGE)


def _owner(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _when(text: str) -> datetime | None:
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(text).replace(tzinfo=UTC)  # nbgrader's naive UTC, made aware
    except (ValueError, OverflowError, TypeError, AttributeError):
        return None


def recorded_time(folder: Path) -> datetime:
    """When the file system last saw ``folder``'s submission written: the latest inode change
    time (st_ctime) of the folder, its timestamp.txt and the notebooks in it.

    A user can set a file's modified time to anything (``touch -d``) but not its change time,
    which is the moment its content, name or mode last changed and only moves forward. The folder's
    own changes whenever a file is added to or removed from it; the notebooks' and timestamp.txt's
    when they are rewritten after the hand-in (an owner may still write in inbound/). Those are
    what is graded and when: other files inside, or deeper, are left out, so that touching a
    stray file changes nothing. Copying the exchange back from a backup makes every change time
    the restore's, so collect before a restore or grade from a collection made before it."""
    paths = [folder, folder / "timestamp.txt", *folder.glob("*.ipynb")]
    times = []
    for path in paths:
        try:
            st = path.lstat()
        except OSError:
            continue
        if path == folder or stat.S_ISREG(st.st_mode):
            times.append(st.st_ctime)
    return datetime.fromtimestamp(max(times), UTC)


def read_entry(path: Path) -> Entry:
    """The entry at ``path`` and, if it must be refused, why (``Entry.refused``)."""
    parts = path.name.rsplit("+", 3)  # student+lesson+time[+random], as nbgrader splits it
    student, when = parts[0], _when(parts[2]) if len(parts) >= 3 else None
    st = path.lstat()
    owner = _owner(st.st_uid)
    entry = Entry(path.name, path, student, when, owner)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        kind = "link" if stat.S_ISLNK(st.st_mode) else "file"
        entry.refused = f"not a submission folder but a {kind}, made by {owner or st.st_uid}"
    elif owner is None:
        entry.refused = f"names {student} but is owned by user id {st.st_uid}, which is no account"
    elif owner != student:
        entry.refused = f"names {student} but was handed in by {owner}"
    elif when is None:
        entry.refused = f"the time in its name cannot be read ({parts[2] if len(parts) >= 3 else 'none'})"
    if stat.S_ISDIR(st.st_mode):
        try:
            entry.recorded = recorded_time(path)
            stamp = path / "timestamp.txt"
            if stamp.is_file() and not stamp.is_symlink():
                entry.written = _when(stamp.read_text(errors="replace").strip())
        except OSError:  # unreadable: collecting it says so
            pass
    return entry


def _write_counted_time(entry: Entry, dest: Path) -> None:
    """Write the time that counts (``Entry.counted``) as the collected copy's timestamp.txt,
    which grading reads, in place of the student's own."""
    if entry.counted is not None:
        (dest / "timestamp.txt").write_text(entry.counted.strftime(TIMESTAMP_FORMAT))


def read_discarded(root: Path) -> set[str]:
    """The entry names instructors took out of collection (``--discard``)."""
    path = Path(root) / DISCARDED
    if not path.exists():
        return set()
    return {line.rstrip("\n") for line in path.read_text().splitlines(True)
            if line.strip() and not line.startswith("#")}


def inbound(lesson: str, exchange: str | Path | None = None, course_id: str = COURSE_ID) -> list[Entry]:
    """Every inbound entry of ``lesson``, oldest first, each with its verdict."""
    folder = exchange_root(exchange) / course_id / "inbound"
    if not folder.is_dir():
        raise ExchangeError(f"no inbound folder at {folder}: has {lesson} been released on this exchange?")
    try:
        names = os.listdir(folder)
    except PermissionError:
        raise ExchangeError(f"cannot list {folder}: instructors read it through the group "
                              "attention-instructors (log out and in again after a group change)") from None
    entries = [read_entry(folder / n) for n in names if n.rsplit("+", 3)[1:2] == [lesson]]
    return sorted(entries, key=lambda e: (e.when or datetime.min.replace(tzinfo=UTC), e.name))


def _copy_own_files(entry: Entry, dest: Path, skipped: list[str]) -> None:
    """Copy the regular files ``entry``'s owner made, keeping times; name everything left out."""
    def unreadable(err: OSError):
        raise err

    uid = entry.path.lstat().st_uid
    for here, dirs, files in os.walk(entry.path, onerror=unreadable):
        rel = Path(here).relative_to(entry.path)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(files + [d for d in dirs if (Path(here) / d).is_symlink()]):
            src = Path(here) / name
            st = src.lstat()
            if not stat.S_ISREG(st.st_mode):
                skipped.append(f"{entry.name}/{rel / name}: a link or special file")
            elif st.st_uid != uid:
                skipped.append(f"{entry.name}/{rel / name}: written by {_owner(st.st_uid) or st.st_uid}, "
                               f"not by {entry.owner}")
            else:
                shutil.copy2(src, dest / rel / name, follow_symlinks=False)


def collect(lesson: str, root: Path = COURSE_ROOT, exchange: str | Path | None = None,
            course_id: str = COURSE_ID) -> Collection:
    """Collect the newest accepted submission of each student into ``root/collected/``."""
    root = Path(root)
    result = Collection(lesson, root / "collected")
    discarded = read_discarded(root)
    newest: dict[str, Entry] = {}
    for entry in inbound(lesson, exchange, course_id):
        if entry.refused:
            result.refused.append(entry)
        elif entry.name in discarded:
            result.discarded.append(entry)
        else:
            newest[entry.student] = entry  # oldest first: the last one wins
    for student, entry in sorted(newest.items()):
        dest = result.folder / student / lesson
        try:
            staged = dest.with_name(f".{lesson}.collecting")
            shutil.rmtree(staged, ignore_errors=True)
            _copy_own_files(entry, staged, result.skipped)
        except PermissionError as err:
            shutil.rmtree(staged, ignore_errors=True)
            entry.refused = (f"cannot be read by the instructor ({err.filename}): its files are "
                             f"private to {entry.owner}")
            result.refused.append(entry)
            continue
        _write_counted_time(entry, staged)
        shutil.rmtree(dest, ignore_errors=True)
        staged.rename(dest)
        result.collected[student] = entry
        if entry.time_finding():
            result.times[student] = entry.time_finding()
    if result.folder.is_dir():
        for dest in sorted(result.folder.glob(f"*/{lesson}")):
            if dest.is_dir() and dest.parent.name not in result.collected:
                shutil.rmtree(dest)
                result.removed.append(dest.parent.name)
    return result


def discard(lesson: str, name: str, root: Path = COURSE_ROOT, exchange: str | Path | None = None,
            course_id: str = COURSE_ID) -> Entry:
    """Take the inbound entry ``name`` out of every later collection of ``lesson``."""
    entries = {e.name: e for e in inbound(lesson, exchange, course_id)}
    if name not in entries:
        close = [n for n in entries if n.startswith(name.split("+")[0] + "+")]
        raise ValueError(f"no inbound entry {name!r} of {lesson}; copy the whole name, in quotes, from "
                         f"`python -m helpers.grading.exchange {lesson}`"
                         + (f" (that student's: {', '.join(repr(n) for n in close)})" if close else ""))
    path = Path(root) / DISCARDED
    if name not in read_discarded(root):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {getpass.getuser()}:\n{name}\n")
    return entries[name]


def _nbgrader_collect():
    from nbgrader.exchange.default.collect import ExchangeCollect

    return ExchangeCollect


class OwnerCheckedCollect(_nbgrader_collect()):
    """nbgrader's collect step (the formgrader's *Collect*, ``nbgrader collect``) with the same rule:
    on the class hub ``c.ExchangeFactory.collect`` names this class."""

    def init_src(self):
        course_id, lesson = self.coursedir.course_id, self.coursedir.assignment_id
        if not course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        self.inbound_path = os.path.join(self.root, course_id, "inbound")
        try:
            entries = inbound(lesson, self.root, course_id)
        except ExchangeError as err:
            self.fail(str(err))
        discarded = read_discarded(Path(self.coursedir.root))
        newest = {}
        for entry in entries:
            if entry.refused:
                self.log.warning("REFUSED %r: %s (not collected)", entry.name, entry.refused)
            elif entry.name in discarded:
                self.log.info("discarded by an instructor: %r", entry.name)
            elif self.coursedir.student_id in ("", "*", entry.student):
                newest[entry.student] = entry
        self.src_records = [{"username": e.student, "filename": e.name, "timestamp": e.counted}
                            for e in newest.values()]

    def copy_files(self):
        for rec in self.src_records:
            entry = read_entry(Path(self.inbound_path) / rec["filename"])
            dest = Path(self.coursedir.format_path(self.coursedir.submitted_directory, entry.student,
                                                   self.coursedir.assignment_id))
            shutil.rmtree(dest, ignore_errors=True)
            skipped: list[str] = []
            _copy_own_files(entry, dest, skipped)
            _write_counted_time(entry, dest)
            self.log.info("Collected %s's %r", entry.student, entry.name)
            if entry.time_finding():
                self.log.warning("HAND-IN TIME: %s", entry.time_finding())
            for why in skipped:
                self.log.warning("not copied: %s", why)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A lesson's submissions in the exchange and their verdicts.")
    parser.add_argument("lesson")
    parser.add_argument("--discard", metavar="ENTRY", help="never collect this inbound entry again")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="course root (default: grading/)")
    parser.add_argument("--exchange", type=Path, help="the exchange (default: $ATTENTION_EXCHANGE)")
    args = parser.parse_args(argv)
    try:
        if args.discard:
            entry = discard(args.lesson, args.discard, args.root, args.exchange)
            print(f"discarded {entry.name!r} (owner {entry.owner}): no collection of {args.lesson} "
                  f"takes it again (listed in {args.root / DISCARDED}); grade again to use the "
                  "current collection")
            return 0
        discarded = read_discarded(args.root)
        for e in inbound(args.lesson, args.exchange):
            verdict = f"REFUSED: {e.refused}" if e.refused else \
                "discarded" if e.name in discarded else "accepted"
            print(f"{e.name!r}  owner {e.owner}  {verdict}")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
