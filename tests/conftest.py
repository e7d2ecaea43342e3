"""Shared fixtures: the repository root, the lessons, and freshly built solution notebooks."""

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")  # tests never open windows

ROOT = Path(__file__).resolve().parent.parent


def lessons() -> list[str]:
    from helpers.build import lesson_ids

    return lesson_ids(ROOT)


@pytest.fixture(scope="session")
def built_solutions() -> dict[str, Path]:
    """Build every solution notebook from its source (a no-op when up to date)."""
    from helpers.build import build_solutions

    return {p.parent.name: p for p in build_solutions(ROOT)}
