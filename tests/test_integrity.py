"""The static integrity scan: attempts on the grading are flagged as tampering, what honest learners
type (magics, pip, shell lines) is at most reviewed, honest solutions written in many styles are
not flagged, and a broken notebook never stops a class scan."""

import csv
import json

import nbformat
import pytest
from conftest import ROOT

from helpers.grading.integrity import (
    SEVERITY,
    Finding,
    explain,
    is_tampering,
    parse_cell,
    review_lines,
    scan_class,
    scan_notebook,
    summarise,
    write_report,
)

LESSON = "02_attention_lookup"
RELEASED = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"
SOLUTION = f"../../solutions/{LESSON}/{LESSON}.py"
CLASSMATE = f"../../submitted/bob/{LESSON}/{LESSON}.ipynb"

SOFTMAX = '''\
def softmax(x, axis=-1):
    """Numerically stable softmax of the array x along axis; same shape as x."""
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
'''
ATTENTION = '''\
def attention(q, k, v):
    """Scaled dot-product attention: returns (output (n_q, d_v), weights (n_q, n_k))."""
    weights = softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
    return weights @ v, weights
'''
SELF_ATTENTION = '''\
def self_attention(x, w_q, w_k, w_v):
    """Self-attention of x (n, d_model): returns (output (n, d_v), weights (n, n))."""
    return attention(x @ w_q, x @ w_k, x @ w_v)
'''
HONEST = {"softmax": SOFTMAX, "attention": ATTENTION, "self_attention": SELF_ATTENTION,
          "why_rows": "Each query's weights would no longer sum to one over the keys.",
          "quiz_1": 'quiz_1 = "a"', "quiz_2": 'quiz_2 = "b"', "quiz_3": 'quiz_3 = "a"'}


def released() -> nbformat.NotebookNode:
    return nbformat.read(RELEASED, as_version=4)


