"""Import a class's submissions of one lesson into nbgrader's layout, accounting for every file.

    imported = import_submissions("02_attention_lookup", Path("downloads"), Path("grading"))

Each submission becomes ``<root>/submitted/<student>/<lesson>/<lesson>.ipynb`` with nbgrader's
``timestamp.txt`` beside it. The source folder may mix two layouts:

- nbgrader's ``<student>/<lesson>/`` (what ``nbgrader collect`` writes): the folder name is the
  student id, kept as it is; the other files of the folder are copied along;
- downloads from a learning platform: ``.ipynb`` and ``.zip`` files at the top level, or in
  Moodle's per-student folders ``<Full Name>_<n>_assignsubmission_file/`` (read as if the folder
  name were the start of the file name); the student id comes from the file name.

Student ids in file names: ``DEFAULT_PATTERN`` (or ``pattern``, any regex with a named group
``student_id``, matched at the start of the name), then made safe as a folder name: Unicode in
NFC, apostrophes dropped, whitespace and other characters unsafe in a path become ``-``.

    Chris Evans_12345_assignsubmission_file_02_attention_lookup.ipynb  Chris-Evans  Moodle
    evanschris_12345_67890_02_attention_lookup.ipynb                     evanschris   Canvas
    evanschris_LATE_12345_67890_x.ipynb                                  evanschris   Canvas, late
    Lab 2_jsmith_attempt_2026-03-01-12-30-00_lab2.ipynb                  jsmith       Blackboard
    alice_02_attention_lookup.ipynb                                      alice        before the first _
    mary-jane.ipynb                                                      mary-jane    a hyphen is kept
    bob-attempt2.ipynb, bob (1).ipynb, bob-copy.ipynb                    bob          re-upload marks are not
    02_attention_lookup.ipynb                                            (none)       a lesson's name

Nothing is merged or dropped silently:

- two different notebooks with one student id raise ``DuplicateStudentError``; with
  ``keep_latest`` the newest is imported and the others are listed in ``skipped``. Identical
  copies are imported once, with the time of the earliest copy;
- every file or folder under the source that is not imported is in ``skipped`` with the reason,
  even what systems leave beside files (``LITTER``: ``.ipynb_checkpoints``, ``__MACOSX``, ``._*``,
  ``.DS_Store``, ``Thumbs.db``; a folder of it is listed once), so that a missing submission is
  never to be looked for among files the import kept quiet about;
- a notebook of another lesson is imported and reported in ``wrong_lesson``: it holds at least
  half of that lesson's cells and under half as many of this lesson's (cells compared by nbgrader
  ``grade_id``, or by text when the notebook has no nbgrader metadata; cells every lesson shares,
  such as the setup and the quizzes, weigh little);
- a submission that cannot be graded (not JSON, not a notebook, no cells, a corrupt zip, a zip
  without a notebook, grading metadata lost) is imported and reported in ``unreadable``. A
  notebook saved without nbgrader's cell metadata (by Colab, VS Code, ...) cannot be graded:
  nbgrader's OverwriteCells finds answers and tests by ``grade_id`` and fails on it.

The platform each downloaded file came from and the id its name carries (Moodle's participant
number, Canvas's user id, Blackboard's username; ``helpers.grading.platforms.identify``) are
recorded per lesson in ``<root>/platform_ids.json``, for the gradebook import files that
``helpers.grading.platforms`` writes; they do not change how student ids are chosen.

Submission time, the first that applies: the ``timestamp.txt`` of nbgrader's layout, a date-time
in the file name (``2026-03-01T12-30-00``, ``2026-03-01-12-30-00``, ``20260301T123000``), the
notebook's date inside a zip, the file's modified time. Times without a zone are in ``tz`` (UTC
unless given). Re-importing replaces the folders of the students imported, and only those.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import unicodedata
import warnings
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path, PurePosixPath
from typing import NamedTuple
from zoneinfo import ZoneInfo

import nbformat

from ..paths import ROOT
from . import platforms

DEFAULT_PATTERN = r"""(?ix)
    ^(?:.+?_(?=[^_]+_attempt_\d{4}-))?          # Blackboard puts the assignment name first
    (?P<student_id>
        .+?(?=_\d+_assignsubmission_)           # Moodle:     <Full Name>_<n>_assignsubmission_...
      | [^_]+?(?=_(?:late_)?\d+_\d+_)           # Canvas:     <name>_[LATE_]<user>_<file>_...
      | [^_]+?(?=_attempt_\d{4}-)               # Blackboard: <user>_attempt_<date>...
      | [^_.]+?(?=(?:[-\s]*(?:\(\d+\)|attempt[-\s]*\d*|copy))?(?:[_.]|$))  # before the first _ or .
    )"""

# What operating systems and editors leave beside files; never a submission.
LITTER = {".ipynb_checkpoints": "Jupyter's autosave copies, not a submission",
          "__MACOSX": "macOS archive metadata, not a submission",
          ".DS_Store": "macOS folder metadata, not a submission",
          "Thumbs.db": "Windows thumbnail cache, not a submission"}
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's Exchange.timestamp_format
MAX_NOTEBOOK_BYTES = 256 * 2**20  # a zip entry larger than this is not unpacked
_NAME_TIMES = (re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[T_ -](\d\d)[-:.](\d\d)[-:.](\d\d)(Z?)(?!\d)"),
               re.compile(r"(?<!\d)(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)(Z?)(?!\d)"))
_MOODLE_FOLDER = re.compile(r"_assignsubmission_", re.I)


class SubmittedAt(NamedTuple):
    """When a submission was handed in, and where that time was read."""

    time: datetime  # timezone-aware, in UTC
    source: str  # "nbgrader timestamp.txt", "file name", "zip entry" or "file modified time"


@dataclass
class Imported:
    """What an import did with every file of the source folder."""

    students: list[str] = field(default_factory=list)  # sorted
    files: dict[str, list[str]] = field(default_factory=dict)  # student -> source files, relative
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file or folder/, why)
    timestamps: dict[str, SubmittedAt] = field(default_factory=dict)
    wrong_lesson: dict[str, str] = field(default_factory=dict)  # student -> the notebook's lesson
    unreadable: dict[str, str] = field(default_factory=dict)  # student -> why it cannot be graded

    def lines(self) -> list[str]:
        sources = Counter(s.source for s in self.timestamps.values())
        out = [f"imported {len(self.students)} submission(s)" + "; submission times from " * bool(sources)
               + ", ".join(f"{source} ({n})" for source, n in sorted(sources.items()))]
        if sources.get("file modified time"):
            out.append("  a file's modified time is often when it was downloaded: check late penalties")
        out += [f"  {s}: this is the notebook of {other}" for s, other in sorted(self.wrong_lesson.items())]
        out += [f"  {s}: cannot be graded: {why}" for s, why in sorted(self.unreadable.items())]
        out += [f"  not imported {path}: {why}" for path, why in self.skipped]
        return out


class DuplicateStudentError(ValueError):
    """Different submissions map to one student id; nothing was imported."""

    def __init__(self, conflicts: dict[str, list[str]], keep_latest: bool = False):
        self.conflicts = conflicts
        listing = "; ".join(f"{student!r} from " + " and ".join(repr(f) for f in files)
                            for student, files in sorted(conflicts.items()))
        advice = ("they carry the same submission time, so --keep-latest cannot tell which is newer: "
                  "remove or rename the one not to grade" if keep_latest else
                  "rename the files so that each student's id differs, give a --pattern whose "
                  "student_id group tells them apart, or pass --keep-latest if they are uploads "
                  "of one student (the newest is graded, the others are listed as skipped)")
        super().__init__(f"different submissions map to the same student id: {listing}. "
                         f"Nothing was imported; {advice}.")


class _Fingerprint(NamedTuple):
    grade_ids: frozenset[str]
    texts: frozenset[str]  # whitespace-normalised sources of the cells students do not write


@dataclass
class _Upload:
    """One submission found in the source folder, before it is written."""

    student: str
    origin: Path  # the submitted file (or nbgrader's folder, when it holds no notebook)
    files: list[str]  # source files, relative; the first is the submission itself
    notebook: bytes | None  # written as <lesson>.ipynb
    when: SubmittedAt
    problem: str | None = None  # why no notebook came out of it
    copy: list[tuple[Path, str]] = field(default_factory=list)  # (file, path in the lesson folder)
    notes: list[tuple[str, str]] = field(default_factory=list)  # skipped entries of a zip
    platform: platforms.Identity | None = None  # who the file name says the student is on a platform

    @property
    def key(self) -> str:
        """Identical submissions have the same key."""
        if self.notebook is not None:
            data = self.notebook
        else:  # nothing readable: the file itself (a corrupt zip), else where it was
            data = self.origin.read_bytes() if self.origin.is_file() else str(self.origin).encode()
        return hashlib.sha256(data).hexdigest()


@dataclass
class _Lesson:
    """What is needed to read submissions of ``lesson``: the id rule, the zone, the released lessons."""

    lesson: str
    regex: re.Pattern
    tz: tzinfo
    released: dict[str, _Fingerprint]

    def student_id(self, filename: str) -> tuple[str, str]:
        """(student id, "") or ("", why there is none)."""
        match = self.regex.match(filename)
        student = safe_student_id((match.group("student_id") or "") if match else "")
        if not student:
            return "", "no student id in the file name"
        if any(name == student or name.startswith(student + "_") for name in {self.lesson, *self.released}):
            return "", "named after a lesson, with no student id in it"
        return student, ""

    def scores(self, content: bytes) -> dict[str, float]:
        nb = _parse(content)
        return _scores(_fingerprint(nb), self.released) if nb is not None else {}

    def pick(self, notebooks: dict[str, bytes]) -> str:
        """Which of several notebooks is the submission: ``<lesson>.ipynb``, else the most alike."""
        exact = [n for n in notebooks if PurePosixPath(n).name == f"{self.lesson}.ipynb"]
        if exact:
            return min(exact, key=lambda n: (n.count("/"), n))
        return max(sorted(notebooks), key=lambda n: self.scores(notebooks[n]).get(self.lesson, -1.0))

    def describe(self, content: bytes) -> str:
        other = _other_lesson(self.lesson, self.scores(content))
        return f"the notebook of {other}" if other else "another notebook"


def safe_student_id(text: str) -> str:
    """``text`` as a readable folder name: "Chris Evans" -> "Chris-Evans", "O'Neil" -> "ONeil"."""
    text = re.sub(r"['’`]", "", unicodedata.normalize("NFC", text))
    return re.sub(r"[^\w.-]+", "-", text).strip("-.")


def import_submissions(lesson: str, source: Path, root: Path, pattern: str = DEFAULT_PATTERN,
                       keep_latest: bool = False, lessons_dir: Path = ROOT / "notebooks",
                       tz: str | tzinfo = "UTC") -> Imported:
    """Copy every submission of ``lesson`` in ``source`` to ``root/submitted/<student>/<lesson>/``.

    ``keep_latest``: of one student's different uploads, import the newest instead of raising
    DuplicateStudentError; ``lessons_dir``: the released ``<lesson>/<lesson>.ipynb`` notebooks a
    submission is compared with; ``tz``: the zone of times that carry none (a name or a tzinfo).
    """
    source, root = Path(source), Path(root).resolve()
    if not source.is_dir():
        raise ValueError(f"no folder of submissions at {source}")
    regex = re.compile(pattern)
    if "student_id" not in regex.groupindex:
        raise ValueError(f"the pattern {pattern!r} has no named group student_id")
    ctx = _Lesson(lesson, regex, ZoneInfo(tz) if isinstance(tz, str) else tz, _released(Path(lessons_dir)))
    uploads, skipped = _scan(ctx, source, root)
    chosen, older, conflicts = _choose(uploads, keep_latest)
    if conflicts:
        raise DuplicateStudentError(conflicts, keep_latest)
    imported = Imported(students=sorted(chosen), skipped=skipped + older)
    for student, upload in sorted(chosen.items()):
        imported.files[student] = upload.files
        imported.timestamps[student] = upload.when
        imported.skipped += upload.notes
        problem, other = _judge(ctx, upload)
        if problem:
            imported.unreadable[student] = problem
        if other:
            imported.wrong_lesson[student] = other
    _write(lesson, root, chosen)
    platforms.record(root, lesson, {student: upload.platform for student, upload in chosen.items()})
    return imported


def unreadable_reason(path: Path) -> str | None:
    """Why a submitted notebook cannot be graded before running it, or None."""
    path = Path(path)
    if not path.exists():
        return "the notebook is missing from the submission"
    content = path.read_bytes()
    problem = _problem(content)
    if problem is None and not _fingerprint(_parse(content)).grade_ids:
        return "the notebook lost its grading metadata (saved by another editor?)"
    return problem


# ------------------------------------------------------------------ finding the submissions


def _scan(ctx: _Lesson, source: Path, root: Path) -> tuple[list[_Upload], list[tuple[str, str]]]:
    uploads, skipped = [], []
    for entry in sorted(source.iterdir()):
        name = entry.name + ("/" if entry.is_dir() else "")
        if _is_litter(entry.name):
            skipped.append((name, _is_litter(entry.name)))
        elif entry.is_dir() and entry.resolve() in (root, root / ".importing"):
            skipped.append((name, "the grading folder itself"))
        elif entry.is_dir() and (entry / ctx.lesson).is_dir():
            upload, skips = _student_folder(ctx, source, entry)
            uploads.append(upload)
            skipped += skips
        elif entry.is_dir() and _MOODLE_FOLDER.search(entry.name):
            for path, rel in _walk(entry, source, skipped):
                _flat(ctx, path, f"{entry.name}_{path.name}", rel, uploads, skipped)
        elif entry.is_dir():
            skipped.append((name, _stray_folder(ctx, entry)))
        else:
            _flat(ctx, entry, entry.name, entry.name, uploads, skipped)
    return uploads, skipped


def _is_litter(name: str) -> str:
    """Why a file or folder called ``name`` is never a submission, or ""."""
    return LITTER.get(name) or ("macOS resource fork, not a submission" if name.startswith("._") else "")


def _walk(folder: Path, source: Path, skipped: list[tuple[str, str]]):
    """(file, path relative to source) under ``folder``; the litter goes to ``skipped``."""
    for path in sorted(folder.iterdir()):
        rel = path.relative_to(source).as_posix()
        if _is_litter(path.name):
            skipped.append((rel + ("/" if path.is_dir() else ""), _is_litter(path.name)))
        elif path.is_dir():
            yield from _walk(path, source, skipped)
        else:
            yield path, rel


def _flat(ctx: _Lesson, path: Path, name: str, rel: str, uploads: list, skipped: list) -> None:
    """A downloaded file: the student id and the time from ``name``."""
    suffix = path.suffix.lower()
    if suffix not in (".ipynb", ".zip"):
        skipped.append((rel, "not a notebook (.ipynb) or a zip"))
        return
    student, why = ctx.student_id(name)
    if not student:
        skipped.append((rel, why))
        return
    upload = _Upload(student, path, [rel], None, _time_of(path, name, ctx.tz),
                     platform=platforms.identify(name))
    if suffix == ".ipynb":
        upload.notebook = path.read_bytes()
    else:
        _unzip(ctx, path, rel, upload)
    uploads.append(upload)


def _unzip(ctx: _Lesson, path: Path, rel: str, upload: _Upload) -> None:
    """Take the notebook out of a zip: ``<lesson>.ipynb`` if there, else the most alike."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = {i.filename: i for i in archive.infolist()
                       if not i.is_dir() and not any(_is_litter(p) for p in PurePosixPath(i.filename).parts)}
            notebooks = [n for n in entries if n.lower().endswith(".ipynb")]
            if not notebooks:
                held = ", ".join(sorted(entries)[:5]) or "nothing"
                upload.problem = f"the zip holds no notebook (.ipynb); it holds {held}"
            elif any(entries[n].file_size > MAX_NOTEBOOK_BYTES for n in notebooks):
                upload.problem = f"the zip holds a notebook over {MAX_NOTEBOOK_BYTES // 2**20} MB"
            else:
                contents = {n: archive.read(n) for n in notebooks}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError,
            NotImplementedError, zlib.error) as err:
        upload.problem = f"corrupt zip: {str(err)[:120] or type(err).__name__}"
    if upload.problem:
        upload.copy = [(path, path.name)]  # kept for the instructor to look at
        return
    chosen = ctx.pick(contents)
    upload.notebook = contents[chosen]
    upload.notes = [(f"{rel}/{n}", f"{ctx.describe(contents[n])} in the zip; imported: {chosen}")
                    for n in sorted(contents) if n != chosen]
    packed = datetime(*entries[chosen].date_time)
    if upload.when.source == "file modified time" and packed.date() != datetime(1980, 1, 1).date():
        upload.when = SubmittedAt(packed.replace(tzinfo=ctx.tz).astimezone(UTC), "zip entry")


