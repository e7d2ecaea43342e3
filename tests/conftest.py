"""Shared fixtures: the repository root, the lessons, and freshly built solution notebooks."""

import os
import re
import socket
import sys
from pathlib import Path

# Under `make test` each worker process gets its share of the cores, before anything imports
# PyTorch: the kernels, notebooks and grading workers the tests start inherit it. Two workers
# each running PyTorch on every core spend their time waiting for each other's threads.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1)
                                                        // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import matplotlib
import pytest

from tooling import deck_review

matplotlib.use("Agg")  # tests never open windows

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "hub"))  # the class hub's modules (classhub, roster) for the tests


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_api(port: int, token: str):
    """call(path, method, body, timeout): a Jupyter server's JSON API on loopback, with its token."""
    import json
    import urllib.request

    def call(path, method="GET", body=None, timeout=120):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    return call


def wait_for_formgrader(call, server, log, seconds: float = 90) -> None:
    """Until the formgrader answers; a test failure with the server's ``log()`` if it never does."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            call("/formgrader/api/status")
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"the Jupyter server did not start:\n{log()}")
            time.sleep(0.5)


def lessons() -> list[str]:
    from tooling.build import lesson_ids

    return lesson_ids(ROOT)


@pytest.fixture
def no_show(monkeypatch):
    """Plot helpers must never call plt.show(); close every figure afterwards."""
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *a, **k: pytest.fail("a helper called plt.show()"))
    yield
    plt.close("all")


@pytest.fixture(scope="session")
def built_solutions() -> dict[str, Path]:
    """Build every solution notebook from its source (a no-op when up to date)."""
    from tooling.build import build_solutions

    return {p.parent.name: p for p in build_solutions(ROOT)}


CHROMIUM, CHROMIUM_ARGS = deck_review.CHROMIUM, deck_review.CHROMIUM_ARGS  # Debian's Chromium (or $CHROMIUM)


def require_chromium() -> None:
    """Skip when Debian's Chromium is missing, unless REQUIRE_BROWSER=1 makes that a failure."""
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} not found (apt-get install -y chromium)"
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(f"browser test skipped: {reason}; set REQUIRE_BROWSER=1 to make this a failure")


def launch_chromium(playwright, profile: Path, width: int = 1280, height: int = 800):
    """Headless Chromium with a fresh profile that fetches nothing of its own accord."""
    return deck_review.launch(playwright, profile, width, height)


@pytest.fixture(autouse=True, scope="module")
def _stop_grading_servers():
    """Grading in this process starts warm kernel servers (one per course root); end them with
    the module that started them rather than at the end of the whole run."""
    yield
    import sys

    execute = sys.modules.get("helpers.grading.execute")
    if execute is not None:
        execute.stop_servers()


# ------------------------------------------------------------------ running on every core
# `make test` runs the suite in two worker processes (pytest-xdist). A test file is one unit of
# work, run whole by one worker, so that its module fixtures run once; except that
# - the files that create Linux accounts and run the class hub share one worker (they share the
#   machine's accounts and the hub's exchange);
# - test_every_lesson_grades is one unit per lesson (each lesson's grading is its own fixture).
# Units start longest first, as measured on 2 cores, so that the two workers finish together.
ONE_MACHINE = ("test_hub.py", "test_hub_accounts.py", "test_hub_kubernetes.py", "test_exchange_owners.py")
LONGEST_FIRST = (*ONE_MACHINE, "test_slides.py", "test_every_lesson_grades.py", "test_autograde.py",
                 "test_class_workflow.py",
                 "test_grading_environment.py", "test_hostile.py", "test_lab_browser.py", "test_platforms.py",
                 "test_notebooks.py", "test_validate.py", "test_grading.py", "test_mistakes.py",
                 "test_one_charge.py", "test_training.py", "test_lab_roles.py", "test_hints.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or one of the groups above."""
    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    if name in ONE_MACHINE:
        return "the class hub and the machine's accounts"
    lesson = re.search(r"\[(\d\d_[a-z_0-9]+)", nodeid)
    if name == "test_every_lesson_grades.py" and lesson:
        return f"{path}[{lesson.group(1)}]"
    return path


def pytest_collection_modifyitems(config, items):
    """In workers, longest units first (the order within a file is kept); in one process, the
    usual order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    def rank(item):
        name = Path(item.nodeid.split("::", 1)[0]).name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # a stable sort: each file keeps its order


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which would answer for `-n` alone
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # xdist would order units by their number of tests

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)