def index(nb: nbformat.NotebookNode, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def submission(**answers: str) -> nbformat.NotebookNode:
    """The released notebook with solution cells (by grade_id) answered: HONEST, overridden by ``answers``."""
    nb = released()
    for grade_id, source in {**HONEST, **answers}.items():
        nb.cells[index(nb, grade_id)].source = source
    return nb


def add_cell(nb: nbformat.NotebookNode, source: str, after: str = "softmax", **metadata) -> int:
    """Insert a new code cell (as a student would) after the cell ``after``; returns its position."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata.update(metadata)
    at = index(nb, after) + 1
    nb.cells.insert(at, cell)
    return at


def scan(nb: nbformat.NotebookNode) -> list[Finding]:
    return scan_notebook(nb, RELEASED)


def assert_flagged(findings: list[Finding], kind: str, cell: str | None = None) -> Finding:
    hits = [f for f in findings if f.kind == kind and (cell is None or f.cell == cell)]
    assert hits, f"no {kind} finding in:\n{summarise(findings)}"
    assert all(f.severity == SEVERITY[kind] for f in hits)
    return hits[0]


# ------------------------------------------------------------------ hostile patterns

HOSTILE = [  # (name, grade_id of the cell it goes in, source appended to an honest answer, kind)
    ("torch.allclose", "softmax", "import torch\ntorch.allclose = lambda *a, **k: True", "monkeypatch"),
    ("torch.all", "softmax", "import torch\ntorch.all = lambda *a, **k: torch.tensor(True)", "monkeypatch"),
    ("np.testing", "softmax", "np.testing.assert_allclose = lambda *a, **k: None", "monkeypatch"),
    ("checks.core", "softmax", "import helpers.checks.core as c\nc.same = lambda *a, **k: True",
     "monkeypatch"),
    ("setattr", "softmax", "f = lambda *a, **k: True\nsetattr(np, 'allclose', f)", "monkeypatch"),
    ("delattr", "softmax", "delattr(np, 'allclose')", "monkeypatch"),
    ("del", "softmax", "del np.testing", "monkeypatch"),
    ("augmented", "softmax", "np.pi += 1", "monkeypatch"),
    ("alias", "softmax", "t = np.testing\nt.assert_allclose = print", "monkeypatch"),
    ("loop over modules", "softmax", "import torch\nfor m in (np, torch):\n    m.allclose = max",
     "monkeypatch"),
    ("builtins module", "softmax", "import builtins\nbuiltins.isinstance = lambda *a: True", "monkeypatch"),
    ("__builtins__", "softmax", '__builtins__.__dict__["len"] = lambda x: 3', "monkeypatch"),
    ("sys.modules", "softmax", "import sys\nsys.modules['numpy'] = object()", "monkeypatch"),
    ("globals()[...]", "softmax", 'globals()["check_softmax"] = print', "monkeypatch"),
    ("vars(...)[...]", "softmax", 'vars(np)["allclose"] = print', "monkeypatch"),
    ("locals()[...]", "quiz_1", 'quiz_1 = "a"\nlocals()["reference"] = None', "monkeypatch"),
    ("__code__", "softmax", "def _ok(*a, **k):\n    pass\ncheck_softmax.__code__ = _ok.__code__",
     "monkeypatch"),
    ("__code__ own", "softmax", "def _f():\n    pass\n_f.__code__ = (lambda: 1).__code__", "monkeypatch"),
    ("__class__", "softmax", "x = np.zeros(2)\nx.__class__.__eq__ = None", "monkeypatch"),
    ("check's attribute", "softmax", "expect_close.__defaults__ = (1e9,)", "monkeypatch"),
    ("tensor class", "softmax", "import torch\ntype(torch.zeros(1)).allclose = max", "monkeypatch"),
    ("lambda returns np", "softmax", "(lambda: np)().allclose = max", "monkeypatch"),
    ("list holding np", "softmax", "[np][0].allclose = max", "monkeypatch"),
    ("helper patches its argument", "softmax", "def patch(m):\n    m.allclose = max\n\npatch(np)",
     "monkeypatch"),
    ("lambda patches", "softmax", "(lambda m: setattr(m, 'allclose', max))(np)", "monkeypatch"),
    ("unittest.mock", "softmax", "from unittest import mock\nmock.patch('numpy.allclose', max).start()",
     "monkeypatch"),
    ("object never created", "softmax", "In[0] = ''", "monkeypatch"),
    ("function returns np", "softmax", "def _get():\n    return np\n_get().allclose = max", "monkeypatch"),
    ("dict of modules", "softmax", "{'m': np}['m'].allclose = max", "monkeypatch"),
    ("__dict__.update", "softmax", "np.testing.__dict__.update(assert_allclose=print)", "monkeypatch"),
    ("object.__setattr__", "softmax", "object.__setattr__(np, 'allclose', max)", "monkeypatch"),
    ("dict holding np", "softmax", "cfg = {'m': np}\ncfg['m'].allclose = max", "monkeypatch"),
    ("loop over a list", "softmax", "mods = [np]\nfor m in mods:\n    m.allclose = max", "monkeypatch"),
    ("module from a call", "softmax", "import inspect\ninspect.getmodule(np.zeros).allclose = max",
     "monkeypatch"),
    ("sys.modules.get", "softmax", "import sys\nsys.modules.get('numpy').allclose = max", "monkeypatch"),
    ("setattr as a value", "softmax", "import functools\nfunctools.partial(setattr, np)('allclose', max)",
     "monkeypatch"),
    ("def check_", "softmax", "def check_softmax(*a, **k):\n    pass", "redefines-grader"),
    ("rebind quiet", "softmax", "import contextlib\nquiet = contextlib.nullcontext", "redefines-grader"),
    ("fresh_seeds", "softmax", "fresh_seeds = lambda n=3: [0] * n", "redefines-grader"),
    ("grade_choice", "quiz_1", "def grade_choice(*a, **k):\n    pass\nquiz_1 = 'a'", "redefines-grader"),
    ("expect_close import", "softmax", "from numpy import allclose as expect_close", "redefines-grader"),
    ("reference", "softmax", "import types\nreference = types.SimpleNamespace(softmax=softmax)",
     "redefines-grader"),
    ("CheckFailed", "softmax", "class CheckFailed(Exception):\n    pass", "redefines-grader"),
    ("np = Fake", "softmax", "class FakeNumpy:\n    pass\nnp = FakeNumpy()", "redefines-grader"),
    ("np swapped", "softmax", "import math as np", "redefines-grader"),
    ("torch swapped", "softmax", "torch = np", "redefines-grader"),
    ("global np", "softmax", "import math\ndef _swap():\n    global np\n    np = math\n_swap()",
     "redefines-grader"),
    ("print", "softmax", "print = lambda *a, **k: None", "redefines-grader"),
    ("len", "softmax", "len = lambda x: 3", "redefines-grader"),
    ("isinstance", "softmax", "def isinstance(*a):\n    return True", "redefines-grader"),
    ("AssertionError", "softmax", "AssertionError = KeyboardInterrupt", "redefines-grader"),
    ("Exception", "softmax", "Exception = BaseException", "redefines-grader"),
    ("setattr on builtins", "softmax", "import builtins\nsetattr(builtins, 'len', lambda x: 3)",
     "monkeypatch"),
    ("exec of a patch", "softmax", 'exec("np.allclose = lambda *a, **k: True")', "monkeypatch"),
    ("%time body", "softmax", "%time np.allclose = max", "monkeypatch"),
    ("%%capture body", "quiz_1", "%%capture\nquiz_1 = 'a'\nnp.allclose = max", "monkeypatch"),
    ("%%timeit body", "quiz_1", "%%timeit -n 1\nquiz_1 = 'a'\nnp.allclose = max", "monkeypatch"),
    ("run_line_magic body", "softmax", "get_ipython().run_line_magic('time', 'np.allclose = max')",
     "monkeypatch"),
    ("set_custom_exc", "softmax", "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
     "kernel-hooks"),
    ("showtraceback", "softmax", "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None",
     "kernel-hooks"),
    ("events", "softmax", "ip = get_ipython()\nip.events.register('post_run_cell', print)", "kernel-hooks"),
    ("run_cell", "softmax", "get_ipython().run_cell('check_softmax = print')", "kernel-hooks"),
    ("user_ns", "softmax", "get_ipython().user_ns['check_softmax'] = print", "kernel-hooks"),
    ("register_magic_function", "softmax", "from IPython import get_ipython\n"
     "get_ipython().register_magic_function(print, 'cell', 'ok')", "kernel-hooks"),
    ("shell from elsewhere", "softmax", "shell.set_custom_exc((Exception,), print)", "kernel-hooks"),
    ("settrace", "softmax", "import sys\nsys.settrace(lambda *a: None)", "kernel-hooks"),
    ("frames", "softmax", "import sys\nf = sys._getframe(0).f_globals", "kernel-hooks"),
    ("inspect frames", "softmax", "import inspect\nf = inspect.currentframe().f_back", "kernel-hooks"),
    ("gc objects", "softmax", "import gc\nobjs = gc.get_objects()", "kernel-hooks"),
    ("ipykernel", "softmax", "from ipykernel.kernelapp import IPKernelApp", "kernel-hooks"),
    ("Javascript", "softmax", "from IPython.display import Javascript\ndisplay(Javascript('alert(1)'))",
     "javascript"),
    ("script in HTML", "softmax", "from IPython.display import HTML\ndisplay(HTML('<script>x()</script>'))",
     "javascript"),
    ("handler in HTML", "softmax", "display(HTML('<img src=x onerror=\"fetch(1)\">'))", "javascript"),
    ("%%javascript", "quiz_1", "%%javascript\nIPython.notebook.kernel.execute('quiz_1 = 1')", "javascript"),
    ("solutions", "softmax", f"src = open('{SOLUTION}').read()", "hidden-files"),
    ("gradebook", "softmax", "import sqlite3\ndb = sqlite3.connect('/work/x/grading/gradebook.db')",
     "hidden-files"),
    ("classmate", "softmax", f"import json\nbob = json.load(open('{CLASSMATE}'))", "hidden-files"),
    ("autograded", "softmax", "import glob\nothers = glob.glob('../../autograded/*/*/*.ipynb')",
     "hidden-files"),
    ("exchange", "softmax", "import os\nfiles = os.listdir('/srv/nbgrader/exchange')", "hidden-files"),
    ("instructor's notebooks", "softmax", "import shutil\nshutil.copy('source_with_tests/x.ipynb', '.')",
     "hidden-files"),
    ("path joined", "softmax", "import os\nsrc = open(os.path.join('..', '..', 'solutions', 'x.py')).read()",
     "hidden-files"),
    ("pathlib chain", "softmax", "from pathlib import Path\nroot = Path('../..')\n"
     "src = (root / 'solutions' / 'x.py').read_text()", "hidden-files"),
    ("path in a name", "softmax", f"where = '{SOLUTION}'\nwith open(where) as f:\n    src = f.read()",
     "hidden-files"),
    ("own reader", "softmax", f"def read(p):\n    return open(p).read()\n\nsrc = read('{SOLUTION}')",
     "hidden-files"),
    ("sys.path", "softmax", f"import sys\nsys.path.insert(0, '../../solutions/{LESSON}')", "hidden-files"),
    ("!cat", "softmax", f"!cat {SOLUTION}", "hidden-files"),
    ("%run", "softmax", f"%run {SOLUTION}", "hidden-files"),
    ("%%bash", "quiz_1", f"%%bash\ncp {CLASSMATE} mine.ipynb", "hidden-files"),
    ("shell call", "softmax", f"get_ipython().system('cat {SOLUTION}')", "hidden-files"),
    ("subprocess", "softmax", f"import subprocess\nsubprocess.run(['cat', '{SOLUTION}'])", "hidden-files"),
]


def answered(grade_id: str, source: str) -> str:
    """An honest answer with ``source`` after it; a cell magic (%%) must open the cell instead."""
    return source if source.startswith("%%") else HONEST[grade_id] + "\n" + source


@pytest.mark.parametrize("grade_id, source, kind", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_code_is_flagged_as_tampering(grade_id, source, kind):
    findings = scan(submission(**{grade_id: answered(grade_id, source)}))
    assert SEVERITY[kind] == "tamper"
    assert_flagged(findings, kind, grade_id)
    assert is_tampering(findings)


REVIEW = [  # worth a human look, not an accusation
    # a home folder may be the student's own data on their machine; the sandbox hides the grader's
    ("/home", "import os\nhomes = os.listdir('/home')", "file-access"),
    ("/root", "w = np.load('/root/answers.npy')", "file-access"),
    ("x = !ls /home", "files = !ls /home", "shell"),
    ("os._exit", "import os\nos._exit(0)", "process"),
    ("sys.exit", "import sys\nsys.exit(0)", "process"),
    ("exit()", "exit()", "process"),
    ("quit()", "quit()", "process"),
    ("subprocess", "import subprocess\nsubprocess.run(['ls'])", "process"),
    ("threading", "import threading", "process"),
    ("signal", "import signal\nsignal.alarm(1)", "process"),
    ("ctypes", "import ctypes", "process"),
    ("multiprocessing", "from multiprocessing import Pool", "process"),
    ("sys.path", "import sys\nsys.path.insert(0, '/tmp')", "process"),
    ("open", 'secrets = open("/etc/passwd").read()', "file-access"),
    ("open relative", 'text = open("notes.txt").read()', "file-access"),
    ("pathlib", "from pathlib import Path\nsrc = Path('../data/notes.txt').read_text()", "file-access"),
    ("shutil", "import shutil\nshutil.rmtree('/tmp/x')", "file-access"),
    ("glob", "import glob\nfiles = glob.glob('../../*')", "file-access"),
    ("os.listdir", "import os\nfiles = os.listdir('..')", "file-access"),
    ("np.load outside", "w = np.load('/srv/data/answers.npy')", "file-access"),
    ("np.save computed", "path = '..' + '/x.npy'\nnp.save(path, np.zeros(2))", "file-access"),
    ("torch.save outside", "import torch\ntorch.save({}, '../../weights.pt')", "file-access"),
    ("pickle", "import pickle", "file-access"),
    ("sqlite3", "import sqlite3\ndb = sqlite3.connect('notes.db')", "file-access"),
    ("%cd", "%cd ..", "file-access"),
    ("a URL", "import urllib.request\npage = urllib.request.urlopen('https://example.org/solutions/')",
     "network"),
    ("socket", "import socket", "network"),
    ("urllib", "from urllib.request import urlopen", "network"),
    ("requests", "import requests", "network"),
    ("http", "import http.client", "network"),
    ("ssl", "import ssl", "network"),
    ("exec", 'exec("softmax = lambda x, axis=-1: x")', "dynamic-code"),
    ("exec computed", 'src = "np." + "all" + "close = max"\nexec(src)', "dynamic-code"),
    ("eval", 'y = eval("1 + 1")', "dynamic-code"),
    ("compile", 'code = compile("x = 1", "<s>", "exec")', "dynamic-code"),
    ("__import__", 'm = __import__("numpy")', "dynamic-code"),
    ("importlib", 'import importlib\nm = importlib.import_module("numpy")', "dynamic-code"),
    ("getattr computed", 'name = "all" + "close"\nf = getattr(np, name)', "dynamic-code"),
    ("globals()", "g = globals()", "dynamic-code"),
    ("vars()", "v = vars()", "dynamic-code"),
    ("%run", "%run my_helpers.py", "dynamic-code"),
    ("!cat", "!cat /etc/passwd", "shell"),
    ("!pip", "!pip install numpy", "shell"),
    ("%pip", "%pip install numpy", "shell"),
    ("nvidia-smi", "!nvidia-smi", "shell"),
    ("!ls", "!ls", "shell"),
    ("x = !ls", "files = !ls", "shell"),
    ("%sx", "out = %sx ls", "shell"),
    ("%system", "%system ls", "shell"),
    ("%%bash", "%%bash\nfor f in *.ipynb; do echo $f; done", "shell"),
    ("shell call", "get_ipython().system('pip install numpy')", "shell"),
    ("%reset", "%reset -f", "magic"),
    ("indented magic", "for _ in range(2):\n    %reset -f", "magic"),
    ("other extension", "%load_ext tensorboard", "magic"),
    ("magic chosen at run time", "name = 'time'\nget_ipython().run_line_magic(name, 'x = 1')", "magic"),
    ("reference", "def softmax(x, axis=-1):\n    return reference.softmax(x, axis=axis)", "uses-reference"),
    ("from helpers", "from helpers.attention import softmax", "uses-reference"),
    ("import helpers", "import helpers.attention as ha\nsoftmax = ha.softmax", "uses-reference"),
    ("reference = None", "reference = None", "shadows-name"),
    ("torch = None", "torch = None", "shadows-name"),
    ("np = !ls", "np = !ls", "shadows-name"),
    ("builtin as data", "type = 'causal'\nall = [softmax(np.ones(2))]", "shadows-name"),
    ("builtin from numpy", "from numpy import abs, round", "shadows-name"),
    ("a hint of one's own", "def hint():\n    print('compare the shapes')", "shadows-name"),
    ("syntax error", "def softmax(x, axis=-1)\n    return x", "syntax-error"),
]


@pytest.mark.parametrize("source, kind", [r[1:] for r in REVIEW], ids=[r[0] for r in REVIEW])
def test_risky_code_is_flagged_for_review(source, kind):
    findings = scan(submission(softmax=answered("softmax", source)))
    assert SEVERITY[kind] == "review"
    assert_flagged(findings, kind, "softmax")
    assert not is_tampering(findings), summarise(findings)


def test_findings_name_the_line_and_say_what_was_patched():
    source = SOFTMAX + "\nimport torch\ntorch.allclose = lambda *a, **k: True\n"
    (finding,) = scan(submission(softmax=source))
    assert finding == Finding("softmax", 8, "monkeypatch", "tamper",
                              "assigns torch.allclose (torch.allclose = lambda *a, **k: True)")
    assert finding.target == "torch.allclose"
    np_patch = assert_flagged(scan(submission(softmax="np.allclose = max")), "monkeypatch")
    assert np_patch.detail == "assigns numpy.allclose (np.allclose = max)"


def test_a_solution_calling_the_reference_is_reviewed_not_accused():
    source = "def softmax(x, axis=-1):\n    return reference.softmax(x, axis=axis)\n"
    findings = scan(submission(softmax=source))
    assert [(f.kind, f.line) for f in findings] == [("uses-reference", 2)]
    assert "reference.softmax" in findings[0].detail


def test_magic_lines_are_found_by_line_even_when_the_rest_is_python():
    findings = scan(submission(softmax=SOFTMAX + "\n%load_ext autoreload\n!ls\nimport socket"))
    assert [(f.kind, f.line) for f in findings] == [("shell", 8), ("network", 9)]


def test_non_python_cell_magics_are_not_parsed_as_python():
    findings = scan(submission(quiz_1="%%javascript\nIPython.notebook.kernel.execute('x = 1')"))
    assert [(f.kind, f.severity) for f in findings] == [("javascript", "tamper")]
    findings = scan(submission(quiz_1="%%bash\nfor f in *; do echo $f; done\nquiz_1 = 'a'"))
    assert [(f.kind, f.severity) for f in findings] == [("shell", "review")]


def test_script_in_a_markdown_answer_is_flagged():
    findings = scan(submission(why_rows="Rows sum to one. <script>fetch('/formgrader')</script>"))
    assert_flagged(findings, "javascript", "why_rows")
    assert is_tampering(findings)


def test_script_in_a_saved_output_is_only_reviewed():
    """nbgrader clears outputs before grading; plotting libraries save script in outputs honestly."""
    nb = submission()
    nb.cells[index(nb, "softmax")].outputs = [nbformat.v4.new_output(
        "display_data", data={"application/javascript": "console.log(1)", "text/plain": "<Figure>"})]
    findings = scan(nb)
    assert [(f.cell, f.kind, f.severity) for f in findings] == [("softmax", "script-output", "review")]


# ------------------------------------------------------------------ cells added, deleted, edited


def test_added_cell_with_a_grade_cells_id_is_reviewed():
    nb = submission()
    add_cell(nb, "pass", after="softmax_tests",
             nbgrader={"grade": True, "grade_id": "softmax_tests", "locked": True, "points": 3,
                       "schema_version": 3, "solution": False})
    findings = scan(nb)
    duplicate = assert_flagged(findings, "duplicate-grade-id", "softmax_tests")
    assert "appears 2 times" in duplicate.detail
    assert not is_tampering(findings), summarise(findings)


def test_a_copied_solution_cell_is_a_duplicate_to_review():
    nb = submission()
    copy = nbformat.from_dict(json.loads(json.dumps(nb.cells[index(nb, "softmax")])))
    copy.id = "copy-of-softmax"
    nb.cells.insert(index(nb, "softmax"), copy)
    findings = scan(nb)
    assert [(f.kind, f.severity) for f in findings] == [("duplicate-grade-id", "review")]


def test_code_in_an_earlier_copy_of_a_grade_cell_is_scanned():
    nb = submission()
    cell = nbformat.from_dict(json.loads(json.dumps(nb.cells[index(nb, "softmax_tests")])))
    cell.source, cell.id = "np.allclose = lambda *a, **k: True", "shadow"
    nb.cells.insert(index(nb, "softmax_tests"), cell)
    findings = scan(nb)
    assert_flagged(findings, "duplicate-grade-id", "softmax_tests")
    patch = assert_flagged(findings, "monkeypatch")
    assert patch.cell.startswith("softmax_tests (copy in cell")
    assert is_tampering(findings)  # the patch, not the copy


def test_deleted_grade_cell_and_deleted_setup_are_reviewed():
    nb = submission()
    del nb.cells[index(nb, "attention_tests")]
    del nb.cells[index(nb, "setup")]
    findings = scan(nb)
    deleted = {f.cell: f for f in findings if f.kind == "deleted-grade-cell"}
    assert set(deleted) == {"attention_tests", "setup"}
    assert "4 points" in deleted["attention_tests"].detail
    assert all(f.severity == "review" for f in deleted.values())


def test_edited_locked_cell_is_reviewed_and_whitespace_is_not_an_edit():
    nb = submission()
    nb.cells[index(nb, "softmax_tests")].source = "pass  # nothing to check"
    nb.cells[index(nb, "attention_tests")].source = "check_attention( attention )\n\n"
    findings = scan(nb)
    assert [(f.cell, f.kind, f.severity) for f in findings] == [
        ("softmax_tests", "edited-locked-cell", "review")]
    assert "pass" in findings[0].detail


def test_added_cells_are_scanned_and_named_by_position():
    nb = submission()
    at = add_cell(nb, "import torch\ntorch.allclose = lambda *a, **k: True", after="attention")
    finding = assert_flagged(scan(nb), "monkeypatch")
    assert finding.cell == f"added cell {at + 1}"
    assert finding.line == 2


def test_edited_course_cells_report_only_what_the_student_added():
    nb = submission()
    i = next(i for i, c in enumerate(nb.cells) if "w_example = attention(Q, K, V)" in c.source)
    nb.cells[i].source += "\nprint(w_example.sum(axis=-1))"
    assert scan(nb) == []  # what the released cell already did is not the student's
    nb.cells[i].source += "\nnp.allclose = lambda *a, **k: True"
    (finding,) = scan(nb)
    assert (finding.cell, finding.kind) == (f"cell {i + 1}", "monkeypatch")


def test_a_patch_is_caught_even_if_the_student_rebinds_the_name_later():
    nb = submission()
    add_cell(nb, "plt = np.zeros(3)\nplt[0] = 1.0", after="attention")
    add_cell(nb, "plt.show = lambda: None", after="softmax")  # an earlier cell: runs first
    findings = scan(nb)
    assert [(f.kind, f.severity) for f in findings] == [("monkeypatch", "tamper"), ("shadows-name", "review")]


# ------------------------------------------------------------------ honest work is left alone

HONEST_STYLES = {
    "numpy": HONEST,
    "einsum": {
        "softmax": "def softmax(x, axis=-1):\n    z = np.exp(x - x.max(axis=axis, keepdims=True))\n"
                   "    return z / z.sum(axis=axis, keepdims=True)\n",
        "attention": "def attention(q, k, v):\n"
                     "    scores = np.einsum('qd,kd->qk', q, k) / np.sqrt(k.shape[1])\n"
                     "    w = softmax(scores)\n    return np.einsum('qk,kv->qv', w, v), w\n",
        "self_attention": "def self_attention(x, w_q, w_k, w_v):\n"
                          "    q, k, v = (np.einsum('nd,dh->nh', x, w) for w in (w_q, w_k, w_v))\n"
                          "    return attention(q, k, v)\n",
    },
    "loops and in-place arrays": {
        "softmax": (
            "def softmax(x, axis=-1):\n"
            "    x = np.moveaxis(np.array(x, dtype=float), axis, -1)\n"
            "    out = np.empty_like(x)\n"
            "    for idx in np.ndindex(x.shape[:-1]):\n"
            "        row = x[idx] - x[idx].max()\n"
            "        e = np.exp(row)\n"
            "        out[idx] = e / e.sum()\n"
            "    out[np.isnan(out)] = 0.0\n"
            "    return np.moveaxis(out, -1, axis)\n"),
        "attention": (
            "from math import sqrt\n\n"
            "def attention(q, k, v):\n"
            "    scores = np.zeros((q.shape[0], k.shape[0]))\n"
            "    for i in range(q.shape[0]):\n"
            "        for j in range(k.shape[0]):\n"
            "            scores[i, j] = q[i] @ k[j] / sqrt(q.shape[1])\n"
            "    weights = softmax(scores)\n"
            "    output = np.zeros((q.shape[0], v.shape[1]))\n"
            "    for i in range(q.shape[0]):\n"
            "        output[i, :] += weights[i] @ v\n"
            "    return output, weights\n"),
    },
    "helpers and a class": {
        "softmax": (
            "import numpy as np\nimport math\n\n"
            "EPS = 0.0\n\n"
            "def _shift(x, axis):\n"
            '    """Subtract the max so that exp never overflows (not open to exec tricks)."""\n'
            "    return x - np.max(x, axis=axis, keepdims=True)\n\n"
            "def softmax(x, axis=-1):\n"
            '    """Stable softmax. Note: we do not open files or eval strings here."""\n'
            "    e = np.exp(_shift(np.asarray(x, dtype=float), axis))  # open question: float32?\n"
            "    return e / (e.sum(axis=axis, keepdims=True) + EPS)\n"),
        "attention": (
            "class Attention:\n"
            '    """Attention caching its last weights; exec and eval appear only in this text."""\n\n'
            "    count = 0\n\n"
            "    def __init__(self, scale=True):\n"
            "        self.scale = scale\n"
            "        self.last = {}\n\n"
            "    def __call__(self, q, k, v):\n"
            "        d = q.shape[-1]\n"
            "        w = softmax(q @ k.T / (math.sqrt(d) if self.scale else 1.0))\n"
            "        self.last['weights'] = w\n"
            "        self.calls = getattr(self, 'calls', 0) + 1\n"
            "        Attention.count += 1\n"
            "        return w @ v, w\n\n"
            "_attn = Attention()\n"
            "_attn.scale = True\n"
            "_attn.last['note'] = 'open'\n\n"
            "def attention(q, k, v):\n"
            "    return _attn(q, k, v)\n"),
        "self_attention": (
            "def _project(x, *ws):\n"
            "    return [x @ w for w in ws]\n\n"
            "def self_attention(x, w_q, w_k, w_v):\n"
            "    q, k, v = _project(x, w_q, w_k, w_v)\n"
            "    return attention(q, k, v)\n"),
    },
    "torch": {
        "softmax": (
            "import torch\n\n"
            "def softmax(x, axis=-1):\n"
            "    t = torch.as_tensor(np.asarray(x, dtype=float))\n"
            "    return torch.softmax(t, dim=axis).numpy()\n"),
        "attention": (
            "import torch\nimport torch.nn.functional as F\n\n"
            "def attention(q, k, v):\n"
            "    q, k, v = (torch.as_tensor(a) for a in (q, k, v))\n"
            "    w = F.softmax(q @ k.T / q.shape[-1] ** 0.5, dim=-1)\n"
            "    return (w @ v).numpy(), w.numpy()\n"),
        "self_attention": (
            "class Proj(torch.nn.Module):\n"
            "    def __init__(self, w):\n"
            "        super().__init__()\n"
            "        self.w = torch.nn.Parameter(torch.as_tensor(w))\n\n"
            "def self_attention(x, w_q, w_k, w_v):\n"
            "    model = torch.nn.Linear(2, 2)\n"
            "    model.weight = torch.nn.Parameter(torch.zeros(2, 2))\n"
            "    return attention(x @ w_q, x @ w_k, x @ w_v)\n"),
    },
    "quiz with comments": {
        "quiz_1": "# the weights sum to 1 over the keys, so not (b): exec-style tricks aside\nquiz_1 = 'a'",
        "quiz_2": "quiz_2 = 'B'.lower()",
        "quiz_3": "answer = ('a', 'b')\nquiz_3 = answer[0]",
    },
}


@pytest.mark.parametrize("style", HONEST_STYLES)
def test_honest_solutions_produce_no_findings(style):
    findings = scan(submission(**HONEST_STYLES[style]))
    assert findings == [], summarise(findings)


HONEST_EXTRA_CELLS = [
    "Q2 = Q.copy()\nQ2[1] = [3.0, 0.0]\nprint(attention(Q2, K, V)[1])",
    "K[1] = [3.0, 0.0]  # the lesson's own array: try spike's key [3, 0]",
    "fig, ax = plt.subplots()\nax.set_title('weights')\nfig.tight = True\nplt.close(fig)",
    "plt.rcParams['figure.figsize'] = (6, 4)",
    "%matplotlib inline",
    "%timeit softmax(logits)",
    "%%time\nw = softmax(np.random.default_rng(0).normal(size=(100, 100)))",
    "softmax?",
    "np.random.seed(0)\nimport torch\ntorch.manual_seed(0)",
    "np.save('my_weights.npy', weights)\nback = np.load('my_weights.npy')",
    "check_softmax(softmax)\nwith quiet():\n    expect_close(softmax(logits), softmax(logits), 'same')",
    "F = np.zeros((2, 2))\nF[0, 0] = 1.0",
    "results = {}\nfor name in ['a', 'b']:\n    results[name] = softmax(np.ones(3))\nresults['a'][0] = 0.5",
    "print('I did not use exec, eval or open() anywhere; 100% my own')",
    "max_weight = weights.max()\nrows = [r for r in weights]\nrows[0] = rows[0] * 2",
    "acts = {'exp': np.exp, 'tanh': np.tanh}\nacts['relu'] = lambda x: np.maximum(x, 0)\nfns = [softmax]\n"
    "fns.append(attention)",
    "from IPython.display import HTML, Markdown\ndisplay(HTML('<b>weights</b>'), Markdown('**rows**'))",
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "InteractiveShell.ast_node_interactivity = 'all'",
    "if 'google.colab' in str(get_ipython()):\n    print(get_ipython().__class__.__name__)",
    "paths = ['solutions', 'grading']  # words, not files\nplt.title('two solutions/answers')",
]

# What honest learners type. Everyday magics are no finding at all; shell lines are reviewed.
HARMLESS_LINES = [
    "%load_ext autoreload\n%autoreload 2",
    "%matplotlib inline",
    "%matplotlib widget",
    "%timeit softmax(logits)",
    "%timeit -n 10 -r 3 softmax(logits)",
    "%time w = softmax(logits)",
    "t = %timeit -o softmax(logits)",
    "%%time\nw = softmax(np.random.default_rng(0).normal(size=(100, 100)))",
    "%%timeit -n 3\nsoftmax(logits)",
    "%%capture\nw = softmax(logits)",
    "%%capture out --no-stderr\nprint(softmax(logits))",
    "%config InlineBackend.figure_format = 'retina'",
    "%precision 3",
    "%who",
    "%whos",
    "%env OMP_NUM_THREADS=1",
    "%pwd",
    "softmax?",
    "np.exp??",
    "??np.exp",
    "np.*exp*?",
    "%pinfo np.exp",
    "%%html\n<b>my notes</b>",
    "get_ipython().run_line_magic('matplotlib', 'inline')",
]
SHELL_LINES = ["!pip install numpy", "%pip install numpy", "!nvidia-smi", "!ls", "files = !ls", "%cd ..",
               "%reset -f", "%%bash\nls -la", "%sx ls", "%system ls", "%load_ext line_profiler"]


def test_an_honest_learners_magics_are_no_finding_and_shell_lines_only_reviewed():
    nb = submission()
    for source in reversed(HARMLESS_LINES):
        add_cell(nb, source, after="attention_tests")
    findings = scan(nb)
    assert findings == [], summarise(findings)
    for source in reversed(SHELL_LINES):
        add_cell(nb, source, after="attention_tests")
    findings = scan(nb)
    assert not is_tampering(findings), summarise(findings)
    assert len({f.cell for f in findings}) == len(SHELL_LINES)  # each is listed for a look


@pytest.mark.parametrize("source", HONEST_EXTRA_CELLS)
def test_honest_exploration_cells_produce_no_findings(source):
    nb = submission()
    add_cell(nb, source, after="attention_tests")
    findings = scan(nb)
    assert findings == [], summarise(findings)


def test_student_objects_reached_through_methods_and_type_are_the_students():
    source = (SOFTMAX + "\nclass Counter:\n    n = 0\n\n    def bump(self):\n        type(self).n += 1\n\n"
              "store = {}\nstore.setdefault('w', {})['last'] = 1\nsoftmax.__doc__ = 'Stable softmax.'\n")
    findings = scan(submission(softmax=source))
    assert findings == [], summarise(findings)


def test_a_lesson_name_reused_for_an_array_is_reviewed_but_its_items_are_the_students():
    lesson = "04_masking"  # its setup imports torch.nn.functional as F
    released_nb = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    nb = nbformat.read(released_nb, as_version=4)
    nb.cells.insert(index(nb, "causal_mask") + 1, nbformat.v4.new_code_cell("F = np.zeros(3)\nF[0] = 1.0"))
    findings = scan_notebook(nb, released_nb)
    assert [(f.kind, f.severity, f.line) for f in findings] == [("shadows-name", "review", 1)]
    nb.cells.insert(index(nb, "causal_mask") + 1, nbformat.v4.new_code_cell("F.softmax = max"))
    assert_flagged(scan_notebook(nb, released_nb), "monkeypatch")


def test_a_star_import_is_reviewed():
    findings = scan(submission(softmax="from numpy import *\n" + SOFTMAX))
    assert [(f.kind, f.severity) for f in findings] == [("shadows-name", "review")]


def test_shadowing_a_builtin_by_accident_is_only_reviewed():
    findings = scan(submission(softmax=SOFTMAX + "\nsum = 0\nlist = [1, 2]"))
    assert [(f.kind, f.severity) for f in findings] == [("shadows-name", "review")] * 2


def test_a_name_the_grading_uses_rebound_to_data_is_reviewed_to_a_function_is_tampering():
    """Plain data can only make a check fail; a function or object can make it pass."""
    data = "type = 'causal'\nfor all in range(2):\n    pass\nreference = np.zeros(3)\nnp = None"
    findings = scan(submission(softmax=SOFTMAX + "\n" + data))
    assert [(f.kind, f.severity) for f in findings] == [("shadows-name", "review")] * 4
    findings = scan(submission(softmax=SOFTMAX + "\ntype = lambda x: int\nall = any"))
    assert [(f.kind, f.severity) for f in findings] == [("redefines-grader", "tamper")] * 2


def test_a_helper_named_like_a_check_is_only_reviewed():
    findings = scan(submission(softmax=SOFTMAX + "\ndef check_shapes(x):\n    return x.shape"))
    assert [(f.kind, f.severity) for f in findings] == [("shadows-name", "review")]


@pytest.mark.parametrize("lesson", [LESSON, "03_scaling", "04_masking", "05_positional_encoding"])
def test_the_course_solutions_and_blank_notebooks_are_clean(lesson):
    from helpers.grading.autograde import fill_notebook, solution_answers

    released_nb = ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    assert scan_notebook(fill_notebook(lesson, solution_answers(lesson)), released_nb) == []
    assert scan_notebook(released_nb, released_nb) == []


# ------------------------------------------------------------------ robustness, reports, a class


@pytest.mark.parametrize("source", ["x = (" * 300 + ")" * 300, "x = a" + ".b" * 3000, "a\x00b",
                                    "x = " + "-" * 5000 + "1", "def f(:\n", "%%%", "", "%%time",
                                    "exec('x = (' * 300 + ')' * 300)",
                                    "\n".join(f"p{i} = p{i - 1} + '/x'" for i in range(1, 1500))
                                    + "\nopen(p1499)"])
def test_strange_cells_are_reported_never_crash(source):
    findings = scan(submission(softmax=source))
    assert all(f.kind in ("syntax-error", "magic", "dynamic-code", "file-access") for f in findings)


def test_a_valid_python_line_starting_with_percent_is_not_a_magic():
    tree, magics, error = parse_cell("x = (10\n% 3)")
    assert tree is not None and magics == [] and error is None


def test_summarise_review_lines_and_is_tampering():
    assert summarise([]) == "no findings" and review_lines([]) == []
    findings = [Finding("softmax", 3, "monkeypatch", "tamper", "assigns numpy.allclose"),
                Finding("attention_tests", None, "deleted-grade-cell", "review", "deleted")]
    lines = review_lines(findings)
    assert summarise(findings).splitlines() == lines
    assert len(lines) == 2 and "softmax line 3" in lines[0] and "numpy.allclose" in lines[0]
    assert "monkeypatch" in lines[0] and "attention_tests: deleted" in lines[1]
    assert is_tampering(findings) and not is_tampering(findings[1:])


# ------------------------------------------------------------------ what the student is told


def test_explain_names_the_cell_and_what_the_checks_lose():
    nb = submission(softmax=SOFTMAX + "\nnp.allclose = lambda *a, **k: True\ncheck_softmax = print")
    text = explain(scan(nb))
    assert "cell softmax replaces numpy.allclose, which the checks use to compare results" in text
    assert "redefines check_softmax" in text
    assert text.count("\n") == 0 and len(text) < 600


def test_explain_says_where_a_path_leads_without_paths_files_or_reports():
    nb = submission()
    at = add_cell(nb, f"src = open('{SOLUTION}').read()", after="attention")
    text = explain(scan(nb))
    assert f"added cell {at + 1} tries to reach the course's solutions" in text
    for secret in ("solutions/", LESSON, ".csv", "integrity", "tamper", "check_"):
        assert secret not in text, text
    assert "other students' work" in explain(scan(submission(quiz_1=f"!cp {CLASSMATE} .\nquiz_1 = 'a'")))
    hooks = explain(scan(submission(softmax=SOFTMAX + "\nget_ipython().set_custom_exc((Exception,), print)")))
    assert "shell (set_custom_exc)" in hooks


def test_explain_is_empty_unless_the_submission_is_held():
    assert explain([]) == ""
    assert explain(scan(submission(softmax=SOFTMAX + "\n!pip install numpy\nimport socket"))) == ""


def test_explain_stays_short_for_many_cells():
    findings = [Finding(f"added cell {i}", 1, "monkeypatch", "tamper", "assigns numpy.allclose",
                        "numpy.allclose") for i in range(10)]
    text = explain(findings)
    assert "added cell 3" in text and "added cell 4" not in text and "6 more cells" in text


def test_scan_class_reports_every_student_and_survives_broken_files(tmp_path):
    def put(student: str, content: str | nbformat.NotebookNode) -> None:
        dest = tmp_path / "submitted" / student / LESSON / f"{LESSON}.ipynb"
        dest.parent.mkdir(parents=True)
        if isinstance(content, str):
            dest.write_text(content)
        else:
            nbformat.write(content, dest)

    put("zoe", submission())
    put("bob", submission(softmax=SOFTMAX + "\nimport torch\ntorch.allclose = lambda *a, **k: True"))
    put("carl", '{"cells": [')
    put("dora", "")
    (tmp_path / "submitted" / "eve" / "other_lesson").mkdir(parents=True)  # not this lesson: ignored
    results = scan_class(tmp_path, LESSON, RELEASED)
    assert sorted(results) == ["bob", "carl", "dora", "zoe"]
    assert results["zoe"] == []
    assert is_tampering(results["bob"])
    for broken in ("carl", "dora"):
        assert [(f.kind, f.severity) for f in results[broken]] == [("unreadable", "review")]

    report = write_report(results, tmp_path / "integrity.csv")
    with report.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["student", "cell", "line", "kind", "severity", "detail"]
    assert [r["student"] for r in rows] == sorted(r["student"] for r in rows)
    assert {r["student"] for r in rows} == {"bob", "carl", "dora"}
    bob = next(r for r in rows if r["student"] == "bob")
    assert [bob[k] for k in ("cell", "line", "kind", "severity")] == ["softmax", "8", "monkeypatch", "tamper"]
    assert next(r for r in rows if r["student"] == "carl")["line"] == ""