def _student_folder(ctx: _Lesson, source: Path, folder: Path) -> tuple[_Upload, list]:
    """nbgrader's ``<student>/<lesson>/``: the notebook, its timestamp.txt, files to copy along."""
    student, lesson_dir, skipped = folder.name, folder / ctx.lesson, []
    for entry in sorted(folder.iterdir()):
        rel = entry.relative_to(source).as_posix() + ("/" if entry.is_dir() else "")
        if entry.name == ctx.lesson:
            continue
        if _is_litter(entry.name):
            skipped.append((rel, _is_litter(entry.name)))
        elif entry.is_dir() and entry.name in ctx.released:
            skipped.append((rel, f"another lesson's folder ({entry.name}), not {ctx.lesson}"))
        else:
            skipped.append((rel, f"outside {student}/{ctx.lesson}/, where nbgrader looks"))
    files = list(_walk(lesson_dir, source, skipped))
    stamp = lesson_dir / "timestamp.txt"
    notebooks = {p.name: p.read_bytes() for p, _ in files
                 if p.parent == lesson_dir and p.suffix.lower() == ".ipynb"}
    chosen = ctx.pick(notebooks) if notebooks else None
    upload = _Upload(student, lesson_dir, [lesson_dir.relative_to(source).as_posix() + "/"], None,
                     SubmittedAt(_mtime(lesson_dir), "file modified time"),
                     problem=f"no notebook in {student}/{ctx.lesson}/")
    for path, rel in files:
        if path.parent == lesson_dir and path.name == chosen:
            upload.origin, upload.files[0], upload.problem = path, rel, None
            upload.notebook, upload.when = notebooks[chosen], _time_of(path, path.name, ctx.tz)
        elif path.parent == lesson_dir and path.name in notebooks:
            skipped.append((rel, f"{ctx.describe(notebooks[path.name])} in {student}'s folder; "
                                 f"nbgrader grades only {ctx.lesson}.ipynb, imported from {chosen}"))
        elif path != stamp:
            upload.copy.append((path, path.relative_to(lesson_dir).as_posix()))
            upload.files.append(rel)
    if stamp.exists():
        upload.files.append(stamp.relative_to(source).as_posix())
        written = _read_timestamp(stamp, ctx.tz)
        if written:
            upload.when = SubmittedAt(written, "nbgrader timestamp.txt")
    return upload, skipped


