"""Build the solution notebooks from the lessons' jupytext sources.

    python -m tooling.build                    # solutions/NN_topic/NN_topic.ipynb (git-ignored)

(The student notebooks are made from these by nbgrader: ``python -m helpers.grading.release``.)

Every cell gets slide metadata: what the source states, else a convention — a markdown cell
opening with a ``#``/``##`` heading starts a slide, ``###`` a sub-slide, cells tagged
``hide-in-slides``, grade cells and the setup cell are skipped, everything else continues the
current slide.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat

from helpers.paths import ROOT

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def lesson_ids(root: Path = ROOT) -> list[str]:
    """Lessons are the folders ``solutions/NN_topic`` holding ``NN_topic.py``."""
    return sorted(p.parent.name for p in (root / "solutions").glob("*/*.py")
                  if p.stem == p.parent.name)


def slide_type(cell) -> str:
    """The slide type the convention gives a cell (see the module docstring)."""
    nbg = cell.metadata.get("nbgrader", {})
    if "hide-in-slides" in cell.metadata.get("tags", []):
        return "skip"
    if cell.cell_type == "code" and (nbg.get("grade") or nbg.get("grade_id") == "setup"):
        return "skip"  # tests and the imports of the setup cell are not for the audience
    if cell.cell_type == "markdown":
        first = cell.source.lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### "):
            return "subslide"
    return "-"


def solution_notebook(lesson: str, root: Path = ROOT) -> nbformat.NotebookNode:
    """The solution notebook of ``lesson``, built from its jupytext source; deterministic."""
    nb = jupytext.read(root / "solutions" / lesson / f"{lesson}.py")
    nb.metadata = nbformat.from_dict({
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python"},
    })
    for i, cell in enumerate(nb.cells):
        cell.id = f"{lesson[:2]}-{i:03d}"  # stable ids: rebuilding gives identical files
        cell.metadata.setdefault("slideshow", {"slide_type": slide_type(cell)})
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nb


def write_if_changed(nb, path: Path) -> bool:
    text = nbformat.writes(nb) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def build_solutions(root: Path = ROOT, lessons: list[str] | None = None) -> list[Path]:
    """Write ``solutions/NN/NN.ipynb`` for every lesson (or those in ``lessons``); returns the
    notebook paths."""
    paths = []
    for lesson in lesson_ids(root) if lessons is None else lessons:
        path = root / "solutions" / lesson / f"{lesson}.ipynb"
        if write_if_changed(solution_notebook(lesson, root), path):
            print(f"built {path.relative_to(root)}")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="?", choices=["solutions"], default="solutions")
    parser.parse_args(argv)
    build_solutions()
    return 0


if __name__ == "__main__":
    sys.exit(main())
