"""The sandbox works wherever the course lives: under /tmp, in a home folder, in a path with
spaces or accents, outside every covered folder, with a ``.venv`` that is a symbolic link, and
with nbgrader's leftovers (gradebook, submissions, log) in the repository root.

Each place gets a small course of its own, a warm server with the course's policy for it, and a
real sandboxed kernel in a student's working folder that looks around once."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

import helpers
from helpers.grading import sandbox
from helpers.grading.warmkernel import KERNEL_NAME, WarmServer

pytestmark = pytest.mark.skipif(
    sandbox.launcher() is None,
    reason="no sandbox on this machine (needs root or user namespaces): " + sandbox.status())

VENV = Path(sys.prefix).resolve()  # the course's environment, which the kernels run
INSTALLED = Path(helpers.__file__).resolve().parent.parent  # where `import helpers` finds it
LESSON = "01_lesson"

# name: (folder to create the place in, prefix of its name, where the course's .venv points)
PLACES = {
    "under /tmp": ("/tmp", "course-", None),
    "under /home/<user>": ("/home", "student-", None),
    "path with spaces": ("/tmp", "my course ", None),
    "path with accents": ("/tmp", "cours-é-", None),
    "outside every covered folder": ("/opt", "course-", None),
    "symlinked .venv": ("/tmp", "course-", "the real venv"),
    "symlinked .venv, its target under /tmp": ("/tmp", "course-", "a venv under /tmp"),
}

# Everything the kernel reads in the course and the grading folder, as {path: text or None}
# (None: a folder); what it can write and reach; the course's Python run from its own path.
LOOK = """
import json, os, socket, subprocess
import numpy, helpers

def attempt(action):
    try:
        action()
        return "done"
    except OSError as err:
        return type(err).__name__

def read_all(top):
    found = {}
    for folder, dirs, files in os.walk(top):
        found.update({os.path.join(folder, name): None for name in dirs})
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, errors="replace") as f:
                    found[path] = f.read()
            except OSError as err:
                found[path] = type(err).__name__
    return found

python = subprocess.run([PYTHON, "-c", "import sys, numpy, helpers; print(sys.prefix)"],
                        capture_output=True, text=True)
