"""Graded code sees nothing of the grader: with an instructor's hub token, cloud keys and HOME in
the grader's environment, a submission that prints its environment and reads every
``/proc/*/environ`` it can (its parent's, the warm server's, the grader's) finds none of them —
graded the way ``make grade`` grades (``grade_class``) and the way plain ``nbgrader autograde``
and the formgrader do (the course's ``nbgrader_config.py``)."""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from helpers.grading import sandbox
from helpers.grading.autograde import fill_notebook, grade_class, prepare, solution_answers
from helpers.grading.submissions import import_submissions

LESSON = "02_attention_lookup"
SECRETS = {
    "JUPYTERHUB_API_TOKEN": "secret-hub-token-5f1c9e",
    "JPY_API_TOKEN": "secret-jpy-token-77a0d2",
    "JUPYTERHUB_USER": "secret-instructor-ada",
    "AWS_SECRET_ACCESS_KEY": "secret-aws-key-9b3e41",
}
# What the answer cell prints: its environment, its parent's and grandparent's, and every process
# environment /proc lets it read (the warm server's, the grader's, anything of the same user).
LEAK = '''
import glob, os
print("ENVIRON", dict(os.environ))
def _parent(pid):
    try:
        return next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("PPid:"))
    except (OSError, StopIteration):
        return 0
_paths = [f"/proc/{os.getppid()}/environ", f"/proc/{_parent(os.getppid())}/environ",
          "/proc/self/environ", *sorted(glob.glob("/proc/[0-9]*/environ"))]
_read = 0
for _path in _paths:
    try:
        _text = open(_path, "rb").read().replace(b"\\0", b" ").decode(errors="replace")
        _read += 1
        print("READ", _path, _text)
    except OSError as err:
        print("BLOCKED", _path, type(err).__name__)
print("READABLE", _read)
'''


@pytest.fixture(scope="module")
def secret_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("secret-home-of-the-instructor")
    (home / ".bashrc").write_text("export NOTHING=here\n")
    return home