def _stray_folder(ctx: _Lesson, folder: Path) -> str:
    inside = [p for p in folder.rglob("*")
              if not any(_is_litter(part) for part in p.relative_to(folder).parts)]
    lessons = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name in ctx.released)
    if lessons:
        return f"holds {', '.join(lessons)}/ but no {ctx.lesson}/ (nbgrader's layout of another lesson)"
    if not inside:
        return "an empty folder"
    n = sum(p.is_file() for p in inside)
    return (f"not nbgrader's <student>/{ctx.lesson}/ layout (no {ctx.lesson}/ inside); "
            f"its {n} file(s) were not imported")


# ------------------------------------------------------------------ one submission per student


def _choose(uploads: list[_Upload], keep_latest: bool):
    """(student -> upload, skipped uploads, conflicts): identical copies once, else the newest."""
    by_student: dict[str, dict[str, list[_Upload]]] = {}
    for upload in uploads:
        by_student.setdefault(upload.student, {}).setdefault(upload.key, []).append(upload)
    chosen, skipped, conflicts = {}, [], {}
    for student, versions in by_student.items():
        versions = sorted((sorted(v, key=lambda u: (u.when.time, u.files[0])) for v in versions.values()),
                          key=lambda v: max(u.when.time for u in v))
        if len(versions) > 1:
            newest, runner_up = (max(u.when.time for u in v) for v in versions[-2:][::-1])
            if not keep_latest or newest == runner_up:
                conflicts[student] = sorted(u.files[0] for v in versions for u in v)
                continue
            skipped += [(f, f"older upload of {student} (imported: {versions[-1][0].files[0]})")
                        for v in versions[:-1] for u in v for f in u.files]
        first, *copies = versions[-1]
        skipped += [(f, f"identical copy of {first.files[0]}, imported once for {student}")
                    for u in copies for f in u.files]
        chosen[student] = first
    return chosen, skipped, conflicts


