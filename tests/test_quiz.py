"""Quiz answers: the visible check validates the format only; grading explains itself."""

import pytest

from helpers.checks import CheckFailed
from helpers.quiz import check_choice, grade_choice


def test_unanswered_counts_as_not_done():
    with pytest.raises(NotImplementedError, match="not answered"):
        check_choice(None, "abcd", "quiz_1")


@pytest.mark.parametrize("answer", ["a", "D", " b "])
def test_valid_letters_are_recorded(answer, capsys):
    check_choice(answer, "abcd")
    assert "recorded" in capsys.readouterr().out


@pytest.mark.parametrize("answer", ["e", "ab", 1, True])
def test_invalid_letters_are_refused(answer):
    with pytest.raises(CheckFailed, match="one letter"):
        check_choice(answer, "abcd")


def test_true_false_questions_want_booleans():
    check_choice(False, "tf")
    with pytest.raises(CheckFailed, match="True or False"):
        check_choice("True", "tf")


def test_grading_is_case_insensitive_and_explains(capsys):
    grade_choice(" B", "b", "because")
    assert "right — because" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="not quite — because"):
        grade_choice("c", "b", "because")
    with pytest.raises(CheckFailed):
        grade_choice(True, False, "because")
