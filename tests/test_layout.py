"""The course's three packages and who may import whom.

- ``helpers``      the lesson library (what the notebooks import), with ``checks/`` and the
  instructors' ``grading/``;
- ``experiments``  what made ``data/``; builds on ``helpers``;
- ``tooling``      notebooks and slides; builds on ``helpers``.

The library imports neither of the others; ``helpers.grading`` may use ``tooling.build`` (it grades
from the notebooks it builds), and nothing imports ``helpers.grading`` back from outside it. No two
modules import each other, directly or through others (imports inside functions count too).
"""

from __future__ import annotations

import ast
import importlib

import pytest
from conftest import ROOT

PACKAGES = ("helpers", "experiments", "tooling")


def _module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, name: str) -> set[str]:
    """Every course module ``path`` imports, at its top or inside functions."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = ".".join(base[: len(base) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    modules = {_module_name(p): p for p in paths}
    edges = {}
    for name, path in modules.items():
        # a package's __init__ runs on any import of its modules: it is not a dependency to follow
        edges[name] = {m for m in _imports(path, name) if m in modules and m != name
                       and not modules[m].name == "__init__.py"}
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_imports_that_exist(graph):
    assert "helpers.trained" in graph["helpers.recurrence"]  # a top-level relative import
    assert "helpers.trained" in graph["helpers.scaling"]  # an import inside a function
    assert "tooling.build" in graph["helpers.grading.release"]
    assert {"helpers.paths", "helpers.runtime", "helpers.gpt"} <= graph["experiments.tiny_gpt"]


def test_no_import_circles(graph):
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_imports_neither_experiments_nor_tooling(graph):
    wrong = {(m, dep) for m, deps in graph.items() for dep in deps
             if m.startswith("helpers.") and not m.startswith("helpers.grading")
             and dep.split(".")[0] in ("experiments", "tooling")}
    assert not wrong, f"the lesson library imports what is built on it: {sorted(wrong)}"


# The one use of the grading machinery outside it: the slide export runs each lesson in the
# warm kernels that grading uses (no sandbox), as fast to start as a graded kernel.
OUTSIDE_GRADING = {("tooling.slides", "helpers.grading.warmkernel")}


def test_only_grading_uses_grading(graph):
    wrong = {(m, dep) for m, deps in graph.items() for dep in deps
             if dep.startswith("helpers.grading") and not m.startswith("helpers.grading")}
    assert wrong <= OUTSIDE_GRADING, sorted(wrong - OUTSIDE_GRADING)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_says_what_it_holds_and_who_uses_it(package):
    doc = importlib.import_module(package).__doc__ or ""
    assert doc.startswith("Attention from Scratch: "), doc[:80]
    modules = {p.stem for p in (ROOT / package).glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()}
    missing = sorted(m for m in modules if f"``{m}``" not in doc)
    assert not missing, f"{package}/__init__.py does not list {missing}"
    assert "import" in doc and ("Used by" in doc or "lesson imports" in doc)