def _judge(ctx: _Lesson, upload: _Upload) -> tuple[str | None, str | None]:
    """(why it cannot be graded, the other lesson it belongs to), each None when not so."""
    if upload.notebook is None:
        return upload.problem, None
    problem = _problem(upload.notebook)
    if problem:
        return problem, None
    mine = _fingerprint(_parse(upload.notebook))
    scores = _scores(mine, ctx.released)
    other = _other_lesson(ctx.lesson, scores)
    if mine.grade_ids:
        return None, other
    if other:
        return f"the notebook lost its grading metadata (saved by another editor?) and is {other}'s", other
    if scores.get(ctx.lesson, 0.0) >= 0.5:
        return ("the notebook lost its grading metadata (saved by another editor?): its cells are "
                f"{ctx.lesson}'s, but nbgrader finds answers and tests by that metadata; ask for the "
                "notebook saved by Jupyter, or paste the answers into the released notebook"), None
    return f"the notebook has no grading metadata and is not {ctx.lesson}'s (another file?)", None


# ------------------------------------------------------------------ notebooks and lessons


def _problem(content: bytes) -> str | None:
    if not content.strip():
        return "not a readable notebook: the file is empty"
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError) as err:
        return f"not a readable notebook: not JSON ({str(err)[:100]})"
    nb = _parse(content)
    if nb is None or not isinstance(data, dict):
        return "not a readable notebook: JSON, but not a Jupyter notebook"
    if not nb.get("cells"):
        return "the notebook has no cells"
    return None


