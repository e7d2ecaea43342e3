"""Shared fixtures: the repository root, the lessons, and freshly built solution notebooks."""

import os
import socket
import sys
from pathlib import Path

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
