"""Hidden tests use the tolerance of the dtype the exercise states. No exercise states one, so an
answer computed in float32 (float32 constants, LLaMA-style float32 angles, a mixed-precision
LayerNorm) is right to float32's precision and keeps every point: each grade cell, visible check
and hidden tests, runs here with such an answer on fresh random inputs. The loosened hidden
tests still catch the classic mistakes on their own."""

import numpy as np
import pytest
from notebook_cells import grade_cell, lesson_namespace
from test_checks_block import block_float32, ffn_float32, ln_float32
from test_checks_cost import online_float32_inside, share_torch_float32
from test_checks_heads import mha_float32
from test_checks_lookup import attention_float32, self_attention_float32, softmax_float32
from test_checks_masking import cache_float32, masked_float32
from test_checks_positional import (
    _rope_with,
    pe_div_term,
    rope_float32_angles,
    rope_llama_float32,
    rope_swapped,
)
from test_checks_recurrence import grad_float32, rnn_torch
from test_checks_scaling import entropy_float32, jacobian_float32, std_float32

from helpers.checks.core import CheckFailed

FLOAT32_ANSWERS = [
    ("01_rnn_bottleneck", rnn_torch, 2),
    ("01_rnn_bottleneck", grad_float32, 2),
    ("02_attention_lookup", softmax_float32, 3),
    ("02_attention_lookup", attention_float32, 5),  # scores in the thousands
    ("02_attention_lookup", self_attention_float32, 3),
    ("03_scaling", std_float32, 2),
    ("03_scaling", entropy_float32, 3),
    ("03_scaling", jacobian_float32, 5),  # p − p² near p = 1
    ("04_masking", masked_float32, 2),
    ("04_masking", cache_float32, 2),
    ("05_positional_encoding", pe_div_term, 3),
    ("05_positional_encoding", rope_llama_float32, 5),  # positions up to 1000
    ("05_positional_encoding", rope_float32_angles, 5),
    ("06_multi_head", mha_float32, 2),
    ("07_transformer", ln_float32, 5),  # inputs near 2.0 with a spread of 0.05
    ("07_transformer", ffn_float32, 5),  # outputs near 0 from terms near 60
    ("07_transformer", block_float32, 2),
    ("08_cost_of_attention", share_torch_float32, 2),
    ("08_cost_of_attention", online_float32_inside, 2),
]
EXERCISE = {"rnn_torch": "rnn_forward", "grad_float32": "gradient_by_position", "softmax_float32": "softmax",
            "attention_float32": "attention", "self_attention_float32": "self_attention",
            "std_float32": "score_std", "entropy_float32": "entropy", "jacobian_float32": "softmax_jacobian",
            "masked_float32": "masked_attention", "cache_float32": "causal_attention_with_cache",
            "pe_div_term": "sinusoidal_encoding", "rope_llama_float32": "rope", "rope_float32_angles": "rope",
            "mha_float32": "multi_head_attention", "ln_float32": "layer_norm", "ffn_float32": "feed_forward",
            "block_float32": "encoder_block", "share_torch_float32": "score_share",
            "online_float32_inside": "online_softmax_attention"}


@pytest.fixture(autouse=True)
def course_based_answers_allowed(monkeypatch):
    """Several float32 answers here are the course's implementation run in float32: what these tests
    measure is the tolerance, not who did the work, so the own-work guard is off
    (tests/test_own_work.py tests it)."""
    monkeypatch.setattr("helpers.checks.own_work.check_own_work", lambda *args, **kwargs: None)


@pytest.mark.parametrize("lesson, answer, runs", FLOAT32_ANSWERS, ids=lambda v: getattr(v, "__name__", None))
def test_a_float32_answer_keeps_its_points(lesson, answer, runs):
    name = EXERCISE[answer.__name__]
    namespace = lesson_namespace(lesson)
    namespace[name] = answer
    source = grade_cell(lesson, f"{name}_tests")
    for _ in range(runs):  # every run draws fresh hidden inputs
        exec(source, namespace)


def _hidden_tests_alone(lesson: str, name: str, answer, check: str):
    """The grade cell of ``name`` with its check function switched off: only the hidden tests'
    own comparisons are left to catch ``answer``."""
    namespace = lesson_namespace(lesson)
    namespace[name] = answer
    namespace[check] = lambda *args, **kwargs: None
    exec(grade_cell(lesson, f"{name}_tests"), namespace)


@pytest.mark.parametrize("answer", [
    _rope_with(freq=lambda i, d, b: b ** (-i / d)),  # the frequency exponent i/d
    _rope_with(shift=1),  # positions off by one
    rope_swapped,  # cos and sin swapped
], ids=["exponent", "off_by_one", "swapped"])
def test_the_loosened_rope_tests_still_catch_mistakes(answer):
    with pytest.raises(AssertionError):
        _hidden_tests_alone("05_positional_encoding", "rope", answer, "check_rope")


def test_the_loosened_layer_norm_test_still_catches_a_missing_eps():
    def no_eps(x, gamma, beta, eps=1e-5):
        return ln_float32(x, gamma, beta, eps=0.0)

    with pytest.raises(CheckFailed, match="nn.LayerNorm"):
        _hidden_tests_alone("07_transformer", "layer_norm", no_eps, "check_layer_norm")


def test_the_loosened_jacobian_test_still_catches_a_missing_diagonal():
    def no_diagonal(p):
        p = np.asarray(p, dtype=np.float32)
        return -np.outer(p, p)

    with pytest.raises(CheckFailed, match="finite differences"):
        _hidden_tests_alone("03_scaling", "softmax_jacobian", no_diagonal, "check_softmax_jacobian")
