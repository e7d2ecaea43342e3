"""The lesson 02 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math

import numpy as np
import pytest
import torch
from notebook_cells import notebook

from helpers import attention as ref
from helpers.checks import CheckFailed, check_attention, check_self_attention, check_softmax

# ---------------------------------------------------------------- softmax


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - lse)


def softmax_moveaxis_loops(x, axis=-1):
    x = np.moveaxis(np.array(x, dtype=float), axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        e = np.exp(row - row.max())
        out[idx] = e / e.sum()
    return np.moveaxis(out, -1, axis)


def softmax_float32(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("fn", [ref.softmax, softmax_logsumexp, softmax_moveaxis_loops, softmax_float32])
def test_softmax_check_passes_correct_variants(fn, capsys):
    check_softmax(fn)
    assert "✓" in capsys.readouterr().out


def softmax_unstable(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_no_exp(x, axis=-1):
    return x / x.sum(axis=axis, keepdims=True)


def softmax_ignores_axis(x, axis=-1):
    return ref.softmax(x, axis=-1)


def softmax_total_sum(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


def softmax_log(x, axis=-1):
    return np.log(ref.softmax(x, axis=axis))


def softmax_wrong_axis(x, axis=-1):
    return ref.softmax(x, axis=0)


def softmax_no_return(x, axis=-1):
    ref.softmax(x, axis=axis)


def softmax_drops_axis(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).sum(axis=axis)


@pytest.mark.parametrize(
    "fn, message",
    [
        (softmax_unstable, "exp\\(1000\\) overflows"),
        (softmax_global_max, "maximum of the whole array"),
        (softmax_no_exp, "without exponentiating"),
        (softmax_ignores_axis, "`axis` argument is ignored"),
        (softmax_total_sum, "sum of the whole array"),
        (softmax_in_place, "in place"),
        (softmax_log, "log-softmax"),
        (softmax_wrong_axis, "normalised along axis 0"),
        (softmax_no_return, "forget to `return`"),
        (softmax_drops_axis, "shape"),
    ],
)
def test_softmax_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_softmax(fn)


def test_unfinished_exercise_is_not_a_failure():
    def stub(x, axis=-1):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        check_softmax(stub)


# ---------------------------------------------------------------- attention


def attention_einsum(q, k, v):
    scores = np.einsum("id,jd->ij", q, k) / math.sqrt(q.shape[1])
    w = softmax_logsumexp(scores)
    return np.einsum("ij,jd->id", w, v), w


def attention_loops(q, k, v):
    n_q, n_k = q.shape[0], k.shape[0]
    w = np.zeros((n_q, n_k))
    out = np.zeros((n_q, v.shape[1]))
    for i in range(n_q):
        s = np.array([q[i] @ k[j] for j in range(n_k)]) / np.sqrt(q.shape[1])
        e = np.exp(s - s.max())
        w[i] = e / e.sum()
        out[i] = sum(w[i, j] * v[j] for j in range(n_k))
    return out, w


def attention_torch(q, k, v):
    import torch

    out, w = ref.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)))
    return out, w  # tensors are accepted too


def attention_list(q, k, v):
    return list(ref.attention(q, k, v))


def attention_float32_result(q, k, v):
    """The inputs cast to float32 and the float32 result returned (TensorFlow tutorials' style):
    right to float32's precision, but not in the dtype the exercise asks for."""
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    scores = q @ k.T / np.float32(math.sqrt(q.shape[1]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_float32(q, k, v):
    """NumPy in float32 throughout, float32 constants included, cast back to the inputs' dtype:
    right to float32's precision."""
    dtype = np.result_type(q, k, v)
    out, w = attention_float32_result(q, k, v)
    return out.astype(dtype), w.astype(dtype)


def attention_torch_float32(q, k, v):
    """torch's default dtype inside, the result handed back as NumPy float64."""
    out, w = ref.scaled_dot_product_attention(*(torch.tensor(a, dtype=torch.float32) for a in (q, k, v)))
    return out.double().numpy(), w.double().numpy()


@pytest.mark.parametrize("fn", [ref.attention, attention_einsum, attention_loops, attention_torch,
                                attention_list, attention_float32, attention_torch_float32])
def test_attention_check_passes_correct_variants(fn):
    check_attention(fn)
    check_attention(fn, seed=7, n_q=1, n_k=9, d_k=16, d_v=3, verbose=False)


def test_attention_check_allows_float32_rounding_of_scores_in_the_thousands():
    """The hidden tests' largest case: a float32 score near 5,000 is only known to ~5e-4."""
    for seed in range(20):
        check_attention(attention_float32, seed, 40, 60, 64, 16, verbose=False)


def _att(scores_fn, out_fn=lambda w, v: w @ v, order=lambda out, w: (out, w)):
    def fn(q, k, v):
        w = scores_fn(q, k)
        return order(out_fn(w, v), w)

    return fn


SQ = lambda q: math.sqrt(q.shape[1])  # noqa: E731

ATTENTION_MISTAKES = [
    (_att(lambda q, k: ref.softmax(q @ k.T)), "not divided by √d_k"),
    (_att(lambda q, k: ref.softmax(q @ k.T / q.shape[1])), "divided the scores by d_k"),
    (_att(lambda q, k: ref.softmax(q @ k.T / SQ(q), axis=0)), "query axis"),
    (_att(lambda q, k: ref.softmax(q @ k.T * SQ(q))), "multiplied the scores by √d_k"),
    (_att(lambda q, k: (lambda e: e / e.sum())(np.exp(q @ k.T / SQ(q)))), "the whole score matrix"),
    (_att(lambda q, k: ref.softmax(q @ k.T / SQ(q)), out_fn=lambda w, v: w @ v.T), "raised ValueError"),
    (_att(lambda q, k: ref.softmax(q @ k.T / SQ(q)), order=lambda out, w: (w, out)),
     r"returned \(weights, output\)"),
    (lambda q, k, v: ref.attention(q, k, v)[0], "must return a pair"),
    (lambda q, k, v: (ref.attention(q, k, v)[0], ref.attention(q, k, v)[1].T),
     "query i's weights over the keys"),
    (_att(lambda q, k: softmax_unstable(q @ k.T / SQ(q))), "subtract the maximum|NaN"),
    (_att(lambda q, k: ref.softmax(q @ k.T / SQ(q)), out_fn=lambda w, v: w @ v * 2.0),
     "look at the last step"),
]


@pytest.mark.parametrize("fn, message", ATTENTION_MISTAKES)
def test_attention_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_attention(fn)


@pytest.mark.parametrize("fn", [
    attention_float32_result,
    lambda q, k, v: tuple(np.asarray(a, dtype=np.float32) for a in ref.attention(q, k, v)),
    lambda q, k, v: (ref.attention(q, k, v)[0], ref.attention(q, k, v)[1].astype(np.float32)),
    lambda q, k, v: ref.scaled_dot_product_attention(*(torch.tensor(a, dtype=torch.float32)
                                                       for a in (q, k, v))),
], ids=["tensorflow_style", "cast_at_the_end", "weights_only", "torch_float32"])
def test_attention_check_names_a_float32_result_of_float64_inputs(fn):
    named = r"^you returned a float32 computation, .*\n  checked: attention (output|weights) on random inputs"
    with pytest.raises(CheckFailed, match=named + " is float32 for float64") as caught:
        check_attention(fn)
    assert "cast the result back" in caught.value.fix


def test_attention_check_scale_by_dv_is_named():
    def by_dv(q, k, v):
        w = ref.softmax(q @ k.T / math.sqrt(v.shape[1]))
        return w @ v, w

    with pytest.raises(CheckFailed, match="√d_v"):
        check_attention(by_dv)


def test_attention_check_reports_mutated_inputs():
    def mutating(q, k, v):
        out = ref.attention(q, k, v)
        q *= 2
        return out

    with pytest.raises(CheckFailed, match="in place"):
        check_attention(mutating)


# ---------------------------------------------------------------- self_attention


def self_attention_einsum(x, w_q, w_k, w_v):
    q, k, v = (np.einsum("nd,de->ne", x, w) for w in (w_q, w_k, w_v))
    return attention_einsum(q, k, v)


def self_attention_float32(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=np.float32)
    return attention_float32(*(x @ np.asarray(w, dtype=np.float32) for w in (w_q, w_k, w_v)))


@pytest.mark.parametrize("fn", [ref.self_attention, self_attention_einsum, self_attention_float32])
def test_self_attention_check_passes_correct_variants(fn):
    check_self_attention(fn)
    check_self_attention(fn, seed=3, n=2, d_model=9, d_k=5, d_v=1, verbose=False)


SELF_MISTAKES = [
    (lambda x, wq, wk, wv: ref.attention(x @ wk, x @ wq, x @ wv), "swapped"),
    (lambda x, wq, wk, wv: ref.attention(x @ wq, x @ wk, x), "shape|values"),
    (lambda x, wq, wk, wv: ref.attention(x @ wq.T, x @ wk.T, x @ wv.T), "raised ValueError"),
    (lambda x, wq, wk, wv: _att(lambda q, k: ref.softmax(q @ k.T / math.sqrt(x.shape[1])))(
        x @ wq, x @ wk, x @ wv), "√d_model"),
    (lambda x, wq, wk, wv: _att(lambda q, k: ref.softmax(q @ k.T))(x @ wq, x @ wk, x @ wv), "√d_k"),
    (lambda x, wq, wk, wv: (ref.self_attention(x, wq, wk, wv)[0],
                            ref.self_attention(x, wq, wk, wv)[1].T), "transposed"),
    (lambda x, wq, wk, wv: (ref.self_attention(x, wq, wk, wv)[0] + 1.0,
                            ref.self_attention(x, wq, wk, wv)[1]), "look at the values"),
    (lambda x, wq, wk, wv: ref.attention(x @ wq, x @ wq, x @ wv), "keys were projected with w_q, not w_k"),
    (lambda x, wq, wk, wv: ref.attention(x @ wk, x @ wk, x @ wv), "queries were projected with w_k, not w_q"),
    (lambda x, wq, wk, wv: ref.attention(x @ wq, x @ wk, x @ wq), "values were projected with w_q or w_k"),
]


@pytest.mark.parametrize("fn, message", SELF_MISTAKES)
def test_self_attention_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_self_attention(fn)


@pytest.mark.parametrize("name", ["w_q", "w_k"])
def test_self_attention_check_names_the_values_matrix_also_when_d_v_is_d_k(name):
    """d_v = d_k: values projected with w_q or w_k have the right shape, and only their values show it."""
    def wrong_values(x, wq, wk, wv):
        return ref.attention(x @ wq, x @ wk, x @ {"w_q": wq, "w_k": wk}[name])

    with pytest.raises(CheckFailed, match=f"the values were projected with {name}, not w_v"):
        check_self_attention(wrong_values, d_k=4, d_v=4)
    check_self_attention(ref.self_attention, d_k=4, d_v=4, verbose=False)


def test_checks_write_nothing_to_stderr(capsys):
    """Any stderr text scores a grade cell 0: a noisy wrong answer fails by its message only."""
    with pytest.raises(CheckFailed):
        check_softmax(softmax_unstable)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: a softmax without the max shift (it overflows at ±1000), an attention
# that divides by d_k instead of √d_k, and a self_attention that is right but calls both.
NOTEBOOK = """
import numpy as np

def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)

def attention(q, k, v):
    weights = softmax(q @ k.T / q.shape[-1], axis=-1)
    return weights @ v, weights

def right_attention(q, k, v):
    weights = softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
    return weights @ v, weights

def self_attention(x, w_q, w_k, w_v):
    return attention(x @ w_q, x @ w_k, x @ w_v)

def swapped_self_attention(x, w_q, w_k, w_v):
    return attention(x @ w_k, x @ w_q, x @ w_v)
"""


def test_attention_is_checked_with_the_course_softmax(capsys):
    nb = notebook(NOTEBOOK)
    learners_softmax, attention = nb["softmax"], nb["right_attention"]
    with pytest.raises(CheckFailed, match="overflows"):
        check_softmax(learners_softmax)
    with pytest.raises(CheckFailed, match="NaN"):  # with the learner's softmax: charged a second time
        check_attention.__wrapped__(attention)
    capsys.readouterr()
    check_attention(attention)
    out = capsys.readouterr()
    assert out.out.startswith("(right_attention is checked with the course's softmax: a mistake in your "
                              "softmax costs points only in softmax_tests)\n")
    assert "✓ attention matches" in out.out and out.err == ""
    assert nb["softmax"] is learners_softmax


def test_self_attention_is_checked_with_the_course_attention_and_softmax(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["attention"], nb["softmax"]
    with pytest.raises(CheckFailed, match="divided the scores by d_k"):
        check_self_attention.__wrapped__(nb["self_attention"])
    check_self_attention(nb["self_attention"])
    assert "costs points only in attention_tests or softmax_tests" in capsys.readouterr().out
    assert (nb["attention"], nb["softmax"]) == learners


def test_a_wrong_caller_still_fails_with_the_course_callees():
    nb = notebook(NOTEBOOK)
    with pytest.raises(CheckFailed, match="swapped"):
        check_self_attention(nb["swapped_self_attention"])
    with pytest.raises(CheckFailed, match="by d_k"):
        check_attention(nb["attention"])
