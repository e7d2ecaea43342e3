"""The class report names what students got wrong: every known-wrong answer of the check tests
gets a specific label, the same on other random inputs; blank answers are told apart from wrong
ones; and a class graded by nbgrader is counted once per student in every row."""

import csv
import importlib
import inspect
import re
import shutil

import nbformat
import numpy as np
import pytest
from conftest import ROOT
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from traitlets.config import Config

from helpers import attention as ref
from helpers.checks import check_attention
from helpers.checks.failure import HINT_LINE, CheckFailed
from helpers.failure_text import as_written, mistake_first
from helpers.grading.autograde import fill_notebook, solution_answers
from helpers.grading.mistakes import (
    COLUMNS,
    GENERIC,
    NOT_ATTEMPTED,
    WRONG_SHAPE,
    _clean,
    blank_cells,
    class_tables,
    exercises,
    is_blank,
    mistake_of,
    mistakes_lines,
    plot_mistakes,
    write_class_report,
)
from helpers.grading.settings import COURSE_ID, configure

LESSON = "02_attention_lookup"
RELEASED = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"

# ------------------------------------------------------------------ labels of real check messages

CHECK_TESTS = ["test_checks_lookup", "test_checks_recurrence", "test_checks_scaling", "test_checks_masking",
               "test_checks_positional", "test_checks_heads", "test_checks_block", "test_checks_cost",
               "test_checks_patches", "test_checks_gpt"]
# Other sizes for the checks that take them (those of the lessons' hidden tests), with a seed
# as large as the ones fresh_seeds draws.
OTHER_SIZES = {
    "check_softmax": dict(shape=(7, 3)),
    "check_attention": dict(n_q=6, n_k=2, d_k=9, d_v=4),
    "check_self_attention": dict(n=7, d_model=5, d_k=2, d_v=3),
    "check_rnn_forward": dict(T=12, d_in=6, d_h=3),
    "check_gradient_by_position": dict(T=12, d=3),
    "check_entropy": dict(shape=(3, 7)),
    "check_softmax_jacobian": dict(n=7),
    "check_score_std": dict(d_k=32, n_pairs=20_000),
    "check_masked_attention": dict(batch=(), n_q=3, n_k=8, d_k=2, d_v=4),
    "check_causal_attention_with_cache": dict(batch=(2, 2), n=10, d_k=8, d_v=3),
    "check_sinusoidal_encoding": dict(n_positions=30, d_model=8),
    "check_rope": dict(n=5, d=12),
    "check_multi_head_attention": dict(B=3, T_q=6, T_kv=2, D=12, n_heads=4),
    "check_layer_norm": dict(shape=(4, 7, 16)),
    "check_feed_forward": dict(shape=(4, 6, 8), d_ff=32),
    "check_encoder_block": dict(batch=3, length=7, d_model=6, n_heads=3, d_ff=10),
    "check_online_softmax_attention": dict(batch=(4,), n_q=11, n_k=64, d=4, d_v=9),
}
OTHER_SEED = 2_718_281_828
FIXED_LABELS = {GENERIC, WRONG_SHAPE, "NaN or inf where the result is finite"}


def known_wrong() -> list[tuple[str, object, object]]:
    """(name, check, wrong function) for every known-wrong answer of the check tests."""
    cases = []
    for module_name in CHECK_TESTS:
        module = importlib.import_module(module_name)
        for name, test in vars(module).items():
            marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
            if not (name.startswith("test_") and "mistake" in name and marks
                    and marks[0].args[0].startswith("fn")):
                continue
            body = inspect.getsource(test).split(":", 1)[1]
            check = getattr(module, re.search(r"\b(check_\w+)\b", body).group(1))
            for i, param in enumerate(marks[0].args[1]):
                cases.append((f"{check.__name__}[{i}]", check, param[0]))
    return cases


def failure(check, fn, **kwargs) -> tuple[str, str] | None:
    """(ename, evalue) as the autograded notebook records them, or None if the check passed."""
    try:
        check(fn, verbose=False, **kwargs)
    except AssertionError as err:
        return type(err).__name__, str(err)
    return None


