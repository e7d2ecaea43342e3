"""Hostile submissions, graded the way a class is graded (sandboxed, in parallel): each costs
only its own points for the cells it breaks, is named in the report, and never stops the others.

The slow bombs (fork bomb, endless output) run with `make hostile`, not in `make test`."""

import nbformat
import numpy as np
import pytest
import torch
from conftest import ROOT

from helpers import attention as ref
from helpers.checks import CheckFailed, check_softmax
from helpers.grading import sandbox
from helpers.grading.autograde import fill_notebook, grade_class, solution_answers

LESSON = "02_attention_lookup"
FULL = 13.0
WRONG_SOFTMAX = "def softmax(x, axis=-1):\n    return np.ones_like(x) / x.shape[axis]\n"

SNOOP = '''import os, socket
def probe(what, action):
    try:
        action()
        print(what, "REACHED")
    except Exception as err:
        print(what, "blocked:", type(err).__name__)
probe("solutions", lambda: open(SOLUTIONS).read())
probe("gradebook", lambda: open(GRADEBOOK).read())
probe("other student", lambda: open(OTHER).read())
probe("write outside", lambda: open(OUTSIDE, "w").write("x"))
probe("write course", lambda: open(COURSE, "w").write("x"))
probe("network", lambda: socket.create_connection(("10.255.255.1", 80), timeout=2))
'''

# More sleeping children than the sandbox's process limit: the cell fails, and the children
# would hold every process slot (no thread could start in later cells) if they outlived it.
SPAWNER = """import os, time
for _ in range(200):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
"""


def _submission(folder, student, answers, edit=None):
    nb = fill_notebook(LESSON, answers)
    if edit:
        edit(nb)
    path = folder / student / LESSON / f"{LESSON}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, built_solutions):
    tmp = tmp_path_factory.mktemp("hostile")
    subs, root = tmp / "submitted", tmp / "grading"
    full = solution_answers(LESSON)
    outside = tmp / "pwned.txt"
    snoop = SNOOP.replace("SOLUTIONS", repr(str(ROOT / "solutions" / LESSON / f"{LESSON}.py"))) \
        .replace("GRADEBOOK", repr(str(root / "gradebook.db"))) \
        .replace("OTHER", repr(str(root / "submitted" / "honest" / LESSON / f"{LESSON}.ipynb"))) \
        .replace("OUTSIDE", repr(str(outside))) \
        .replace("COURSE", repr(str(ROOT / "helpers" / "pwned.py")))
    _submission(subs, "honest", full)
    _submission(subs, "noisy", {**full, "softmax": full["softmax"].replace(
        '    """Numerically', '    import sys\n    print("debugging", file=sys.stderr)\n    """Numerically')})
    _submission(subs, "patcher", {**full, "softmax": WRONG_SOFTMAX + (
        "np.allclose = lambda *a, **k: True\ntorch = __import__('torch')\n"
        "torch.allclose = lambda *a, **k: True\ntorch.all = lambda *a, **k: True\n")})
    _submission(subs, "fake_checker", {**full, "softmax": WRONG_SOFTMAX + (
        "def check_softmax(*args, **kwargs):\n    print('✓ looks fine')\n")})
    _submission(subs, "snooper", {**full, "quiz_1": full["quiz_1"] + "\n" + snoop})
    _submission(subs, "memory_bomb", {**full, "quiz_1": "hog = bytearray(64 * 2**30)\nquiz_1 = 'a'"})
    _submission(subs, "spawner", {**full, "quiz_1": full["quiz_1"] + "\n" + SPAWNER})
    _submission(subs, "chatty", {**full, "quiz_2": full["quiz_2"] + "\nfor _ in range(60_000):\n"
                                 "    print('spam ' * 40)"})
    _submission(subs, "deleter", full, edit=lambda nb: nb.cells.remove(_cell(nb, "softmax_tests")))
    _submission(subs, "editor", {**full, "softmax": WRONG_SOFTMAX},
                edit=lambda nb: setattr(_cell(nb, "softmax_tests"), "source", "pass"))
    report = grade_class(LESSON, subs, root, workers=2, timeout=60)
    return root, report, outside


def test_honest_and_noisy_answers_keep_full_marks(hostile):
    _, report, _ = hostile
    assert report.graded["honest"] == FULL
    assert report.graded["noisy"] == FULL  # text on stderr is not a failure


