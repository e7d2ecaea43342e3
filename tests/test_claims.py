"""Lesson 10 helpers: reasons appear only once an answer is given, are not readable in the
notebook before, cover every claim of the lesson; the measurements behind the claims hold."""

import base64
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import ROOT  # noqa: E402

from helpers import claims  # noqa: E402
from helpers.checks.core import CheckFailed  # noqa: E402

LESSON = "10_claims_checked"
SOURCE = ROOT / "solutions" / LESSON / f"{LESSON}.py"
STUDENT = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"

# ---------------------------------------------------------------- the reveal mechanism


def test_every_reason_decodes_to_text():
    for claim_id in claims.CLAIM_IDS:
        text = claims.reason(claim_id)
        assert len(text) > 100 and text.strip() == text


def test_encode_reason_round_trips():
    text = "n × n, √d_k, 99.9–100% — and ‘quotes’"
    assert claims.encode_reason(text) != text
    assert base64.b64decode(claims.encode_reason(text)).decode("utf-8") == text


def _fragments(text: str) -> list[str]:
    """Distinctive stretches of a reason: if any appears in a file, the reason is readable there."""
    words = text.split()
    return [" ".join(words[i:i + 6]) for i in range(0, max(1, len(words) - 6), 6)]


@pytest.mark.parametrize("path", [ROOT / "helpers" / "claims.py", STUDENT])
def test_reasons_cannot_be_read_before_answering(path):
    text = path.read_text()
    for claim_id in claims.CLAIM_IDS:
        leaked = [f for f in _fragments(claims.reason(claim_id)) if f in text]
        assert not leaked, f"{claim_id}'s reason is readable in {path.name}: {leaked[0]!r}"


def test_the_lesson_checks_every_claim_once_with_its_own_answer_variable():
    source = SOURCE.read_text()
    calls = re.findall(r'^check_claim\((\w+), "(\w+)", "(\w+)"\)$', source, re.M)
    assert [claim_id for _, claim_id, _ in calls] == list(claims.CLAIM_IDS)
    for variable, claim_id, choices in calls:
        assert variable == claim_id and choices in ("tf", "abcd")
        assert re.search(rf"^{variable} = None\n### BEGIN SOLUTION\n{variable} = ", source, re.M), (
            f"{variable} needs `{variable} = None` before its solution region")


def test_unanswered_claim_is_not_done_and_reveals_nothing(capsys):
    with pytest.raises(NotImplementedError, match="claim_4 is not answered"):
        claims.check_claim(None, "claim_4")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("answer, choices, message", [
    ("False", "tf", "True or False"),
    (0, "tf", "True or False"),
    ("e", "abcd", "one letter"),
    ("ab", "abcd", "one letter"),
    (True, "abcd", "one letter"),
])
def test_badly_formatted_answers_get_a_clear_message_and_no_reason(answer, choices, message, capsys):
    with pytest.raises(CheckFailed, match=message):
        claims.check_claim(answer, "claim_2", choices)
    assert "Why" not in capsys.readouterr().out


@pytest.mark.parametrize("answer, choices", [(True, "tf"), (False, "tf"), ("C", "abcd"), (" a ", "abcd")])
def test_any_well_formed_answer_reveals_the_reason(answer, choices, capsys):
    claims.check_claim(answer, "claim_8", choices)
    out = capsys.readouterr().out
    assert "recorded" in out and "Why: With relative positional encodings" in out
    assert all(len(line) <= 100 for line in out.splitlines()[1:])


def test_unknown_claims_are_refused():
    with pytest.raises(ValueError, match="unknown claim 'claim_99'"):
        claims.check_claim("a", "claim_99", "abcd")
    with pytest.raises(ValueError, match="claim_1, claim_2"):
        claims.reason("nope")


# ---------------------------------------------------------------- measurements behind the claims


def test_plain_rnn_gradient_vanishes_faster_than_lstm_and_attention_does_not_decay():
    rnn, lstm, att = (claims.gradient_by_distance(kind, n_tokens=50) for kind in ("rnn", "lstm", "attention"))
    assert rnn.shape == (50,) and rnn[0] == 1.0
    assert rnn[40] < 1e-8 and rnn[40] < lstm[40] < 1e-4
    assert att[30:].median() > 1e-3  # no trend with distance
    with pytest.raises(ValueError, match="kind"):
        claims.gradient_by_distance("gru")
    with pytest.raises(ValueError, match="at least 2"):
        claims.gradient_by_distance("rnn", n_tokens=1)


def test_gradient_by_distance_is_deterministic():
    torch.testing.assert_close(claims.gradient_by_distance("lstm", 20, seed=3),
                               claims.gradient_by_distance("lstm", 20, seed=3))


@pytest.mark.parametrize("size", [1, 3, 5])
def test_attention_with_relative_positions_computes_a_convolution(size):
    g = torch.Generator().manual_seed(size)
    x = torch.randn(9, 3, generator=g, dtype=torch.float64)
    kernel = torch.randn(2, 3, size, generator=g, dtype=torch.float64)
    conv = torch.nn.Conv1d(3, 2, size, padding=size // 2, padding_mode="circular", bias=False).double()
    conv.weight.data = kernel
    want = conv(x.T[None])[0].T.detach()  # an independent reference: nn.Conv1d
    torch.testing.assert_close(claims.circular_conv1d(x, kernel), want)
    torch.testing.assert_close(claims.attention_as_convolution(x, kernel), want)


def test_convolution_helpers_reject_even_or_mismatched_kernels():
    x = torch.randn(5, 3)
    for kernel in (torch.randn(2, 3, 2), torch.randn(2, 4, 3), torch.randn(3, 3)):
        with pytest.raises(ValueError, match="odd kernel"):
            claims.attention_as_convolution(x, kernel)
        with pytest.raises(ValueError, match="odd kernel"):
            claims.circular_conv1d(x, kernel)


def test_causal_mask_does_not_shrink_the_memory():
    peaks = [claims.causal_attention_peak_bytes(n, d=16) for n in (128, 256)]
    assert peaks[1] == 4 * peaks[0]
    assert peaks[0] == claims.causal_attention_peak_bytes(128, d=16, causal=False)
    assert peaks[0] >= 128 * 128 * 4


def test_plot_gradient_by_distance_draws_one_line_per_model():
    ax = claims.plot_gradient_by_distance({"a": torch.ones(5), "b": torch.ones(5) / 2})
    assert len(ax.lines) == 2 and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="at least one curve"):
        claims.plot_gradient_by_distance({})
    plt.close("all")
