"""One mistake is charged once: a wrong function loses its own points, and the exercises that
call it keep theirs, because their grade cells (checks and hidden tests) run with the course's
version of the callee.

Only the notebook's own functions, called by plain name, are callees: a library's softmax
(``torch.softmax``, ``F.softmax``, ``scores.softmax(-1)``) is never taken for lesson 02's.

First every caller's grade cell, run in a namespace where the callees are broken; then nbgrader's
own autograding (its Python API, as in test_grading.py) of submissions with a wrong callee, of
one computed in float32, which keeps its points, and of lesson 06's multi_head_attention written
in several styles. The submissions hold the cells nbgrader tracks
(setup, solutions, grade cells) and leave out the demos and figures, which no grade cell needs:
that keeps the grading quick."""

import re
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from notebook_cells import grade_cell, lesson_namespace, notebook
from traitlets.config import Config

from helpers.checks.callees import missing_names
from helpers.checks.core import CheckFailed
from helpers.grading.settings import configure

MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")

UNSTABLE_SOFTMAX = '''def softmax(x, axis=-1):
    e = np.exp(x)  # no max shift: exp(1000) overflows
    return e / np.sum(e, axis=axis, keepdims=True)
'''
UNBIASED_LAYER_NORM = '''def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # unbiased: divides by D - 1
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
'''
GELU_FEED_FORWARD = '''def feed_forward(x, w1, b1, w2, b2):
    return torch.nn.functional.gelu(x @ w1 + b1) @ w2 + b2
'''
ROPE_IN_FLOAT32 = '''def rope(x, positions=None, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))  # float32, as in LLaMA
    t = torch.arange(n) if positions is None else torch.as_tensor(positions)
    freqs_cis = torch.polar(torch.ones(n, d // 2), torch.outer(t.float(), freqs))
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs_cis).flatten(-2).type_as(x)
'''

# Correct multi_head_attentions in the styles of public codebases, and wrong ones the name check and the
# callee substitution exist for. Only a plain name looked up in the notebook is a call of the notebook's
# function: torch.softmax, F.softmax and scores.softmax(-1) are a library's softmax.
MHA_HEAD = '''def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q, n_heads)  # (B, H, T_q, d_h)
    k = split_heads(x_kv @ w_k, n_heads)  # (B, H, T_kv, d_h)
    v = split_heads(x_kv @ w_v, n_heads)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** {power}
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = {softmax}.nan_to_num(0.0)  # a query with no allowed key: zeros
    return merge_heads(weights @ v) @ w_o, weights
'''
MHA_STYLES = {
    "torch_softmax": MHA_HEAD.format(power=0.5, softmax="torch.softmax(scores, dim=-1)"),
    "F_softmax": "import torch.nn.functional as F\n\n\n"
                 + MHA_HEAD.format(power=0.5, softmax="F.softmax(scores, dim=-1)"),
    "tensor_softmax": MHA_HEAD.format(power=0.5, softmax="scores.softmax(-1)"),
    "nn_Softmax": MHA_HEAD.format(power=0.5, softmax="nn.Softmax(dim=-1)(scores)"),
    "einsum": '''def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(torch.einsum("btd,de->bte", x, w), n_heads)
               for x, w in ((x_q, w_q), (x_kv, w_k), (x_kv, w_v)))
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, -torch.inf)
    weights = torch.nan_to_num(torch.softmax(scores, -1))
    return merge_heads(torch.einsum("bhqk,bhkd->bhqd", weights, v)) @ w_o, weights
''',
}
MHA_UNSCALED = MHA_HEAD.format(power=0.0, softmax="torch.softmax(scores, dim=-1)")  # divides by d_h ** 0 = 1
MHA_OWN_SOFTMAX_MISSING = MHA_HEAD.format(power=0.5, softmax="softmax(scores, axis=-1)")
SPLIT_WITHOUT_TRANSPOSE = '''def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)
'''


@pytest.mark.parametrize("style", MHA_STYLES)
def test_a_librarys_softmax_is_not_the_notebooks(style):
    """The name check and the whole grade cell, hidden tests included, pass every correct style."""
    namespace = lesson_namespace("06_multi_head")
    exec(MHA_STYLES[style], namespace)
    assert missing_names(namespace["multi_head_attention"]) == []
    exec(grade_cell("06_multi_head", "multi_head_attention_tests"), namespace)


def test_only_plain_names_are_calls_of_the_notebooks_functions():
    namespace = notebook("import torch\nimport torch.nn.functional as F\n"
                         "def f(x):\n"
                         "    a, b, c = torch.softmax(x, -1), F.softmax(x, -1), x.softmax(-1)\n"
                         "    rows = [softmax(r) for r in x]  # a comprehension is code of its own\n"
                         "    return (lambda t: masked_attention(t, t, t))(x)\n")
    assert missing_names(namespace["f"]) == ["softmax", "masked_attention"]