def test_patched_comparisons_and_fake_checks_earn_nothing(hostile):
    _, report, _ = hostile
    for student, kind in (("patcher", "monkeypatch"), ("fake_checker", "redefines-grader")):
        assert report.graded[student] == 0 and student in report.zeroed
        assert any(f.kind == kind for f in report.integrity[student])
    text = "\n".join(report.lines())
    assert "ZEROED patcher" in text and "ZEROED fake_checker" in text


@pytest.mark.skipif(sandbox.launcher() is None, reason=sandbox.status())
def test_the_sandbox_hides_tests_gradebook_classmates_and_network(hostile):
    root, report, outside = hostile
    assert report.isolation.startswith("sandboxed")
    nb = nbformat.read(root / "autograded" / "snooper" / LESSON / f"{LESSON}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in _cell(nb, "quiz_1").outputs)
    # (a write outside may land in the kernel's private /tmp: what matters is that it stays there)
    for what in ("solutions", "gradebook", "other student", "write course", "network"):
        assert f"{what} blocked" in printed, printed
    assert not outside.exists() and not (ROOT / "helpers" / "pwned.py").exists()
    kinds = {f.kind: f.severity for f in report.integrity["snooper"]}
    assert kinds["network"] == "review" and kinds["hidden-files"] == "tamper"
    assert "snooper" in report.zeroed  # reaching for the hidden tests holds the score for review


@pytest.mark.skipif(sandbox.launcher() is None, reason=sandbox.status())
def test_memory_bomb_costs_only_its_cell(hostile):
    _, report, _ = hostile
    assert report.graded["memory_bomb"] == FULL - 1  # quiz_1 lost, nothing else
    assert report.limited["memory_bomb"] == ["memory limit in quiz_1"]
    assert "  memory_bomb: ran into the memory limit in quiz_1" in report.lines()


@pytest.mark.skipif(sandbox.launcher() is None, reason=sandbox.status())
def test_processes_left_by_a_cell_end_with_it(hostile):
    root, report, _ = hostile
    nb = nbformat.read(root / "autograded" / "spawner" / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert [o.ename for o in _cell(nb, "quiz_1").outputs if o.output_type == "error"] == \
        ["BlockingIOError"]  # the process limit stopped the loop
    assert report.graded["spawner"] == FULL  # and later cells still start threads
    assert report.limited["spawner"] == ["process limit in quiz_1"]
    assert "spawner" not in report.crashed and "spawner" not in report.interrupted


def test_endless_output_is_cut_and_costs_nothing(hostile):
    root, report, _ = hostile
    assert report.graded["chatty"] == FULL
    assert report.limited["chatty"] == ["output cap in quiz_2"]
    nb = nbformat.read(root / "autograded" / "chatty" / LESSON / f"{LESSON}.ipynb", as_version=4)
    kept = sum(len(o.get("text", "")) for o in _cell(nb, "quiz_2").outputs)
    assert kept < 3_000_000 and "truncated" in str(_cell(nb, "quiz_2").outputs).lower()


def test_deleted_and_edited_test_cells_are_restored_and_reported(hostile):
    _, report, _ = hostile
    assert report.graded["deleter"] == FULL
    assert any(f.kind == "deleted-grade-cell" for f in report.integrity["deleter"])
    assert report.graded["editor"] == FULL - 3  # softmax wrong: only its own tests lose
    assert any(f.kind == "edited-locked-cell" for f in report.integrity["editor"])


def test_patching_inside_one_kernel_cannot_make_a_check_pass():
    """Even without the scan: checks compare with functions captured before student code ran,
    and refuse to pass once comparison functions were replaced."""
    saved = np.allclose, torch.allclose, torch.all
    try:
        np.allclose = torch.allclose = torch.all = lambda *a, **k: True
        with pytest.raises(CheckFailed, match="differs from the reference"):
            check_softmax(lambda x, axis=-1: np.ones_like(x), verbose=False)
        with pytest.raises(CheckFailed, match="replaced numpy.allclose"):
            check_softmax(ref.softmax, verbose=False)
    finally:
        np.allclose, torch.allclose, torch.all = saved
    check_softmax(ref.softmax, verbose=False)


def test_grading_without_a_sandbox_says_so_loudly(monkeypatch):
    monkeypatch.setattr(sandbox, "launcher", lambda: None)
    assert sandbox.status().startswith("WARNING: NOT SANDBOXED")