def _masked(message: str) -> str:
    """A message's first line with every number, and every list of numbers, as #."""
    first = re.sub(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", "#", message.splitlines()[0])
    return re.sub(r"#(?:\s*,\s*#)*,?", "#", first)


def _generic(message: str) -> bool:
    return bool(re.search(r"differs from the reference|[)\]] = [^:]*, expected ", message)) \
        and " raised " not in message.splitlines()[0]


def test_every_known_wrong_answer_gets_a_specific_label_the_same_on_other_inputs():
    cases = known_wrong()
    assert len(cases) > 150, "the check tests' known-wrong answers were not found"
    compared, problems = 0, []
    for name, check, fn in cases:
        first = failure(check, fn)
        other = failure(check, fn, seed=OTHER_SEED, **OTHER_SIZES.get(check.__name__, {}))
        assert first is not None, f"{name}: the check passed a known-wrong answer"
        label = mistake_of(*first)
        if (label == GENERIC) != _generic(first[1]):
            problems.append(f"{name}: {label!r} for {first[1][:160]!r}")
        words = re.findall(r"[^\W\d_]{3,}", label)
        if label not in FIXED_LABELS and not label.startswith("raised ") and \
                not all(w in first[1] for w in words):
            problems.append(f"{name}: {label!r} has words that are not in {first[1][:160]!r}")
        if re.search(r"\b(seed|n_q|n_k|d_k|d_v|T|B|D)\s*=\s*\d", label):
            problems.append(f"{name}: {label!r} keeps a number of the random inputs")
        if other is not None and _masked(other[1]) == _masked(first[1]):
            compared += 1  # the check named the same mistake on the other inputs
            if mistake_of(*other) != label:
                problems.append(f"{name}: {label!r} on seed 0 but {mistake_of(*other)!r} on "
                                f"seed {OTHER_SEED} with other sizes")
    assert not problems, "\n".join(problems)
    assert compared > 0.8 * len(cases), f"only {compared} of {len(cases)} labels compared"


# `nbgrader validate` prints each line of an error indented and cut at 87 characters: after
# "    CheckFailed: ", 70 characters of the message are left.
VALIDATE_KEEPS = 70


def test_every_message_names_its_mistake_within_what_validate_shows():
    """The mistake comes first, what was checked after: the first 70 characters of the message's
    first line hold the label the class report gives it (the wrong shape, the values that differ),
    and the label is the same as for the message in the order the check wrote it."""
    problems = []
    for name, check, fn in known_wrong():
        with pytest.raises(CheckFailed) as caught:
            check(fn, verbose=False)
        err = caught.value
        shown, written = str(err), err.message + (HINT_LINE if err.fix else "")
        label = mistake_of("CheckFailed", shown)
        if label != mistake_of("CheckFailed", written):
            problems.append(f"{name}: {label!r} ≠ {mistake_of('CheckFailed', written)!r}")
        if label.startswith("raised "):
            continue  # Jupyter and validate show the learner's own error and line first
        head = shown.splitlines()[0][:VALIDATE_KEEPS]
        key = {WRONG_SHAPE: r"\bshape\b", GENERIC: r"\bexpected\b|\bdiffers\b",
               "NaN or inf where the result is finite": r"NaN"}.get(label)
        if not (re.search(key, head) if key else _clean(label)[:20].lower() in _clean(head).lower()):
            problems.append(f"{name}: {label!r} is not in the first {VALIDATE_KEEPS} characters: {head!r}")
    assert not problems, "\n".join(problems)


def test_a_long_what_moves_after_the_mistake_and_a_short_one_stays():
    assert mistake_first("softmax(x) along the last axis (seed=0, shape (4, 6)): this is log-softmax — "
                         "exponentiate") == ("this is log-softmax — exponentiate\n  checked: softmax(x) "
                                             "along the last axis (seed=0, shape (4, 6))")
    for kept in ("softmax(x) is None — did the function forget to `return` it?",
                 "softmax(x) has shape (4,), expected (4, 6)",
                 "n_tokens(224, 224, 16) must return an int, got str: '197'",
                 "attention(q, k, v) raised TypeError: unsupported operand"):
        assert mistake_first(kept) == kept
    long_shape = ("online_softmax_attention with block_size = 3 (does not divide n_k) has shape (1, 5), "
                  "expected (6, 5)")
    assert mistake_first(long_shape).startswith("has shape (1, 5), expected (6, 5)\n  checked: online_")
    assert as_written(mistake_first(long_shape)) == long_shape


@pytest.mark.parametrize("seed", [1, 2])
def test_the_same_mistake_on_other_seeds_gets_the_same_label(seed):
    for name, check, fn in known_wrong():
        if check.__name__ in ("check_attention", "check_self_attention", "check_softmax"):
            first, other = failure(check, fn), failure(check, fn, seed=seed)
            assert other is not None and _masked(first[1]) == _masked(other[1]), name
            assert mistake_of(*first) == mistake_of(*other), name


@pytest.mark.parametrize("ename, evalue, label", [
    ("NotImplementedError", "", NOT_ATTEMPTED),
    ("NotImplementedError", "quiz_1 is not answered yet", NOT_ATTEMPTED),
    ("KeyboardInterrupt", "", "stopped at the time limit"),
    ("CellTimeoutError", "this cell ran past the time limit (300 s) and did not stop",
     "stopped at the time limit"),
    ("DeadKernelError", "the kernel died while running this cell", "kernel died"),
    ("NotRun", "not run: the kernel had to be restarted 4 times",
     "not run: the kernel was restarted too often"),
    ("NameError", "name 'softmax' is not defined", "raised NameError"),
    ("CheckFailed", "attention(q, k, v) on random inputs raised TypeError: unsupported operand\n"
                    "  called with array of shape (3, 4)", "raised TypeError"),
    ("CheckFailed", "not quite — the softmax runs over each row", "wrong answer"),
    ("CheckFailed", "quiz_2 must be one letter out of \"a\", \"b\", got 'z'",
     "answer not in the expected format"),
    ("CheckFailed", "code in this notebook replaced numpy.allclose: checks cannot be trusted",
     "replaced functions the checks rely on"),
    ("AssertionError", "", "a hidden test failed"),
    ("AssertionError", "each output row must be a weighted average of the value rows",
     "each output row must be a weighted average of the value rows"),
    ("CheckFailed", "softmax(x) has shape (4,), expected (4, 6) — softmax returns one probability per entry",
     WRONG_SHAPE),
    ("CheckFailed", "layer_macs(197, 768, 3072)['ffn'] = 929562625, expected 929562624", GENERIC),
])
def test_outcomes_that_are_not_a_named_mistake(ename, evalue, label):
    assert mistake_of(ename, evalue) == label


def test_labels_drop_the_numbers_of_the_run_and_keep_the_diagnosis():
    seeds = [mistake_of("CheckFailed", f"attention weights on random inputs (seed={s}, n_q={n}, n_k=5, "
                                       "d_k=4, d_v=2): these are softmax(q kᵀ) — divide the scores by √d_k")
             for s, n in ((0, 3), (3_141_592_653, 40))]
    assert seeds == ["these are softmax(q kᵀ)"] * 2
    assert mistake_of("CheckFailed", "masked_attention with a random (4, 6) mask: weights (seed=0, "
                                     "q (2, 3, 4, 5)): the softmax ran over the query axis (dim=-2); each "
                                     "query's weights must sum to 1") == "the softmax ran over the query axis"
    assert len(mistake_of("AssertionError", "word " * 100)) <= 100


# ------------------------------------------------------------------ blank submissions


def test_an_untouched_notebook_is_blank_even_with_whitespace_changes():
    nb = fill_notebook(LESSON, {})
    assert is_blank(nb, RELEASED)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = "\n\n" + cell.source.replace("\n", "  \n") + "\n   "
    assert is_blank(nb, RELEASED)
    solutions = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    assert blank_cells(nb, RELEASED) == solutions


def test_one_answered_cell_is_not_blank_and_a_deleted_cell_is():
    answers = solution_answers(LESSON)
    nb = fill_notebook(LESSON, {"softmax": answers["softmax"], "quiz_2": 'quiz_2 = "b"'})
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "attention"]
    blanks = blank_cells(nb, RELEASED)
    assert "softmax" not in blanks and "quiz_2" not in blanks
    assert {"attention", "self_attention", "why_rows", "quiz_1"} <= blanks
    assert not is_blank(nb, RELEASED)


