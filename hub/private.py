"""What other accounts on the hub machine could read of the instructors' files; ``make hub``
refuses to start while any of it is exposed.

    python hub/private.py --roster class.csv --solutions solutions [--course /srv/.../course ...]

Every student has a shell on the machine (a JupyterLab terminal), so a file is private only when
no account but its owner (and, for the course copy, the group ``attention-instructors``) can
reach it: each folder above it must be closed to them, or the file itself. Checked:

- the roster (first passwords in it): no permission for group or others at all (mode 600);
- the checkout's ``solutions/`` (hidden tests) and the course copy: nothing readable by others or
  by a group with members outside the owner and the instructors.

Each finding names the path and the one command that fixes it. Standard library only: it runs
before the course environment exists.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import stat
import sys
from pathlib import Path

INSTRUCTORS = "attention-instructors"


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


def problems(roster: Path | None = None, trees: list[Path] = ()) -> list[str]:
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
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refuse to serve while instructors' files are exposed.")
    parser.add_argument("--roster", type=Path)
    parser.add_argument("trees", type=Path, nargs="*",
                        help="folders no student may read: the checkout's solutions/, the course copy")
    args = parser.parse_args(argv)
    found = problems(args.roster, args.trees)
    for line in found:
        print(f"make hub: refusing to serve: {line}", file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
