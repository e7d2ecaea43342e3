"""Multiple-choice and true/false answers: a visible format check and the hidden grading."""

from __future__ import annotations

from .checks.core import CheckFailed, passed


def check_choice(answer, choices: str, name: str = "answer") -> None:
    """Visible check: ``answer`` is one of ``choices`` (letters, or "tf" for True/False).

    It says nothing about whether the answer is right. An answer left as ``None`` counts as
    not done yet (``NotImplementedError``), like an unfinished exercise.
    """
    if answer is None:
        raise NotImplementedError(f"{name} is not answered yet")
    if choices == "tf":
        if not isinstance(answer, bool):
            raise CheckFailed(f"{name} must be True or False (without quotes), got {answer!r}")
    elif not (isinstance(answer, str) and len(answer.strip()) == 1
              and answer.strip().lower() in choices):
        options = ", ".join(f'"{c}"' for c in choices)
        raise CheckFailed(f"{name} must be one letter out of {options}, got {answer!r}")
    passed(f"{name} recorded: {answer!r}")


def grade_choice(answer, correct, why: str) -> None:
    """Hidden test: fail unless ``answer`` is ``correct``; either way the feedback gives ``why``."""
    given = answer.strip().lower() if isinstance(answer, str) else answer
    if given != correct:
        raise CheckFailed(f"not quite — {why}")
    passed(f"right — {why}")