def test_each_grade_cell_grades_the_solution_cells_before_it():
    graded = exercises(RELEASED)
    assert graded["softmax_tests"] == ["softmax"]
    assert graded["attention_tests"] == ["attention"]
    assert graded["why_rows"] == ["why_rows"]  # a free-text answer is its own solution cell
    assert graded["quiz_3_check"] == ["quiz_3"]


# ------------------------------------------------------------------ a class graded by nbgrader

NO_SQRT = '''def attention(q, k, v):
    weights = softmax(q @ k.T, axis=-1)
    return weights @ v, weights
'''
NO_SQRT_DOT = '''def attention(q, k, v):
    s = np.dot(q, k.T)  # scores
    w = softmax(s)
    out = np.dot(w, v)
    return out, w
'''
AXIS_0 = '''def attention(q, k, v):
    weights = softmax(q @ k.T / np.sqrt(k.shape[1]), axis=0)
    return weights @ v, weights
'''
CLASS = {"ada": {}, "ben": {}, "cyd": {"attention": NO_SQRT}, "dee": {"attention": NO_SQRT_DOT},
         "eve": {"attention": AXIS_0}, "fay": None, "gus": {}}
STATUS = {**dict.fromkeys(["ada", "ben", "cyd", "dee", "eve", "fay"], "graded"),
          "gus": "zeroed", "hal": "unreadable"}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, built_solutions):
    root = tmp_path_factory.mktemp("class")
    config = configure(Config(), root)
    config.CourseDirectory.source_directory = str(ROOT / "solutions")
    config.Execute.timeout = 60
    api = NbGraderAPI(config=config)
    result = api.generate_assignment(LESSON)
    assert result["success"], result.get("error")
    full = solution_answers(LESSON)
    for student, changes in CLASS.items():
        folder = root / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        nb = fill_notebook(LESSON, {} if changes is None else {**full, **changes})
        nbformat.write(nb, folder / f"{LESSON}.ipynb")
        result = api.autograde(LESSON, student, force=True, create=True)
        assert result["success"], f"{student}: {result.get('error')}\n{result.get('log')}"
    garbled = root / "submitted" / "hal" / LESSON / f"{LESSON}.ipynb"
    garbled.parent.mkdir(parents=True)
    garbled.write_text("this is not a notebook")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        for grade in gb.find_submission_notebook(LESSON, LESSON, "gus").grades:
            if grade.cell.cell_type == "code":
                grade.manual_score = 0.0  # held at zero for review, over full automatic scores
        gb.db.commit()
    paths = write_class_report(root, LESSON, STATUS, RELEASED)
    yield root, paths
    shutil.rmtree(root, ignore_errors=True)


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_summary_counts_every_student_once_per_grade_cell(graded_class):
    _, paths = graded_class
    rows = {r["grade_cell"]: r for r in _read(paths["summary"])}
    assert list(rows) == ["softmax_tests", "attention_tests", "self_attention_tests", "why_rows",
                          "quiz_1_check", "quiz_2_check", "quiz_3_check"]
    for name, row in rows.items():
        assert sum(int(row[c]) for c in COLUMNS) == len(STATUS), name
        others = (row["blank"], row["unreadable"], row["zeroed"], row["not graded"])
        assert others == ("1", "1", "1", "0"), name
    counts = {name: {c: int(row[c]) for c in ("full", "partial", "wrong", "by hand")}
              for name, row in rows.items()}
    assert counts["softmax_tests"] == {"full": 5, "partial": 0, "wrong": 0, "by hand": 0}
    assert counts["attention_tests"] == {"full": 2, "partial": 0, "wrong": 3, "by hand": 0}
    # self_attention is checked with the course's attention: one mistake is charged once
    assert counts["self_attention_tests"] == {"full": 5, "partial": 0, "wrong": 0, "by hand": 0}
    assert counts["why_rows"] == {"full": 0, "partial": 0, "wrong": 0, "by hand": 5}
    assert rows["why_rows"]["kind"] == "markdown" and rows["attention_tests"]["kind"] == "code"
    assert float(rows["attention_tests"]["points"]) == 4