@pytest.fixture(scope="module")
def grader_secrets(secret_home):
    """The grader's environment holds an instructor's token, keys and HOME."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in SECRETS.items():
            mp.setenv(name, value)
        mp.setenv("HOME", str(secret_home))
        yield {**SECRETS, "HOME": str(secret_home)}


def _leaking_class(folder: Path) -> None:
    full = solution_answers(LESSON)
    nb = fill_notebook(LESSON, {**full, "quiz_1": full["quiz_1"] + "\n" + LEAK})
    path = folder / "leaker" / LESSON / f"{LESSON}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


def _printed(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    return "".join(str(o.get("text", "")) + str(o.get("data", "")) for c in nb.cells
                   for o in c.get("outputs", []))


def _assert_nothing_leaked(root: Path, secrets: dict[str, str]) -> None:
    graded = root / "autograded" / "leaker" / LESSON / f"{LESSON}.ipynb"
    printed = _printed(graded)
    assert "ENVIRON" in printed and "READABLE" in printed, printed[:2000]  # the cell did run
    assert "'PATH':" in printed  # and printed an environment: the allow-listed one
    pages = list((root / "feedback" / "leaker" / LESSON).glob("*.html"))
    assert pages, "no feedback page"
    texts = {"graded notebook": graded.read_text(), **{p.name: p.read_text() for p in pages}}
    for where, text in texts.items():
        for name, value in secrets.items():
            assert value not in text, f"{name} of the grader appears in the {where}"
        assert "JUPYTERHUB" not in text and "JPY_API" not in text, where


def test_make_grade_kernels_see_none_of_the_graders_secrets(grader_secrets, tmp_path, built_solutions):
    _leaking_class(tmp_path / "class")
    report = grade_class(LESSON, tmp_path / "class", tmp_path / "course", workers=1, timeout=60)
    assert "leaker" in report.graded, report.lines()
    _assert_nothing_leaked(tmp_path / "course", grader_secrets)
    printed = _printed(tmp_path / "course" / "autograded" / "leaker" / LESSON / f"{LESSON}.ipynb")
    if sandbox.launcher() is not None:  # a sandboxed kernel's HOME is its private /tmp
        assert "'HOME': '/tmp'" in printed


def test_plain_nbgrader_autograde_kernels_see_none_of_the_graders_secrets(grader_secrets, tmp_path,
                                                                          built_solutions):
    root = tmp_path / "course"
    _leaking_class(tmp_path / "class")
    prepare(LESSON, root)
    import_submissions(LESSON, tmp_path / "class", root)
    (root / "nbgrader_config.py").write_text("from helpers.grading.settings import configure\n"
                                             f"configure(get_config(), {str(root)!r})\n")
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    env = {**os.environ, **grader_secrets}
    for step in ("autograde", "generate_feedback"):
        done = subprocess.run([nbgrader, step, LESSON, "--force"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    _assert_nothing_leaked(root, grader_secrets)


def test_the_kernel_environment_is_an_allow_list():
    given = {**SECRETS, "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
             "ATTENTION_DATA": "/data", "OMP_NUM_THREADS": "1", "HOME": "/home/ada",
             "JPY_PARENT_PID": "42", "SSH_AUTH_SOCK": "/tmp/agent"}
    env = sandbox.kernel_environment(given, home="/tmp/kernel-home")
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
                   "ATTENTION_DATA": "/data", "OMP_NUM_THREADS": "1", "HOME": "/tmp/kernel-home"}


def test_a_grading_process_environment_is_unreadable_to_its_user():
    """``private_process``: another process of the same user cannot read the grader's
    /proc/PID/environ (what a kernel with the grader's user id, unsandboxed, would try)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    # As root, both run as an unprivileged user (root could read anything anyway).
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    code = ("import os, sys, time; from helpers.grading.sandbox import private_process; "
            "private_process() if sys.argv[1] == '1' else None; print(os.getpid(), flush=True); "
            "time.sleep(30)")
    readable = {}
    for private in ("0", "1"):
        grader = subprocess.Popen([*as_user, sys.executable, "-c", code, private], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, **SECRETS})
        try:
            pid = grader.stdout.readline().strip()
            done = subprocess.run([*as_user, sys.executable, "-c",
                                   f"print(open('/proc/{pid}/environ', 'rb').read())"],
                                  capture_output=True, text=True, timeout=60)
            readable[private] = SECRETS["JPY_API_TOKEN"] in done.stdout
        finally:
            grader.kill()
            grader.wait()
    assert readable == {"0": True, "1": False}


# The user-namespace sandbox, which a grader without root (an instructor on a class hub) gets,
# taken here by a grader that is root but told it is not: its kernel keeps the grader's user
# id, as it would there.
AS_A_USER = '''
import os, sys
os.geteuid = lambda: 1000
from pathlib import Path
import nbformat
from traitlets.config import Config
from helpers.grading import sandbox
from helpers.grading.execute import GuardedExecute, stop_servers
from helpers.grading.settings import configure
assert sandbox.launcher()[:2] == ["unshare", "--user"], sandbox.launcher()
root = Path(sys.argv[1])
config = configure(Config(), root)
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(sys.stdin.read())])
work = root / "work"
work.mkdir()
try:
    GuardedExecute(config=config).preprocess(
        nb, {"metadata": {"path": str(work)}, "nbgrader": {"db_url": f"sqlite:///{root}/gradebook.db"}})
finally:
    stop_servers()
nbformat.write(nb, root / "graded.ipynb")
'''


@pytest.mark.skipif(os.geteuid() != 0 or sandbox.launcher() is None, reason="needs root and namespaces")
def test_a_kernel_in_a_user_namespace_sees_none_of_the_graders_secrets(grader_secrets, tmp_path):
    code = LEAK + "\nprint('PROCESSES', sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
    done = subprocess.run([sys.executable, "-c", AS_A_USER, str(tmp_path)], input=code, cwd=ROOT,
                          env={**os.environ, **grader_secrets}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = _printed(tmp_path / "graded.ipynb")
    assert "READABLE" in printed and "'PATH':" in printed, printed[:2000]
    for name, value in grader_secrets.items():
        assert value not in printed, f"{name} of the grader appears in the kernel's output"
    assert "PROCESSES ['1']" in printed  # a /proc of its own PID namespace: only itself
    assert "READ /proc/self/environ" in printed  # its own (the warm server's) environment, allow-listed
