"""Warm kernels behave like fresh ones: outputs, working directory, interrupts at the time
limit, dead kernels, independent random seeds, and no process left behind."""

import os
import subprocess

import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_notebook

from helpers.grading.warmkernel import KERNEL_NAME, WarmServer


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm")
    server = WarmServer.start(folder)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(server.kernelspec(folder / "share"))
    yield server
    server.stop()
    if old is None:
        os.environ.pop("JUPYTER_PATH")
    else:
        os.environ["JUPYTER_PATH"] = old


def _run(sources, cwd, timeout=20):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME, allow_errors=True,
                   interrupt_on_timeout=True, resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_runs_code_in_the_notebooks_folder(warm, tmp_path):
    nb = _run(["import os, torch; print(os.getcwd()); print(torch.ones(2).sum().item())"], tmp_path)
    assert _text(nb.cells[0]).split() == [str(tmp_path), "2.0"]


def test_figures_are_inline_pngs(warm, tmp_path):
    nb = _run(["import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"], tmp_path)
    assert any("image/png" in o.get("data", {}) for o in nb.cells[0].outputs)


def test_time_limit_interrupts_and_the_next_cell_still_runs(warm, tmp_path):
    nb = _run(["while True:\n    pass", "print('after')"], tmp_path, timeout=3)
    assert nb.cells[0].outputs[-1]["ename"] == "KeyboardInterrupt"
    assert _text(nb.cells[1]) == "after\n"


def test_a_kernel_that_exits_is_reported_dead(warm, tmp_path):
    with pytest.raises(DeadKernelError):
        _run(["import os\nos._exit(3)", "print('never')"], tmp_path)


def test_each_kernel_has_its_own_random_state(warm, tmp_path):
    draws = {_text(_run(["import numpy, random, torch\n"
                         "print(numpy.random.rand(), random.random(), torch.rand(1).item())"],
                        tmp_path).cells[0]) for _ in range(3)}
    assert len(draws) == 3


def test_stopping_leaves_no_process(tmp_path):
    server = WarmServer.start(tmp_path)
    pid = server.process.pid
    server.stop()
    assert not (tmp_path / "warm.sock").exists()
    left = subprocess.run(["pgrep", "-f", f"warmkernel serve {tmp_path}"], capture_output=True)
    assert left.stdout.strip() == b"", f"server {pid} still running"


def test_a_course_kept_deep_in_folders_still_gets_warm_kernels(tmp_path, monkeypatch):
    # A Unix socket's address holds 107 bytes; a course in a deep folder (a test worker's
    # temporary folder is one) goes past that with its server's socket.
    folder = tmp_path / ("a-course-kept-in-a-folder-with-a-long-name-" * 3) / ".warm" / "12345-0"
    assert len(str(folder / "warm.sock").encode()) > 108
    server = WarmServer.start(folder, timeout=120)
    try:
        monkeypatch.setenv("JUPYTER_PATH", str(server.kernelspec(folder / "share")))
        assert _text(_run(["print(6 * 7)"], tmp_path).cells[0]).strip() == "42"
    finally:
        server.stop()
    assert not (folder / "warm.sock").exists()


def test_a_kernel_uses_every_thread_after_the_servers_warm_up(warm, tmp_path):
    # The server ran torch before forking: a child must still run torch in several threads (an
    # OpenMP pool started before a fork would hang it).
    nb = _run(["import torch\ntorch.set_num_threads(2)\nx = torch.randn(800, 800)\n"
               "print(torch.get_num_threads(), (x @ x).shape)"], tmp_path, timeout=30)
    assert _text(nb.cells[0]).split() == ["2", "torch.Size([800,", "800])"]