def test_mistakes_name_what_the_class_got_wrong(graded_class):
    _, paths = graded_class
    rows = _read(paths["mistakes"])
    attention = [(r["mistake"], int(r["students_count"]), r["students"])
                 for r in rows if r["grade_cell"] == "attention_tests"]
    no_sqrt = mistake_of(*failure(check_attention, lambda q, k, v: (
        ref.softmax(q @ k.T) @ v, ref.softmax(q @ k.T))))
    axis_0 = mistake_of(*failure(check_attention, lambda q, k, v: (
        ref.attention(q, k, v)[0], ref.softmax(q @ k.T / np.sqrt(q.shape[1]), axis=0))))
    assert no_sqrt != axis_0 and GENERIC not in (no_sqrt, axis_0)
    assert attention == [(no_sqrt, 2, "cyd dee"), (NOT_ATTEMPTED, 1, "fay"), (axis_0, 1, "eve")]
    assert ("softmax_tests", NOT_ATTEMPTED, "1", "fay") in [
        (r["grade_cell"], r["mistake"], r["students_count"], r["students"]) for r in rows]
    named = {s for r in rows for s in r["students"].split()}
    assert named == {"cyd", "dee", "eve", "fay"}  # never the zeroed or the unreadable


def test_mistakes_lines_give_the_most_common_first(graded_class):
    root, _ = graded_class
    tables = class_tables(root, LESSON, STATUS, RELEASED)
    lines = mistakes_lines(tables)
    attention = next(line for line in lines if line.startswith("attention_tests: "))
    assert attention.startswith("attention_tests: 2 the scores are not divided by √d_k, 1 not attempted, 1 ")