def test_a_missing_function_of_an_earlier_lesson_is_still_named():
    namespace = lesson_namespace("06_multi_head")
    exec(MHA_OWN_SOFTMAX_MISSING, namespace)
    with pytest.raises(CheckFailed, match=r"calls softmax, which this notebook does not define \(softmax is "
                                          r"lesson 02's exercise, and this notebook has no copy of it\)"):
        exec(grade_cell("06_multi_head", "multi_head_attention_tests"), namespace)
    exec(MHA_STYLES["torch_softmax"].replace("torch.softmax(scores, dim=-1)",
                                             "masked_attention(q, k, v, mask)[1]"), namespace)
    with pytest.raises(CheckFailed, match="lesson 04's masked_attention is here as course_masked_attention"):
        exec(grade_cell("06_multi_head", "multi_head_attention_tests"), namespace)


# Every exercise that may call another one, with the callees; where the lesson's solution does
# not call them, a right answer that does.
CALLERS = [
    ("02_attention_lookup", "attention", ("softmax",), None),
    ("02_attention_lookup", "self_attention", ("attention", "softmax"), None),
    ("04_masking", "causal_attention_with_cache", ("masked_attention", "causal_mask"), '''
def causal_attention_with_cache(q, k, v):
    rows = []
    for t in range(q.size(-2)):
        keep = causal_mask(q.size(-2))[t]  # the keys query t may see, as a cache holds them
        rows.append(masked_attention(q[..., t : t + 1, :], k[..., keep, :], v[..., keep, :])[0])
    return torch.cat(rows, dim=-2)
'''),
    ("05_positional_encoding", "rope", ("sinusoidal_encoding",), '''
def rope(x, positions=None, base=10000.0):
    positions = torch.arange(x.shape[-2]) if positions is None else torch.as_tensor(positions)
    table = sinusoidal_encoding(int(positions.max()) + 1, x.shape[-1], base)[positions.long()]
    sin, cos = table[:, 0::2].to(x.dtype), table[:, 1::2].to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
'''),
    ("06_multi_head", "multi_head_attention", ("split_heads", "merge_heads"), None),
    ("07_transformer", "encoder_block", ("layer_norm", "feed_forward"), None),
    ("08_cost_of_attention", "score_share", ("layer_macs",), None),
    ("09_vision_patches", "conv_to_linear", ("patchify",), '''
def conv_to_linear(conv):
    weight = patchify(conv.weight.detach(), conv.kernel_size[0])[:, 0].T  # each filter is one patch
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(conv.out_channels)
    return weight, bias
'''),
    ("11_tiny_gpt", "train_step", ("lm_loss",), None),
]


def _broken(name: str):
    def broken(*args, **kwargs):
        raise RuntimeError(f"the learner's {name} was called")

    return broken


@pytest.mark.parametrize("lesson, caller, callees, source", CALLERS, ids=[c[1] for c in CALLERS])
def test_no_call_of_a_caller_grade_cell_reaches_the_learners_callees(lesson, caller, callees, source):
    """Broken callees cost the caller nothing, in the visible check and in every hidden test."""
    namespace = lesson_namespace(lesson)
    if source is not None:
        exec(source, namespace)
    broken = {name: _broken(name) for name in callees}
    namespace.update(broken)
    exec(grade_cell(lesson, f"{caller}_tests"), namespace)
    assert all(namespace[name] is broken[name] for name in callees)


SUBMISSIONS = {
    "02_attention_lookup": {"unstable_softmax": {"softmax": UNSTABLE_SOFTMAX}},
    "05_positional_encoding": {"rope_in_float32": {"rope": ROPE_IN_FLOAT32}},
    "06_multi_head": {**{f"mha_{style}": {"multi_head_attention": source}
                         for style, source in MHA_STYLES.items() if style != "einsum"},
                      "mha_unscaled": {"multi_head_attention": MHA_UNSCALED},
                      "mha_own_softmax_missing": {"multi_head_attention": MHA_OWN_SOFTMAX_MISSING},
                      "split_without_transpose": {"split_heads": SPLIT_WITHOUT_TRANSPOSE}},
    "07_transformer": {"unbiased_layer_norm": {"layer_norm": UNBIASED_LAYER_NORM},
                       "layer_norm_and_gelu": {"layer_norm": UNBIASED_LAYER_NORM,
                                               "feed_forward": GELU_FEED_FORWARD}},
}


