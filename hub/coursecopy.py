"""Refresh the instructors' copy of the course from a new release of it, keeping their edits.

    python hub/coursecopy.py NEW COURSE MANIFEST

``NEW`` holds the course's files as this checkout ships them (``hub/install.sh`` unpacks them
there); ``MANIFEST`` (root only) records the SHA-256 of every file as it was last put into
``COURSE``. A file of the course copy is replaced by its new version only when nobody changed it
since: the same bytes as recorded. A file an instructor edited (or deleted) is kept as they left
it, and listed with where the new version is, to compare. Files the course does not ship (the
gradebook, instructors' own notes) are never touched. Without a manifest (the first install, or
a course copy from before this tool) an existing file that differs from the new one counts as
edited.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refresh(new: Path, course: Path, manifest: Path) -> dict[str, list[str]]:
    """Bring ``course`` up to ``new`` file by file; {updated, added, kept, deleted_kept}."""
    new, course, manifest = Path(new), Path(course), Path(manifest)
    shipped = json.loads(manifest.read_text()) if manifest.exists() else {}
    report: dict[str, list[str]] = {"updated": [], "added": [], "kept": [], "deleted_kept": []}
    record = {}
    for src in sorted(p for p in new.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = src.relative_to(new).as_posix()
        dest, fresh = course / rel, digest(src)
        before = shipped.get(rel)
        if not dest.exists():
            if before is not None:  # shipped before and since removed by an instructor
                report["deleted_kept"].append(rel)
                record[rel] = before
                continue
            report["added"].append(rel)
        else:
            current = digest(dest)
            if current == fresh:
                record[rel] = fresh
                continue
            if current != before:  # changed since it was shipped (or never recorded): theirs
                report["kept"].append(rel)
                record[rel] = before or fresh
                continue
            report["updated"].append(rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        record[rel] = fresh
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps(record, indent=0, sort_keys=True) + "\n")
    manifest.chmod(0o600)
    return report


def main(argv: list[str] | None = None) -> int:
    new, course, manifest = map(Path, (argv or sys.argv[1:]))
    report = refresh(new, course, manifest)
    say = "[hub/install]"
    print(f"{say} course copy {course}: {len(report['updated'])} file(s) updated, "
          f"{len(report['added'])} added")
    for rel in report["kept"]:
        print(f"{say} kept the instructors' edit of {rel}; the course's new version: {new / rel}")
    for rel in report["deleted_kept"]:
        print(f"{say} kept {rel} deleted, as an instructor left it; the course's version: {new / rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
