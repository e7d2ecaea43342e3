"""How grading executes a notebook when the kernel dies or will not stop: the lost cell is
marked, a new kernel rebuilds the state of the cells above and grading goes on; after too many
new kernels the rest is marked as not run."""

from nbformat.v4 import new_code_cell, new_notebook
from test_autograde import STUBBORN as STUCK

from helpers.grading.execute import GuardedExecute, is_cap_marker

CRASH = "import os\nos._exit(1)"


def _run(sources, tmp_path, **options):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    executor = GuardedExecute(timeout=3, iopub_timeout=1, kernel_name="python3", **options)
    executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb.cells


def _errors(cell):
    return [o.ename for o in cell.outputs if o.output_type == "error"]


def _text(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_dead_or_stuck_kernel_costs_only_its_cell(tmp_path):
    cells = _run(["x = 20", CRASH, "x += 1", STUCK, "print('x =', x)"], tmp_path)
    assert _errors(cells[1]) == ["DeadKernelError"]
    assert "kernel died" in cells[1].outputs[-1].evalue
    assert _errors(cells[3])[-1] == "CellTimeoutError"
    assert "did not stop when interrupted" in cells[3].outputs[-1].evalue
    # each new kernel ran the cells above the lost one once: x = 20, then x += 1
    assert _text(cells[4]) == "x = 21\n"


def test_after_too_many_new_kernels_the_rest_is_not_run(tmp_path):
    cells = _run(["x = 1", CRASH, CRASH, "print(x)"], tmp_path, max_restarts=1)
    assert _errors(cells[1]) == ["DeadKernelError"] and _errors(cells[2]) == ["DeadKernelError"]
    assert _errors(cells[3]) == ["NotRun"]


def test_output_past_the_cap_is_cut_and_marked(tmp_path):
    cells = _run(["for _ in range(2000):\n    print('y' * 100)"], tmp_path, max_output_bytes=10_000)
    assert len(_text(cells[0])) <= 10_000
    assert sum(map(is_cap_marker, cells[0].outputs)) == 1


def test_a_course_kept_deep_in_folders_still_grades(tmp_path):
    # A kernel's sockets (Unix sockets in the sandbox) have 107-byte addresses at most; a course
    # root deep in folders must not stop grading.
    root = tmp_path / ("a-course-kept-in-a-folder-with-a-long-name-" * 3)
    root.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    nb = new_notebook(cells=[new_code_cell("print(6 * 7)")])
    GuardedExecute(timeout=30).preprocess(nb, {"metadata": {"path": str(work)},
                                               "nbgrader": {"db_url": f"sqlite:///{root}/gradebook.db"}})
    assert _text(nb.cells[0]) == "42\n"
