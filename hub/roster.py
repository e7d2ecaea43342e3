"""Linux accounts for a class, from a roster CSV; run as root (``make hub`` does).

    python hub/roster.py ROSTER.csv [--passwords FILE] [--dry-run]
    python hub/roster.py --remove-class      # make hub-uninstall ACCOUNTS=1: the accounts it made

The roster has a header row and the columns ``username`` and ``role`` (``student`` or
``instructor``), optionally ``name`` and ``password``. For each row the account is created
when missing (with a home folder) and put in its role's group, ``attention-students`` or
``attention-instructors``; the hub lets exactly these two groups log in. Running it again
changes nothing that is already right: an existing account keeps its password and its files.

First passwords: a row's ``password`` column if given, else a random one. New accounts'
passwords are appended to ``--passwords`` (default ``$HUB_PREFIX/state/first-passwords.csv``,
readable by root only) for the instructor to hand out; a student changes
theirs in a JupyterLab terminal with ``passwd``. Nobody is ever deleted: an account that left
the roster is reported, and the instructor decides.

Each account it creates is recorded in ``$HUB_PREFIX/state/accounts-created.txt`` (root only);
``--remove-class`` deletes exactly those, never an account someone else made and put in a class
group, and a group only once nobody is left in it.
"""

from __future__ import annotations

import argparse
import csv
import grp
import os
import pwd
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classhub import INSTRUCTORS, ROLES, STUDENTS  # noqa: E402

USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
PREFIX = Path(os.environ.get("HUB_PREFIX", "/srv/attention-from-scratch"))
DEFAULT_PASSWORDS = PREFIX / "state" / "first-passwords.csv"
CREATED = PREFIX / "state" / "accounts-created.txt"


class RosterError(ValueError):
    """A roster that cannot be used as it is; the message names the line."""


@dataclass
class Member:
    username: str
    role: str
    name: str = ""
    password: str = ""


def read_roster(path: Path) -> list[Member]:
    """The roster's members, checked: every problem is reported with its line number."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(f"no roster at {path}")
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
        header = [h.strip().lower() for h in (rows[0].keys() if rows else [])]
    if rows and not {"username", "role"} <= set(header):
        raise RosterError(f"{path}: the header must name the columns username and role "
                          f"(found {', '.join(header) or 'nothing'})")
    members, problems, seen = [], [], {}
    for line, row in enumerate(rows, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        user, role = row.get("username", ""), row.get("role", "").lower()
        if not user and not role:
            continue  # a blank line
        if not USERNAME.match(user):
            problems.append(f"line {line}: {user!r} is not a valid Linux user name "
                            "(lower-case letters, digits, - and _, at most 32, not starting with a digit)")
        if role not in ROLES:
            problems.append(f"line {line}: role {role!r} must be student or instructor")
        if user in seen:
            problems.append(f"line {line}: {user} is already on line {seen[user]}")
        seen[user] = line
        members.append(Member(user, role, row.get("name", ""), row.get("password", "")))
    if problems:
        raise RosterError(f"{path}:\n  " + "\n  ".join(problems))
    if not members:
        raise RosterError(f"{path} lists nobody")
    return members


def _run(cmd: list[str], stdin: str | None = None, dry_run: bool = False, check: bool = True) -> None:
    if dry_run:
        print("would run:", " ".join(cmd))
        return
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if proc.returncode and check:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def _group_members(group: str) -> set[str]:
    try:
        return set(grp.getgrnam(group).gr_mem)
    except KeyError:
        return set()


def _append(path: Path, lines: list[str]) -> None:
    """Add lines to a root-only file (its folder made root-only too when missing)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        f.writelines(f"{line}\n" for line in lines)
    os.chmod(path, 0o600)


def created_by_the_hub(record: Path = CREATED) -> list[str]:
    """The accounts this hub's roster runs created, in order, once each."""
    try:
        names = record.read_text().split()
    except FileNotFoundError:
        return []
    return list(dict.fromkeys(names))