def _parse(content: bytes) -> nbformat.NotebookNode | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat's validation warnings
            return nbformat.reads(content.decode("utf-8"), as_version=4)
    except Exception:  # any parse failure means the file is not a notebook
        return None


def _fingerprint(nb) -> _Fingerprint:
    ids, texts = set(), set()
    for cell in (nb or {}).get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id"):
            ids.add(meta["grade_id"])
        text = " ".join(str(cell.get("source", "")).split())
        if text and not meta.get("solution"):
            texts.add(text)
    return _Fingerprint(frozenset(ids), frozenset(texts))


def _released(lessons_dir: Path) -> dict[str, _Fingerprint]:
    """lesson -> fingerprint of ``lessons_dir/<lesson>/<lesson>.ipynb``."""
    return {p.stem: _fingerprint(_parse(p.read_bytes()))
            for p in sorted(lessons_dir.glob("*/*.ipynb")) if p.stem == p.parent.name}


def _scores(mine: _Fingerprint, released: dict[str, _Fingerprint]) -> dict[str, float]:
    """lesson -> share of its cells found in ``mine``; a cell in k lessons weighs 1/k."""
    by_id = bool(mine.grade_ids)
    cells = {name: fp.grade_ids if by_id else fp.texts for name, fp in released.items()}
    have = mine.grade_ids if by_id else mine.texts
    spread = Counter(c for found in cells.values() for c in found)
    scores = {}
    for name, found in cells.items():
        total = sum(1 / spread[c] for c in found)
        scores[name] = sum(1 / spread[c] for c in found & have) / total if total else 0.0
    return scores