def test_the_chart_is_a_png_a_reader_can_read(graded_class):
    import matplotlib.image as mpimg

    _, paths = graded_class
    data = paths["chart"].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    height, width = mpimg.imread(paths["chart"]).shape[:2]
    assert width == 1000 and 500 <= height <= 6000


def test_an_empty_class_gives_empty_tables_and_a_chart_that_says_so(tmp_path):
    paths = write_class_report(tmp_path, LESSON, {}, RELEASED)
    assert _read(paths["summary"]) == [] and _read(paths["mistakes"]) == []
    assert paths["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "gradebook.db").exists()


def test_plot_mistakes_draws_on_the_axes_it_is_given(no_show):
    import matplotlib.pyplot as plt

    rows = [{"grade_cell": "attention_tests", "mistake": "these are softmax(q kᵀ)", "students_count": 9,
             "students": ""},
            {"grade_cell": "attention_tests", "mistake": NOT_ATTEMPTED, "students_count": 2, "students": ""}]
    ax = plt.subplots()[1]
    assert plot_mistakes(rows, "02", ax=ax) is ax
    assert [t.get_text() for t in ax.get_yticklabels()] == ["these are softmax(q kᵀ)", NOT_ATTEMPTED]
    assert "no mistakes" in plot_mistakes([]).texts[0].get_text()


def test_an_unknown_status_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown status"):
        class_tables(tmp_path, LESSON, {"ada": "graded", "ben": "lost"}, RELEASED)

