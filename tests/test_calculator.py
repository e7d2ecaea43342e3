"""The lesson 02 calculator: its numbers, its parsing, its HTML, and the widget around it."""

import numpy as np
import pytest

from helpers.calculator import lookup_steps, parse_matrix, steps_html, with_key

TOKENS = ["voltage", "spike", "alarm"]
Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])


def test_worked_example_numbers():
    s = lookup_steps(Q, Q, V, 0, TOKENS)
    np.testing.assert_allclose(s.raw_scores, [1, 0, 1])
    np.testing.assert_allclose(s.scaled_scores, [0.70711, 0, 0.70711], atol=1e-5)
    np.testing.assert_allclose(s.weights, [0.401, 0.198, 0.401], atol=5e-4)
    np.testing.assert_allclose(s.output, [6.017, 3.983], atol=5e-4)
    np.testing.assert_allclose(s.contributions.sum(0), s.output)


def test_unscaled_lookup_and_every_query_match_reference():
    from helpers.attention import attention, softmax

    for i in range(3):
        s = lookup_steps(Q, Q, V, i, TOKENS)
        np.testing.assert_allclose(s.output, attention(Q, Q, V)[0][i])
    s = lookup_steps(Q, Q, V, 2, TOKENS, scale=False)
    np.testing.assert_allclose(s.weights, softmax(Q @ Q[2]))
    assert s.scale == 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(q=Q, k=Q[:, :1], v=V, query_index=0), "same number of columns"),
        (dict(q=Q, k=Q, v=V[:2], query_index=0), "one row per token"),
        (dict(q=Q, k=Q, v=V, query_index=3), "query_index must be in 0..2"),
        (dict(q=Q, k=Q, v=V, query_index=0, tokens=["a"]), "one token name per key"),
    ],
)
def test_lookup_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lookup_steps(**kwargs)


def test_parse_matrix_accepts_lines_semicolons_commas():
    np.testing.assert_array_equal(parse_matrix("1 0\n0, 1"), [[1, 0], [0, 1]])
    np.testing.assert_array_equal(parse_matrix("1 2; 3 4;"), [[1, 2], [3, 4]])


@pytest.mark.parametrize("text, message", [("", "empty"), ("1 x", "must be a number"),
                                           ("1 2\n3", "same number of entries")])
def test_parse_matrix_errors_are_clear(text, message):
    with pytest.raises(ValueError, match=message):
        parse_matrix(text, "K")


def test_steps_html_shows_every_number_and_escapes_names():
    html = steps_html(lookup_steps(Q, Q, V, 0, ["<b>", "spike", "alarm"]))
    for text in ("0.401", "0.198", "6.017", "3.983", "0.707", "&lt;b&gt;"):
        assert text in html
    assert "<script" not in html


def test_calculator_widget_recomputes_and_reports_errors():
    from helpers.widgets import attention_calculator

    shown = attention_calculator(Q, Q, V, TOKENS)
    bundle = shown._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "image/png" in bundle
    top, boxes, out = shown.widget.children
    pick, scale = top.children
    assert "6.017" in out.value
    pick.value = 1
    assert "Query <b>spike</b>" in out.value
    scale.value = False
    assert "(not scaled)" in out.value
    boxes.children[1].value = "1 0\n0 1"  # K with two rows for three values
    assert "one row per token" in out.value


def test_with_key_replaces_one_row_of_a_copy():
    k = with_key(Q, TOKENS, "spike", [3, 0])
    np.testing.assert_array_equal(k, [[1, 0], [3, 0], [1, 1]])
    np.testing.assert_array_equal(Q, [[1, 0], [0, 1], [1, 1]])  # the lesson's K is left alone
    s = lookup_steps(Q, k, V, 0, TOKENS)  # voltage now attends mostly to spike
    np.testing.assert_allclose(s.weights, [0.164, 0.673, 0.164], atol=5e-4)
    with pytest.raises(ValueError, match="no token 'spoke'"):
        with_key(Q, TOKENS, "spoke", [3, 0])
    with pytest.raises(ValueError, match="needs 2 numbers"):
        with_key(Q, TOKENS, "spike", [3, 0, 0])


def test_calculator_fallback_shows_the_suggested_experiment(monkeypatch):
    """Without widgets the picture is the lookup after the suggested edit, not the figure the
    lesson has just shown; without an experiment it is the lookup as given."""
    import helpers.widgets as widgets

    drawn = []
    real = widgets.plot_lookup
    monkeypatch.setattr(widgets, "plot_lookup", lambda steps, axes: drawn.append(steps) or real(steps, axes))
    shown = widgets.attention_calculator(Q, Q, V, TOKENS, experiment=("spike", [3, 0]))
    assert len(drawn) == 1 and drawn[0].tokens[drawn[0].query_index] == "voltage"
    np.testing.assert_allclose(drawn[0].raw_scores, [1, 3, 1])
    assert drawn[0].weights.argmax() == 1
    top, boxes, out = shown.widget.children
    assert boxes.children[1].value == "1 0\n0 1\n1 1" and "6.017" in out.value  # the live one starts as given
    widgets.attention_calculator(Q, Q, V, TOKENS)
    np.testing.assert_allclose(drawn[1].weights, [0.401, 0.198, 0.401], atol=5e-4)
