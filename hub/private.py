"""What other accounts on the hub machine could read of the instructors' files; ``make hub``
refuses to start while any of it is exposed.

    python hub/private.py --roster class.csv --clone . [--served PREFIX --skip ENV ...] [TREE ...]

Every student has a shell on the machine (a JupyterLab terminal), so a file is private only when
no account but its owner (and, for the course copy, the group ``attention-instructors``) can
reach it: each folder above it must be closed to them, or the file itself. Checked:

- the roster (first passwords in it): no permission for group or others at all (mode 600);
- the clone ``make hub`` runs from, as a whole: its ``.git`` holds every hidden test of every
  version, ``solutions/`` the hidden tests and mark schemes, ``tests/`` correct implementations,
  and students need nothing of it (they are served from the prefix);
- each TREE (the course copy, the hub's state): nothing readable by others or by a group with
  members outside the owner and the instructors;
- ``--served``: no file that other accounts can read under the hub's prefix holds a hidden-test
  block or a mark scheme (``--skip`` leaves out the shared environment, whose third-party
  packages ship their own examples of both, and the exchange, where students write what they
  like).

Each finding names the path and the one command that fixes it. Standard library only: it runs
before the course environment exists.
"""

from __future__ import annotations

import argparse
import functools
import grp
import os
import pwd
import re
import stat
import sys
from pathlib import Path

INSTRUCTORS = "attention-instructors"
# What only instructors may read, as the course's sources and nbgrader's notebooks spell it: a
# line that opens a hidden-test block or a mark scheme (a .py, or a JSON string of an .ipynb).
ANSWERS = re.compile(rb'(?m)^[ \t]*"?(?:# )?(?:### BEGIN HIDDEN TESTS|=== BEGIN MARK SCHEME ===)')
SECRETS_OF_A_CLONE = (".git", "solutions", "tests", "grading", "build", "submitted")
LARGEST_TEXT = 5 << 20  # bytes; data files beyond this are results, not lesson sources


@functools.cache  # one run of make hub: the accounts do not change while it looks
def _members(gid: int) -> set[str]:
    """Every account in group ``gid``, through /etc/group or as its primary group."""
    try:
        names = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return {"(unknown group)"}
    return names | {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}


def _trusted(owner_uid: int) -> set[str]:
    try:
        owner = {pwd.getpwuid(owner_uid).pw_name}
    except KeyError:
        owner = set()
    try:
        return owner | set(grp.getgrnam(INSTRUCTORS).gr_mem) | {"root"}
    except KeyError:
        return owner | {"root"}


def _open_to(st: os.stat_result, read: int, other: int) -> str | None:
    """Who besides the owner ``st`` lets through: 'others', 'group <name>', or None."""
    if st.st_mode & other:
        return "others"
    if st.st_mode & read and _members(st.st_gid) - _trusted(st.st_uid):
        try:
            return f"group {grp.getgrgid(st.st_gid).gr_name}"
        except KeyError:
            return f"group {st.st_gid}"
    return None


def reachable(path: Path) -> bool:
    """Can someone other than the owners pass through every folder above ``path``?"""
    for folder in Path(path).resolve().parents:
        if not _open_to(folder.stat(), stat.S_IXGRP, stat.S_IXOTH):
            return False
    return True


def exposed_tree(top: Path) -> tuple[Path, str] | None:
    """``top`` and to whom, when another account can read it or (a folder) enter it; None when
    it is private. A folder closed to others keeps everything below it private, whatever the
    modes inside; an open one counts as exposed even if its files are not (their names show)."""
    top = Path(top)
    if not top.exists() or not reachable(top):
        return None
    st = top.stat()
    if stat.S_ISDIR(st.st_mode):
        who = _open_to(st, stat.S_IRGRP | stat.S_IXGRP, stat.S_IROTH | stat.S_IXOTH)
    else:
        who = _open_to(st, stat.S_IRGRP, stat.S_IROTH)
    return (top, who) if who else None


def clone_problem(clone: Path) -> str | None:
    """What is wrong when another account can enter the clone, with the fix; None when it is
    private (closed itself, or under a closed folder)."""
    found = exposed_tree(clone)
    if not found:
        return None
    clone = Path(clone).resolve()
    inside = [name for name in SECRETS_OF_A_CLONE if (clone / name).exists()]
    held = f", and with it its {', '.join(inside)}" if inside else ""
    return (f"the clone {clone} can be read by {found[1]}{held} (hidden tests, mark schemes, correct "
            f"implementations); students are served from the prefix and need nothing of the clone. "
            f"Fix: chmod -R go-rwx {clone}")


def answers_served(top: Path, skip: list[Path] = ()) -> list[tuple[Path, str]]:
    """Files under ``top`` that another account can read and that hold a hidden test or a mark
    scheme, each with to whom. Folders closed to others are not entered (nothing below them can
    be read), nor those in ``skip``."""
    skipped = {Path(p).resolve() for p in skip}
    top = Path(top).resolve()
    if not top.is_dir() or not reachable(top) or not _open_to(top.stat(), stat.S_IXGRP, stat.S_IXOTH):
        return []
    found = []
    for here, folders, files in os.walk(top):
        folders[:] = [f for f in folders
                      if Path(here, f).resolve() not in skipped and not os.path.islink(Path(here, f))
                      and _open_to(os.stat(Path(here, f)), stat.S_IXGRP, stat.S_IXOTH)]
        for name in files:
            path = Path(here, name)
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or st.st_size > LARGEST_TEXT:
                    continue
                who = _open_to(st, stat.S_IRGRP, stat.S_IROTH)
                if who and ANSWERS.search(path.read_bytes()):
                    found.append((path, who))
            except OSError:
                continue  # gone meanwhile, or a socket: nothing to read
    return found


def problems(roster: Path | None = None, trees: list[Path] = (), clone: Path | None = None,
             served: Path | None = None, skip: list[Path] = ()) -> list[str]:
    """What other accounts can read, each with the command that makes it private."""
    out = []
    if roster is not None and Path(roster).exists():
        mode = Path(roster).stat().st_mode
        if mode & 0o077:
            out.append(f"the roster {roster} (first passwords) has mode {stat.filemode(mode)}: other "
                       f"accounts can read it. Fix: chmod 600 {roster}")
    for top in trees:
        found = exposed_tree(top)
        if found:
            path, who = found
            out.append(f"{path} can be read by {who}. "
                       f"Fix: chmod -R go-rwx {top}")
    if clone is not None and (found := clone_problem(clone)):
        out.append(found)
    if served is not None:
        for path, who in answers_served(served, skip):
            out.append(f"{path} holds hidden tests or a mark scheme and can be read by {who}. "
                       f"Fix: chmod go-rwx {path}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refuse to serve while instructors' files are exposed.")
    parser.add_argument("--roster", type=Path)
    parser.add_argument("--clone", type=Path, help="the clone make hub runs from: closed as a whole")
    parser.add_argument("--served", type=Path, help="the hub's prefix: no readable file holds an answer")
    parser.add_argument("--skip", type=Path, action="append", default=[],
                        help="a folder under --served not to search (the shared environment)")
    parser.add_argument("trees", type=Path, nargs="*",
                        help="folders no student may read: the course copy, the hub's state")
    args = parser.parse_args(argv)
    found = problems(args.roster, args.trees, args.clone, args.served, args.skip)
    for line in found:
        print(f"make hub: refusing to serve: {line}", file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