def _solutions(source_nb) -> dict[str, str]:
    """grade_id -> the solution cell's text as a student would type it (no markers)."""
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(
        line for line in c.source.splitlines() if not MARKERS.match(line))
        for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _submission(release_nb, answers: dict[str, str]):
    nb = nbformat.from_dict(release_nb)
    nb.cells = [cell for cell in nb.cells if cell.metadata.get("nbgrader")]
    for cell in nb.cells:
        meta = cell.metadata["nbgrader"]
        if meta.get("solution") and meta["grade_id"] in answers:
            cell.source = answers[meta["grade_id"]]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory, built_solutions):
    """Autograde every submission: scores, the cells' maximum points, and the graded notebooks."""
    root = tmp_path_factory.mktemp("one_charge")
    config = configure(Config(), root)
    config.Execute.timeout = 60
    api = NbGraderAPI(config=config)
    scores, max_points, outputs = {}, {}, {}
    for lesson, submissions in SUBMISSIONS.items():
        result = api.generate_assignment(lesson)
        assert result["success"], result.get("error")
        release_nb = nbformat.read(root / "release" / lesson / f"{lesson}.ipynb", as_version=4)
        full = _solutions(nbformat.read(built_solutions[lesson], as_version=4))
        for student, changes in submissions.items():
            folder = root / "submitted" / student / lesson
            folder.mkdir(parents=True)
            nbformat.write(_submission(release_nb, {**full, **changes}), folder / f"{lesson}.ipynb")
            result = api.autograde(lesson, student, force=True, create=True)
            assert result["success"], f"{student}: {result.get('error')}\n{result.get('log')}"
            autograded = root / "autograded" / student / lesson / f"{lesson}.ipynb"
            outputs[student] = {c.metadata["nbgrader"]["grade_id"]: c.get("outputs", [])
                                for c in nbformat.read(autograded, as_version=4).cells
                                if c.metadata.get("nbgrader", {}).get("grade")}
        with Gradebook(api.coursedir.db_url, course_id=api.coursedir.course_id) as gb:
            max_points[lesson] = {g.name: g.max_score for g in gb.find_notebook(lesson, lesson).grade_cells}
            for student in submissions:
                scores[student] = {g.name: g.auto_score for g in gb.find_submission_notebook(
                    lesson, lesson, student).grades if g.auto_score is not None}
    yield scores, max_points, outputs
    shutil.rmtree(root, ignore_errors=True)


def _lost(graded, lesson: str, student: str) -> set[str]:
    scores, max_points, _ = graded
    assert scores[student], f"{student} has no automatic grades"
    return {cell for cell, score in scores[student].items() if score < max_points[lesson][cell]}


@pytest.mark.parametrize("lesson, student, loses", [
    ("02_attention_lookup", "unstable_softmax", {"softmax_tests"}),
    ("07_transformer", "unbiased_layer_norm", {"layer_norm_tests"}),
    ("07_transformer", "layer_norm_and_gelu", {"layer_norm_tests", "feed_forward_tests"}),
])
def test_a_wrong_callee_loses_only_its_own_points(graded, lesson, student, loses):
    assert _lost(graded, lesson, student) == loses
    assert all(graded[0][student][cell] == 0 for cell in loses)


@pytest.mark.parametrize("student", ["mha_torch_softmax", "mha_F_softmax", "mha_tensor_softmax",
                                     "mha_nn_Softmax"])
def test_a_right_multi_head_attention_in_any_style_gets_full_marks(graded, student):
    assert _lost(graded, "06_multi_head", student) == set()


def _error(graded, student: str, cell: str) -> str:
    return "".join(o.get("evalue", "") for o in graded[2][student][cell] if o.get("output_type") == "error")


@pytest.mark.parametrize("student, loses, named", [
    ("split_without_transpose", {"split_heads_tests"}, "without a transpose"),
    ("mha_unscaled", {"multi_head_attention_tests"}, "√d_h"),
    ("mha_own_softmax_missing", {"multi_head_attention_tests"},
     "calls softmax, which this notebook does not define"),
])
def test_a_wrong_lesson_06_answer_is_charged_once_for_its_own_mistake(graded, student, loses, named):
    assert _lost(graded, "06_multi_head", student) == loses
    (cell,) = loses
    assert named in _error(graded, student, cell)
    if student == "mha_unscaled":  # a library's softmax is never taken for the notebook's
        assert "does not define" not in _error(graded, student, cell)


def test_the_callers_grade_cells_say_which_versions_they_used(graded):
    _, _, outputs = graded

    def text(student, cell):
        return "".join(o.get("text", "") for o in outputs[student][cell] if o.get("name") == "stdout")

    assert ("(attention is checked with the course's softmax: a mistake in your softmax costs points only "
            "in softmax_tests)") in text("unstable_softmax", "attention_tests")
    assert "(self_attention is checked with the course's attention and softmax" in text(
        "unstable_softmax", "self_attention_tests")
    assert "(encoder_block is checked with the course's layer_norm and feed_forward" in text(
        "layer_norm_and_gelu", "encoder_block_tests")


def test_rope_computed_in_float32_keeps_its_points(graded):
    assert _lost(graded, "05_positional_encoding", "rope_in_float32") == set()