def _other_lesson(lesson: str, scores: dict[str, float]) -> str | None:
    if not scores:
        return None
    best = max(sorted(scores), key=scores.get)
    if best != lesson and scores[best] >= 0.5 and scores.get(lesson, 0.0) < scores[best] / 2:
        return best
    return None


# ------------------------------------------------------------------ times


def _time_of(path: Path, name: str, tz: tzinfo) -> SubmittedAt:
    """The date-time in ``name``, else ``path``'s modified time."""
    for regex in _NAME_TIMES:
        for match in regex.finditer(name):
            *parts, zulu = match.groups()
            try:
                when = datetime(*map(int, parts))
            except ValueError:
                continue
            return SubmittedAt(when.replace(tzinfo=UTC if zulu else tz).astimezone(UTC),
                               "file name")
    return SubmittedAt(_mtime(path), "file modified time")


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _read_timestamp(path: Path, tz: tzinfo) -> datetime | None:
    """The time in an nbgrader ``timestamp.txt``, read as nbgrader reads it; None if unreadable."""
    import dateutil.parser
    from nbgrader.utils import parse_utc

    text = path.read_text(errors="replace").strip()
    try:
        if len(text.split(" ")) == 3:  # nbgrader's "<date> <time> <zone>"
            when = parse_utc(text).replace(tzinfo=UTC)
        else:
            when = dateutil.parser.parse(text)
    except (ValueError, OverflowError, TypeError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=tz)).astimezone(UTC)


# ------------------------------------------------------------------ writing


def _write(lesson: str, root: Path, chosen: dict[str, _Upload]) -> None:
    """Stage every student's folder, then swap it in: a source inside ``root`` is read first."""
    staging = root / ".importing"
    shutil.rmtree(staging, ignore_errors=True)
    for student, upload in chosen.items():
        folder = staging / student / lesson
        folder.mkdir(parents=True)
        for path, rel in upload.copy:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, folder / rel)
        if upload.notebook is not None:
            notebook = folder / f"{lesson}.ipynb"
            notebook.write_bytes(upload.notebook)
            os.utime(notebook, (upload.when.time.timestamp(),) * 2)
        (folder / "timestamp.txt").write_text(upload.when.time.strftime(TIMESTAMP_FORMAT))
    for student in chosen:
        dest = root / "submitted" / student / lesson
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / student / lesson, dest)
    shutil.rmtree(staging, ignore_errors=True)
