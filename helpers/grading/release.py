"""The student notebooks: nbgrader's release of the solution notebooks, with the course's settings.

    python -m helpers.grading.release [OUT_DIR]   # notebooks/NN_topic/NN_topic.ipynb (or OUT_DIR)

``make release`` runs it. No gradebook is touched (``--no-db``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from traitlets.config import Config

from tooling.build import build_solutions, lesson_ids, write_if_changed

from ..paths import ROOT
from .settings import configure


def release(root: Path = ROOT, out_dir: Path | None = None) -> list[Path]:
    """Regenerate the student notebooks with nbgrader (no gradebook is touched)."""
    build_solutions(root)
    out_dir = Path(out_dir).resolve() if out_dir else root / "notebooks"
    config = configure(Config())
    config.CourseDirectory.source_directory = str(root / "solutions")
    config.CourseDirectory.release_directory = str(out_dir)
    config.GenerateAssignment.no_database = True  # what `nbgrader generate_assignment --no-db` sets
    config.SaveCells.enabled = False
    api = NbGraderAPI(config=config)
    written = []
    for lesson in lesson_ids(root):
        result = api.generate_assignment(lesson, force=True, create=False)
        if not result["success"]:
            raise RuntimeError(f"nbgrader could not generate {lesson}:\n{result.get('error', '')}"
                               f"\n{result.get('log', '')}")
        path = out_dir / lesson / f"{lesson}.ipynb"
        nb = nbformat.read(path, as_version=4)
        write_if_changed(nb, path)  # nbformat's own formatting, newline at the end
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?", type=Path, help="release here, not into notebooks/")
    args = parser.parse_args(argv)
    for path in release(out_dir=args.out_dir):
        print(f"released {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
