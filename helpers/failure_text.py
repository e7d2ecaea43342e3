"""How a check's failure message is laid out, for the checks that write it
(``helpers.checks.failure``) and the class report that reads it (``helpers.grading.mistakes``).

A check writes "<what> (context): <diagnosis> — <why>"; a learner is shown the diagnosis first and
"checked: <what> (context)" on the next line (``mistake_first``), so that even a display that cuts
lines short (``nbgrader validate`` keeps about 70 characters of each) shows the named mistake.
Standard library only: the grading process reads messages without importing the checks.
"""

from __future__ import annotations

import re

# How a message names what was checked: "<what> (seed=…, …): <diagnosis> — <why>".
CHECKED = "\n  checked: "
_PREFIX_END = re.compile(r" [—–] |; |\n|\.\s+(?=[A-Z])")  # where a diagnosis begins its why or fix
_COLON = re.compile(r": ")
_CRASH = re.compile(r" raised [A-Z][\w.]*$")  # "f raised ValueError": the learner's own error follows
_WORD = re.compile(r"[^\W\d_]{3,}")
_VERDICT = re.compile(r" ha(?:s|ve) shape \(| differs from the reference\b")
SHORT_WHAT = 24  # characters: "causal_mask(4) has shape …" says what is wrong soon enough
_CONTEXT = re.compile(r" \((?:[^()]|\([^()]*\))*\bseed=(?:[^()]|\([^()]*\))*\)")  # " (seed=3, x (2, 4))"


def top_level(text: str, pattern: re.Pattern) -> int:
    """Index of the first match of ``pattern`` outside brackets, or -1."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and pattern.match(text, i):
            return i
    return -1


def split_what(text: str) -> tuple[str | None, str]:
    """``("<what> (context)", rest)`` when the message starts with a ``what``, else ``(None, text)``.

    The what ends with the context of the random inputs (``" (seed=…)"``) when there is one —
    a what may hold a colon ("with a mask: weights (seed=0)") — otherwise at the first colon
    that comes before any fix.
    """
    context = _CONTEXT.search(text)
    if context and top_level(text[:context.start()], _PREFIX_END) < 0:
        rest = text[context.end():]
        return text[:context.end()], rest[2:] if rest.startswith(": ") else rest.lstrip()
    colon = top_level(text, _COLON)
    fix = top_level(text, _PREFIX_END)
    if colon < 0 or (0 <= fix < colon):
        return None, text
    return text[:colon], text[colon + 2:]


def mistake_first(message: str) -> str:
    """``message`` with its diagnosis first and what was checked on the next line.

    "softmax(x) along the last axis (seed=0): you normalised x itself — …" becomes
    "you normalised x itself — …\n  checked: softmax(x) along the last axis (seed=0)". A message
    that already says what is wrong first ("f(x) is None — …", "f(x) has shape (4,), expected
    (4, 6)", "f raised ValueError: …") stays as it is, and so does one whose diagnosis is only a
    value ("… got str: '197'").
    """
    what, rest = split_what(message)
    verdict = _VERDICT.search(message.partition("\n")[0])
    if verdict is not None and (what is None or verdict.start() < len(what)):
        # "<what> has shape (4,), expected (4, 6)": the verdict first, unless the what is short
        if verdict.start() < SHORT_WHAT:
            return message
        what, rest = message[:verdict.start()], message[verdict.start() + 1:]
    if what is None or not rest or _CRASH.search(what):
        return message
    diagnosis, newline, more = rest.partition("\n")
    if not _WORD.search(diagnosis[:max(top_level(diagnosis, _PREFIX_END), 0) or None]):
        return message
    return diagnosis + CHECKED + what + newline + more


def as_written(text: str) -> str:
    """The message as the check wrote it, from what ``mistake_first`` made of it (a what the check
    joined to its diagnosis by a space comes back joined by ": ", which reads the same to
    ``grading.mistakes``)."""
    diagnosis, marker, after = text.partition(CHECKED)
    if not marker:
        return text
    what, newline, more = after.partition("\n")
    joint = " " if _VERDICT.match(" " + diagnosis) else ": "
    return f"{what}{joint}{diagnosis}{newline}{more}"