def apply(members: list[Member], passwords: Path = DEFAULT_PASSWORDS, dry_run: bool = False,
          record: Path | None = None) -> dict:
    """Create what is missing; a report {created, updated, unchanged, left_roster}."""
    if os.geteuid() != 0 and not dry_run:
        raise PermissionError("creating accounts needs root: sudo make hub ROSTER=...")
    for group in ROLES.values():
        try:
            grp.getgrnam(group)
        except KeyError:
            _run(["groupadd", "--system", group], dry_run=dry_run)
    report = {"created": [], "updated": [], "unchanged": [], "left_roster": []}
    first = []
    for m in members:
        group = ROLES[m.role]
        other = INSTRUCTORS if group == STUDENTS else STUDENTS
        if not _exists(m.username):
            _run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", m.name or m.username,
                  "--groups", group, m.username], dry_run=dry_run)
            password = m.password or secrets.token_urlsafe(9)
            _run(["chpasswd"], stdin=f"{m.username}:{password}\n", dry_run=dry_run)
            if not dry_run:
                # recorded at once: an uninstall must find it even if a later line fails
                _append(record or passwords.with_name(CREATED.name), [m.username])
                os.chmod(pwd.getpwnam(m.username).pw_dir, 0o750)  # classmates cannot read it
            first.append((m.username, m.role, password))
            report["created"].append(m.username)
            continue
        changed = False
        if m.username not in _group_members(group):
            _run(["usermod", "--append", "--groups", group, m.username], dry_run=dry_run)
            changed = True
        if m.username in _group_members(other):
            _run(["gpasswd", "--delete", m.username, other], dry_run=dry_run)
            changed = True
        report["updated" if changed else "unchanged"].append(m.username)
    listed = {m.username for m in members}
    report["left_roster"] = sorted((_group_members(STUDENTS) | _group_members(INSTRUCTORS)) - listed)
    if first and not dry_run:
        passwords.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        new_file = not passwords.exists()
        fd = os.open(passwords, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", newline="") as f:
            out = csv.writer(f)
            if new_file:
                out.writerow(["username", "role", "first_password"])
            out.writerows(first)
        os.chmod(passwords, 0o600)
    return report


def remove_class(record: Path = CREATED, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Delete the accounts the hub created (home folders included), then each class group left
    empty; the accounts removed, and those kept in a class group because the hub did not make them."""
    if os.geteuid() != 0 and not dry_run:
        raise PermissionError("removing accounts needs root: sudo make hub-uninstall ACCOUNTS=1")
    removed = [user for user in created_by_the_hub(record) if _exists(user)]
    for user in removed:
        _run(["pkill", "-KILL", "-u", user], dry_run=dry_run, check=False)
        _run(["userdel", "--remove", user], dry_run=dry_run)
    kept = sorted(_class_members() - set(removed)) if not dry_run else []
    for group in ROLES.values():
        if _exists_group(group) and not (dry_run or _class_members(group)):
            _run(["groupdel", group], dry_run=dry_run)
    if not dry_run and record.exists():
        record.unlink()
    return removed, kept


def _class_members(*groups: str) -> set[str]:
    """Every account in ``groups`` (default: both class groups), listed or as primary group."""
    out = set()
    for group in groups or tuple(ROLES.values()):
        if _exists_group(group):
            gid = grp.getgrnam(group).gr_gid
            out |= _group_members(group) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}
    return out


def _exists_group(group: str) -> bool:
    try:
        grp.getgrnam(group)
        return True
    except KeyError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Linux accounts for a class, from a roster CSV.")
    if "--remove-class" in (argv if argv is not None else sys.argv[1:]):
        removed, kept = remove_class()
        print(f"removed the accounts make hub created ({len(removed)}): {', '.join(removed) or 'none'}")
        if kept:
            print(f"kept, not made by make hub ({len(kept)}): {', '.join(kept)}; "
                  "their class groups stay with them")
        else:
            print(f"removed the groups {STUDENTS}, {INSTRUCTORS}")
        return 0
    parser.add_argument("roster", type=Path)
    parser.add_argument("--passwords", type=Path, default=DEFAULT_PASSWORDS,
                        help="where new accounts' first passwords are appended (root only)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, change nothing")
    args = parser.parse_args(argv)
    try:
        report = apply(read_roster(args.roster), args.passwords, args.dry_run, record=CREATED)
    except (RosterError, PermissionError, RuntimeError) as err:
        print(f"roster: {err}", file=sys.stderr)
        return 2
    for key, label in (("created", "created"), ("updated", "groups corrected"),
                       ("unchanged", "already right")):
        if report[key]:
            print(f"{label} ({len(report[key])}): {', '.join(report[key])}")
    if report["created"]:
        print(f"first passwords of the new accounts: {args.passwords} (root only)")
    if report["left_roster"]:
        print(f"in a class group but not on the roster (kept): {', '.join(report['left_roster'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