print(json.dumps({
    "cwd": os.getcwd(),
    "seen": {**read_all(REPO), **read_all(GRADING)},
    "listed": {top: os.listdir(top) for top in ("/root", "/home") if os.path.isdir(top)},
    "python exists": os.path.exists(PYTHON),
    "python": python.stdout.strip() or python.stderr[-300:],
    "repo read-only": bool(os.statvfs(REPO).f_flag & os.ST_RDONLY),
    "write workdir": attempt(lambda: open("answer.txt", "w").write("mine")),
    "write repo": attempt(lambda: open(os.path.join(REPO, "pwned.txt"), "w").write("x")),
    "write data": attempt(lambda: open(os.path.join(REPO, "data", "words.txt"), "a").write("x")),
    "network": attempt(lambda: socket.create_connection(("10.255.255.1", 80), timeout=2)),
}))
"""


@dataclasses.dataclass
class Place:
    repo: Path
    grading: Path
    workdir: Path
    ipc: Path
    python: Path  # the course's interpreter, by the path the course knows it under
    kept: list[str]  # every folder the kernel must see, resolved
    look: dict


def _course(repo: Path, grading: Path) -> Path:
    """A small course at ``repo``, graded in ``grading``; returns the student's working folder."""
    other = f"other/{LESSON}/{LESSON}.ipynb"
    files = {
        f"solutions/{LESSON}/{LESSON}.py": "SECRET hidden tests",
        f"notebooks/{LESSON}/{LESSON}.ipynb": "{}",
        "data/words.txt": "the data",
        # what nbgrader leaves in the folder it was run from
        "gradebook.db": "SECRET gradebook in the repository",
        "nbgrader.log": "SECRET grading log",
        f"submitted/{other}": "SECRET a classmate's submission",
        f"autograded/{other}": "SECRET a classmate's graded work",
        f"feedback/{other}": "SECRET a classmate's feedback",
        f"release/{LESSON}/{LESSON}.ipynb": "SECRET release",
        f"exchange/course/inbound/{LESSON}.ipynb": "SECRET exchange",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    for name, text in {"gradebook.db": "SECRET the gradebook",
                       f"submitted/bob/{LESSON}/{LESSON}.ipynb": "SECRET bob's submission",
                       f"autograded/bob/{LESSON}/{LESSON}.ipynb": "SECRET bob's graded work",
                       f"autograded/alice/{LESSON}/{LESSON}.ipynb": "alice's own work"}.items():
        (grading / name).parent.mkdir(parents=True, exist_ok=True)
        (grading / name).write_text(text)
    return grading / "autograded" / "alice" / LESSON


def _linked_venv(repo: Path, base: Path, target: str) -> None:
    """Make ``repo/.venv`` a symbolic link to the real venv, or to a venv under ``base``
    (whose folders are links into the real one) that the sandbox's fresh /tmp covers."""
    venv = VENV
    if target == "a venv under /tmp":
        venv = base / "venvs" / "course"
        venv.mkdir(parents=True)
        for name in ("bin", "lib", "include"):
            (venv / name).symlink_to(VENV / name)
        shutil.copy(VENV / "pyvenv.cfg", venv / "pyvenv.cfg")
    (repo / ".venv").symlink_to(venv)


def _run(client, code: str) -> str:
    out = []

    def collect(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    client.execute_interactive(code, output_hook=collect, timeout=60)
    return "".join(out)


@pytest.fixture(scope="module", params=list(PLACES))
def place(request) -> Place:
    parent, prefix, venv = PLACES[request.param]
    if not os.access(parent, os.W_OK):
        pytest.skip(f"cannot create a course in {parent}")
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    base.chmod(0o755)  # open to every user, as a checkout is (mkdtemp makes it the owner's only)
    server = manager = client = None
    try:
        repo, grading = base / "attention", base / "grading"
        workdir = _course(repo, grading)
        python, keep = VENV / "bin" / "python", ()
        if venv is not None:
            _linked_venv(repo, base, venv)
            python, keep = repo / ".venv" / "bin" / "python", (str(repo / ".venv"),)
        folder = grading / ".warm"  # where the grader keeps it, hidden but for its sockets
        ipc = folder / "ipc"
        ipc.mkdir(parents=True)
        ipc.chmod(0o1777)
        policy = sandbox.course_policy(repo, grading, writable=(str(ipc),))
        # as sys.prefix would be; and the checkout the environment installed `helpers` from
        # (editable), which a real course's policy keeps as its repository
        policy = dataclasses.replace(policy, keep=(*policy.keep, *keep, str(INSTALLED)))
        server = WarmServer.start(folder, policy=policy, prefix=sandbox.launcher())
        specs = KernelSpecManager(kernel_dirs=[str(server.kernelspec(folder / "share") / "kernels")])
        manager = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs,
                                transport="ipc", ip=str(ipc / "kernel"))
        manager.start_kernel(cwd=str(workdir))
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        code = LOOK.replace("REPO", repr(str(repo))).replace("GRADING", repr(str(grading))) \
            .replace("PYTHON", repr(str(python)))
        printed = _run(client, code)
        assert printed.startswith("{"), printed
        kept = [os.path.realpath(p) for p in (*policy.keep, workdir, ipc)]
        yield Place(repo, grading, workdir, ipc, python, kept, json.loads(printed))
    finally:
        if client is not None:
            client.stop_channels()
        if manager is not None and manager.has_kernel:
            manager.shutdown_kernel(now=True)
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _on_the_way(path: str, kept: list[str]) -> bool:
    """Whether ``path`` is a kept folder, inside one, or a folder on the way to one."""
    return any(_inside(path, k) or _inside(k, path) for k in kept)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def test_the_kernel_runs_in_its_folder_and_reads_the_course(place):
    assert place.look["cwd"] == str(place.workdir)
    assert place.look["seen"][str(place.repo / "data" / "words.txt")] == "the data"
    assert place.look["seen"][str(place.workdir / f"{LESSON}.ipynb")] == "alice's own work"


def test_tests_gradebooks_and_classmates_stay_hidden(place):
    seen = place.look["seen"]
    assert not [path for path, text in seen.items() if text and "SECRET" in text]
    for folder in ("solutions", "submitted", "autograded", "feedback", "release", "exchange"):
        inside = [p for p in seen if p.startswith(str(place.repo / folder) + "/")]
        assert inside == [], f"{folder}/ of the repository shows {inside}"
    for name in ("gradebook.db", "nbgrader.log"):  # in place, but empty
        assert seen[str(place.repo / name)] == ""
    in_grading = [p for p in seen if _inside(p, str(place.grading))]
    assert [p for p in in_grading if not _on_the_way(p, place.kept)] == []
    for top, names in place.look["listed"].items():  # /root and /home: only the way to kept folders
        assert [n for n in names if not _on_the_way(f"{top}/{n}", place.kept)] == [], top


def test_it_writes_only_its_own_folder(place):
    assert place.look["write workdir"] == "done"
    assert (place.workdir / "answer.txt").read_text() == "mine"
    assert place.look["repo read-only"]  # for the grader's own user id too (user namespaces)
    assert place.look["write repo"] != "done" and place.look["write data"] != "done"
    assert not (place.repo / "pwned.txt").exists()
    assert (place.repo / "data" / "words.txt").read_text() == "the data"


def test_there_is_no_network(place):
    assert place.look["network"] == "OSError", place.look["network"]  # unreachable: no interface


def test_the_course_python_runs_from_its_own_path(place):
    assert place.look["python exists"], f"{place.python} is not there in the sandbox"
    assert place.look["python"] == str(place.python.parent.parent), place.look["python"]
