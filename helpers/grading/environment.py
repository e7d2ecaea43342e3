"""Is a grading kernel's environment the course's own? Asked by the preflight, in a graded kernel.

A Python environment set up for another checkout of the course (an instructor with two clones,
an environment built for last term's copy) makes the grading kernels import ``helpers`` from
that checkout. Its setup cell still runs — the warm server imported the package before the
sandbox hid the folder — but the hidden tests' own imports then fail in every submission.
``probe_code`` is the cell that asks the kernel: it runs every import the hidden tests make and
describes the ``helpers`` it imports (folder, installed version, a digest of its files);
``problems`` compares that with the course being graded.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from ..paths import ROOT

DISTRIBUTION = "attention-from-scratch"
MARK = "COURSE-ENVIRONMENT "  # how the probe's one line of results begins
FIX = "make setup"

# A digest of a package's Python files, relative names and contents. The same code runs in the
# grading kernel (on the package it imports) and here (on the course's helpers/).
_DIGEST = '''
def _course_digest(folder):
    import hashlib, os
    digest = hashlib.sha256()
    for top, dirs, files in sorted(os.walk(folder)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(top, name)
            digest.update(os.path.relpath(path, folder).encode() + b"\\0")
            with open(path, "rb") as f:
                digest.update(f.read() + b"\\0")
    return digest.hexdigest()
'''

_PROBE = '''
def _course_environment(statements):
    import json, os, sys
    found = {"failed": [], "prefix": os.path.realpath(sys.prefix)}
    for statement in statements:
        try:
            exec(statement, {})
        except BaseException as err:  # noqa: BLE001 -- each failure is reported, none stops the probe
            found["failed"].append([statement, type(err).__name__, str(err)[:300]])
    try:
        import helpers
        found["folder"] = os.path.dirname(os.path.realpath(helpers.__file__))
        try:
            open(os.path.realpath(helpers.__file__), "rb").close()
        except FileNotFoundError:
            raise FileNotFoundError("the sandbox hides that folder") from None
        found["digest"] = _course_digest(found["folder"])
    except Exception as err:  # noqa: BLE001
        hidden = isinstance(err, FileNotFoundError)
        found["unreadable"] = str(err) if hidden else f"{type(err).__name__}: {err}"
    try:
        from importlib.metadata import version
        found["version"] = version(DISTRIBUTION)
    except Exception:  # noqa: BLE001 -- not installed
        found["version"] = None
    print(MARK + json.dumps(found))
'''


def probe_code(statements: list[str]) -> str:
    """The code of the probe cell: runs ``statements`` and describes the kernel's ``helpers``."""
    return (_DIGEST + _PROBE.replace("DISTRIBUTION", repr(DISTRIBUTION)).replace("MARK", repr(MARK))
            + f"\n_course_environment({json.dumps(statements)})\n")


def course_version(root: Path = ROOT) -> str:
    """The version the course's ``pyproject.toml`` gives."""
    with (Path(root) / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["version"]


def course_digest(folder: Path) -> str:
    space: dict = {}
    exec(_DIGEST, space)  # noqa: S102 -- the same code the kernel runs
    return space["_course_digest"](str(folder))


def read_probe(text: str) -> dict | None:
    """The probe's results from the output of its cell, or None if it printed none."""
    for line in text.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    return None


def _fix(found: dict, root: Path) -> str:
    """The command that gives the grading kernels this course's package."""
    prefix, kernel = found.get("prefix") or "", found.get("folder") or ""
    if kernel and prefix and kernel.startswith(prefix.rstrip("/") + "/"):  # a copy installed there
        return (f"install this course into that environment again ({prefix}; on a class hub, "
                f"`sudo make hub-install` from {root})")
    if prefix and prefix == os.path.realpath(root / ".venv"):  # `make setup` ran for another checkout
        return f"run `rm -f .venv/.installed && {FIX}` in {root}: it installs this checkout in its .venv"
    return f"run `{FIX}` in {root} and grade with its environment (`make grade`)"


def problems(found: dict, imports: dict[str, list[str]], root: Path = ROOT) -> list[str]:
    """What is wrong with the grading kernel's environment, the likely cause first; [] if nothing.

    ``found``: the probe's results; ``imports``: statement -> the grade cells that make it.
    The kernel's ``helpers`` must be the course's folder, or an identical installed copy of it
    (a class hub installs one that every account can read); and the installed version the
    course's.
    """
    course = Path(root).resolve() / "helpers"
    kernel = found.get("folder")
    fix = _fix(found, Path(root).resolve())
    out = []
    same_folder = kernel is not None and os.path.realpath(kernel) == str(course)
    if kernel is not None and not same_folder:
        copy = found.get("digest") is not None and found["digest"] == course_digest(course)
        if not copy:
            seen = (f"where they cannot read it: {found['unreadable']}" if found.get("unreadable")
                    else "whose files differ from this course's")
            out.append(f"the Python environment was set up for another checkout of the course: grading "
                       f"kernels import the course package `helpers` from {kernel} ({seen}), not from "
                       f"{course}, the course being graded; {fix}")
    elif kernel is None:
        out.append(f"grading kernels cannot import the course package `helpers` "
                   f"({found.get('unreadable', 'no answer')}); {fix}")
    version = course_version(root)
    if found.get("version") != version and not out:
        installed = found.get("version") or "not installed"
        out.append(f"the course package in the grading kernels' environment is version {installed}, "
                   f"the course being graded ({course}) is {version}; {fix}")
    for statement, ename, evalue in found.get("failed", []):
        cells = ", ".join(imports.get(statement, [])) or "the hidden tests"
        out.append(f"the hidden tests of {cells} cannot run `{statement}` in a grading kernel: "
                   f"{ename}: {evalue}")
    return out
