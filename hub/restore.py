"""Put one folder of a hub backup back in place (``hub/backup.sh restore`` runs it as root).

    python hub/restore.py FROM INTO [--what "ana's home"]

Safe where students write (their homes, the exchange's ``inbound/``), even while they work:

- nothing is followed: each folder is opened without following a link, so a link a student put
  where a folder or a file was is replaced, never written through; a link in the backup is put
  back as the same link;
- nothing newer is replaced: a file changed after the backup was taken is kept as it is and
  named (the backup's older copy stays in the archive);
- owners and modes are the backup's for what it creates (no setuid or setgid on a file); a folder
  that exists keeps its own.

Prints one line for each file it kept and each link it put back. Standard library only: a fresh
prefix has no course environment yet.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CHUNK = 1 << 20


@dataclass
class Report:
    written: int = 0
    kept: list[str] = field(default_factory=list)  # newer here than in the backup, or not a file
    links: list[str] = field(default_factory=list)  # put back as links


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9))


def _same_bytes(a: str, b_name: str, b_dir: int) -> bool:
    try:
        fd = os.open(b_name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=b_dir)
    except OSError:
        return False
    with open(a, "rb") as x, os.fdopen(fd, "rb") as y:
        while True:
            one, two = x.read(CHUNK), y.read(CHUNK)
            if one != two:
                return False
            if not one:
                return True


def _settle(fd: int, st: os.stat_result, mode_mask: int) -> None:
    os.chown(fd, st.st_uid, st.st_gid)
    os.chmod(fd, stat.S_IMODE(st.st_mode) & mode_mask)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _put_file(entry: os.DirEntry, st: os.stat_result, into: int, name: str) -> None:
    """Write ``entry`` as ``name`` in the folder ``into``: a new file, then renamed over the old
    name, so whatever was there (a link included) is replaced, not written through."""
    part = f".{name}.restoring-{os.getpid()}"
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(entry.path), part, dir_fd=into)
        os.chown(part, st.st_uid, st.st_gid, dir_fd=into, follow_symlinks=False)
    else:
        out = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=into)
        try:
            with open(entry.path, "rb") as src:
                while chunk := src.read(CHUNK):
                    os.write(out, chunk)
            _settle(out, st, 0o777)
        finally:
            os.close(out)
    os.rename(part, name, src_dir_fd=into, dst_dir_fd=into)


def _tree(src: str, into: int, rel: str, report: Report) -> None:
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        st = entry.stat(follow_symlinks=False)
        name, here = entry.name, f"{rel}/{entry.name}" if rel else entry.name
        try:
            now = os.stat(name, dir_fd=into, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if stat.S_ISDIR(st.st_mode):
            if now is not None and stat.S_ISLNK(now.st_mode):
                os.unlink(name, dir_fd=into)  # a link where the backup has a folder: never entered
                now = None
            if now is not None and not stat.S_ISDIR(now.st_mode):
                report.kept.append(f"{here} (a file here, a folder in the backup)")
                continue
            if now is None:
                os.mkdir(name, 0o700, dir_fd=into)
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=into)
            try:
                _tree(entry.path, fd, here, report)
                if now is None:
                    _settle(fd, st, 0o7777)  # a folder keeps setgid and sticky (the exchange's)
            finally:
                os.close(fd)
        elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            if now is not None and stat.S_ISDIR(now.st_mode):
                report.kept.append(f"{here} (a folder here, a file in the backup)")
                continue
            if now is not None and stat.S_ISREG(now.st_mode) and stat.S_ISREG(st.st_mode):
                if _same_bytes(entry.path, name, into):
                    continue
                if now.st_mtime_ns > st.st_mtime_ns:
                    report.kept.append(f"{here} (changed {_when(now.st_mtime_ns)}, after the backup's "
                                       f"copy of {_when(st.st_mtime_ns)}: kept)")
                    continue
            _put_file(entry, st, into, name)
            if stat.S_ISLNK(st.st_mode):
                report.links.append(f"{here} -> {os.readlink(entry.path)}")
            else:
                report.written += 1
        else:
            report.kept.append(f"{here} (not a file, a folder or a link: left out)")


def restore(src: Path, into: Path) -> Report:
    """Copy the folder ``src`` into ``into`` (made when missing, with ``src``'s owner and mode)."""
    src, into, report = Path(src), Path(into), Report()
    top = src.stat()
    made = not into.exists()
    if made:
        into.parent.mkdir(parents=True, exist_ok=True)
        into.mkdir(mode=0o700)
    fd = os.open(into, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _tree(str(src), fd, "", report)
        if made:
            _settle(fd, top, 0o7777)
    finally:
        os.close(fd)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Put a folder of a hub backup back, safely.")
    parser.add_argument("source", type=Path)
    parser.add_argument("into", type=Path)
    parser.add_argument("--what", default="", help="how the lines name it (\"ana's home\")")
    args = parser.parse_args(argv)
    if os.path.islink(args.into):
        print(f"[hub/backup] not restored: {args.into} is a link", file=sys.stderr)
        return 2
    report = restore(args.source, args.into)
    what = args.what or str(args.into)
    for line in report.kept:
        print(f"[hub/backup] {what}: not replaced: {args.into}/{line}")
    for line in report.links:
        print(f"[hub/backup] {what}: put back as a link (not followed): {args.into}/{line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
