"""A solution that hands its work to the course's own implementation scores 0 in its grade cell,
however it reaches it; honest solutions, and ones that call the course's version of *another*
exercise's function, still pass. Student notebooks import no course implementation of the functions
the student writes."""

import re

import nbformat
import pytest
from conftest import ROOT, lessons
from notebook_cells import grade_cell, lesson_namespace

from helpers.checks.callees import check_names_defined, missing_names
from helpers.checks.core import CheckFailed
from helpers.checks.own_work import COURSE_MODULES, check_own_work

CASES = [  # lesson, function, how a submission delegates to the course's own
    ("02_attention_lookup", "attention",
     "from helpers import attention as reference\n"
     "def attention(q, k, v):\n    return reference.attention(q, k, v)\n"),
    ("02_attention_lookup", "softmax",
     "def softmax(x, axis=-1):\n    from helpers.attention import softmax as s\n"
     "    return s(x, axis=axis)\n"),
    ("04_masking", "masked_attention",
     "import helpers.masking as hm\n_alias = hm.masked_attention\n"
     "def masked_attention(q, k, v, mask=None):\n    return _alias(q, k, v, mask)\n"),
    ("09_vision_patches", "n_tokens",
     "from helpers.patches import n_tokens as _n\n"
     "def n_tokens(height, width, patch_size, cls_token=True):\n"
     "    return _n(height, width, patch_size, cls_token)\n"),
]


@pytest.mark.parametrize("lesson, name, source", CASES, ids=[c[1] for c in CASES])
def test_delegating_to_the_course_scores_zero(lesson, name, source):
    namespace = lesson_namespace(lesson)
    exec(source, namespace)
    with pytest.raises(CheckFailed, match=f"{name} hands its work to the course's own {name}.*scores 0"):
        exec(grade_cell(lesson, f"{name}_tests"), namespace)


@pytest.mark.parametrize("lesson, name", [("02_attention_lookup", "self_attention"),
                                          ("06_multi_head", "multi_head_attention"),
                                          ("04_masking", "masked_attention")])
def test_the_full_solution_passes_the_guard(lesson, name):
    namespace = lesson_namespace(lesson)
    check = namespace[f"check_{name}"]
    check_own_work(namespace[name], check)  # self_attention calls attention, 06 the course's masked_attention


def test_the_guard_ignores_the_checks_own_calls_to_the_course():
    from helpers import attention as course
    from helpers.checks import check_attention

    def attention(q, k, v):  # honest, and the check itself compares with the course's attention
        import numpy as np
        s = q @ k.T / np.sqrt(q.shape[-1])
        w = np.exp(s - s.max(-1, keepdims=True))
        w = w / w.sum(-1, keepdims=True)
        return w @ v, w

    check_own_work(attention, check_attention)
    with pytest.raises(CheckFailed, match="scores 0"):
        check_own_work(lambda q, k, v: course.attention(q, k, v), check_attention, "attention")


def test_every_exercise_function_has_a_course_module():
    for name, module in COURSE_MODULES.items():
        assert hasattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize("lesson", [lesson for lesson in lessons() if lesson[:2] != "10"])
def test_student_notebooks_import_no_course_implementation_of_their_exercises(lesson):
    nb = nbformat.read(ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"^from helpers import \w+ as reference", code, re.M), "imports a course module"
    exercises = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
    for name in exercises & set(COURSE_MODULES):
        imported = re.search(rf"^from helpers\.\w+ import .*\b{name}\b", code, re.M)
        assert not imported, f"imports the course's {name}"


def test_a_function_from_an_earlier_lesson_is_named_where_to_find_it():
    namespace = {"__name__": "__main__", "course_masked_attention": lambda *a: a}  # as lesson 06 imports it
    exec("def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):\n"
         "    return masked_attention(x_q, x_kv, x_kv, mask)\n", namespace)
    assert missing_names(namespace["multi_head_attention"]) == ["masked_attention"]
    with pytest.raises(CheckFailed, match="course_masked_attention.*or paste your own masked_attention"):
        check_names_defined(namespace["multi_head_attention"])
    namespace["masked_attention"] = lambda *a: a
    check_names_defined(namespace["multi_head_attention"])
