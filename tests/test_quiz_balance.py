"""Quizzes measure understanding, not test-taking: across the multiple-choice questions of every
lesson, the right option is no more often the longest one, and no letter is right more or less
often, than chance allows.

Each question is read from its lesson source: the options from the markdown cell that asks it, a
list "- (a) …", "- (b) …" (or inline, "(a) … · (b) …"), the right letter from the
``grade_choice`` call in the hidden tests of its grade cell. An option's length is counted in
characters as a student sees it (without Markdown's backticks and asterisks).

The rules, for N questions of four options (chance: N/4 of them for any one cue or letter):

- **longest option right**: the right option is the longest of its question (options tied for
  longest share the count) in at most 1.5 × chance of the questions — for N = 35, at most 13.1
  where chance is 8.75. A student who always picks the longest option then scores at most 37.5%.
- **shortest option right**, the mirror cue, is held to the same bound.
- **right letters**: once there are at least 20 questions, each letter is right at least 0.5 × and
  at most 1.5 × its fair share N/4 — for N = 35, between 4.4 and 13.1 times. Always answering
  one letter then scores at most 37.5%, and no letter can be ruled out.
- **similar lengths**: within a question the longest option is at most twice the shortest, or at
  most 25 characters longer (short numeric options such as "8" and "512" pass).
- **true/false**: with three or more such questions, neither True nor False is always right.
- **strictly longest**: the right option is longer than every other option of its question in at
  most a quarter of the questions — chance, for four options.
- **no lone hedge**: a question whose only hedged option ("loosely", "half true", "partly", …) is
  the right one teaches students to pick the hedge; no question does that.

The last tests build deliberately skewed quiz sets from the course's own questions and show that
the rules catch them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import pytest
from conftest import ROOT, lessons

from tooling.build import solution_notebook

LONGEST_RIGHT_MAX = 1.5  # × chance
LETTER_SHARE = (0.5, 1.5)  # × a letter's fair share
MIN_QUESTIONS_FOR_LETTERS = 20
LENGTH_RATIO_MAX, LENGTH_GAP_MAX = 2, 25
STRICTLY_LONGEST_MAX = 0.25  # of the questions
HEDGES = re.compile(r"\b(loosely|half[- ]true|partly|partially|in part|somewhat|more or less|"
                    r"it depends|sort of|to some extent)\b", re.I)

_OPTION = re.compile(r"\(([a-z])\)\s+(.*?)\s*(?=\s[·-]\s+\([a-z]\)\s|$)", re.S)
_GRADE = re.compile(r'grade_choice\((\w+),\s*"([a-z])"')
_GRADE_TF = re.compile(r"grade_choice\((\w+),\s*(True|False)\b")


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: where it is, its options in order, its right letter."""

    lesson: str
    name: str
    options: tuple[str, ...]
    right: str

    @property
    def letters(self) -> str:
        return "abcdefgh"[:len(self.options)]

    def length(self, letter: str) -> int:
        return len(self.options[self.letters.index(letter)])


def _markdown_text(source: str) -> str:
    return " ".join(source.replace("`", "").replace("**", "").split())


def options_of(markdown: str) -> tuple[str, ...]:
    """The options "(a) … · (b) …" of a question's markdown, in order, as a student reads them."""
    text = _markdown_text(markdown)
    start = text.find("(a) ")
    found = _OPTION.findall(text[start:]) if start >= 0 else []
    letters = "".join(letter for letter, _ in found)
    if letters != "abcdefgh"[:len(found)]:
        raise ValueError(f"options out of order ({letters}) in: {text[start:start + 80]}…")
    return tuple(option for _, option in found)


def lesson_questions(lesson: str) -> list[Question]:
    """Every multiple-choice question of ``lesson``: the options from the nearest markdown cell
    above its answer cell, the right letter from its grade cell's ``grade_choice``."""
    questions, asked = [], None
    for cell in solution_notebook(lesson).cells:
        if cell.cell_type == "markdown" and "(a) " in _markdown_text(cell.source):
            asked = cell.source
        for name, right in _GRADE.findall(cell.source) if cell.cell_type == "code" else []:
            if asked is None:
                raise ValueError(f"{lesson}: {name} has no options above it")
            questions.append(Question(lesson, name, options_of(asked), right))
            asked = None
    return questions


@dataclass(frozen=True)
class Stats:
    """What a test-wise student could exploit in a set of questions."""

    n: int
    chance: float  # expected count of "the longest is right" for a random pick
    longest_right: float
    shortest_right: float
    letters: dict[str, int]
    fair_share: dict[str, float]


def _extreme_right(q: Question, pick) -> float:
    lengths = [q.length(x) for x in q.letters]
    best = pick(lengths)
    return (q.length(q.right) == best) / lengths.count(best)


def quiz_stats(questions: list[Question]) -> Stats:
    letters = sorted({x for q in questions for x in q.letters})
    fair = {x: sum(1 / len(q.options) for q in questions if x in q.letters) for x in letters}
    return Stats(
        n=len(questions),
        chance=sum(1 / len(q.options) for q in questions),
        longest_right=sum(_extreme_right(q, max) for q in questions),
        shortest_right=sum(_extreme_right(q, min) for q in questions),
        letters={x: sum(q.right == x for q in questions) for x in letters},
        fair_share=fair,
    )


def problems(stats: Stats) -> list[str]:
    """What is far from chance in ``stats``; empty when nothing is."""
    found = []
    for cue, count in (("longest", stats.longest_right), ("shortest", stats.shortest_right)):
        if count > LONGEST_RIGHT_MAX * stats.chance:
            found.append(f"the {cue} option is right in {count:g} of {stats.n} questions "
                         f"(chance {stats.chance:g}, allowed {LONGEST_RIGHT_MAX * stats.chance:g})")
    if stats.n >= MIN_QUESTIONS_FOR_LETTERS:
        low, high = LETTER_SHARE
        for letter, count in stats.letters.items():
            fair = stats.fair_share[letter]
            if not low * fair <= count <= high * fair:
                found.append(f"({letter}) is right in {count} of {stats.n} questions "
                             f"(fair share {fair:g}, allowed {low * fair:g}–{high * fair:g})")
    return found


def length_problem(q: Question) -> str | None:
    lengths = [len(o) for o in q.options]
    if max(lengths) > LENGTH_RATIO_MAX * min(lengths) and max(lengths) - min(lengths) > LENGTH_GAP_MAX:
        return f"{q.lesson} {q.name}: option lengths {lengths} differ too much"
    return None


QUESTIONS = [q for lesson in lessons() for q in lesson_questions(lesson)]
SOURCES = "".join((ROOT / "solutions" / n / f"{n}.py").read_text() for n in lessons())


def _report(stats: Stats) -> str:
    letters = ", ".join(f"{x}: {c}" for x, c in stats.letters.items())
    return (f"{stats.n} questions; longest option right {stats.longest_right:g} "
            f"(chance {stats.chance:g}); shortest right {stats.shortest_right:g}; letters {letters}")


# ---------------------------------------------------------------- the course's quizzes


def test_every_multiple_choice_question_is_found():
    graded = _GRADE.findall(SOURCES)
    assert len(QUESTIONS) == len(graded) >= 30
    assert all(len(q.options) == 4 and q.right in q.letters for q in QUESTIONS)
    assert all(len(o) >= 1 for q in QUESTIONS for o in q.options)
    per_lesson = Counter(q.lesson for q in QUESTIONS)
    assert set(per_lesson) == set(lessons()), "every lesson has a multiple-choice quiz"


def test_right_answers_are_neither_the_longest_nor_one_letter_more_often_than_chance():
    stats = quiz_stats(QUESTIONS)
    assert problems(stats) == [], _report(stats)


def test_options_of_a_question_have_similar_lengths():
    found = [p for q in QUESTIONS if (p := length_problem(q))]
    assert found == [], "\n".join(found)


def strictly_longest_right(questions: list[Question]) -> list[Question]:
    return [q for q in questions
            if all(q.length(q.right) > q.length(x) for x in q.letters if x != q.right)]


def lone_hedge_right(questions: list[Question]) -> list[Question]:
    """Questions whose one hedged option is the right one."""
    return [q for q in questions
            if [x for x, o in zip(q.letters, q.options) if HEDGES.search(o)] == [q.right]]


def test_the_right_option_is_strictly_the_longest_in_at_most_a_quarter_of_the_questions():
    found = strictly_longest_right(QUESTIONS)
    assert len(found) <= STRICTLY_LONGEST_MAX * len(QUESTIONS), \
        f"{len(found)} of {len(QUESTIONS)}: " + ", ".join(f"{q.lesson} {q.name}" for q in found)


def test_no_question_has_its_only_hedged_option_right():
    found = lone_hedge_right(QUESTIONS)
    assert found == [], ", ".join(f"{q.lesson} {q.name}: {q.options}" for q in found)


def test_true_false_answers_are_not_all_the_same():
    answers = [value for _, value in _GRADE_TF.findall(SOURCES)]
    assert len(answers) < 3 or set(answers) == {"True", "False"}, answers


# ---------------------------------------------------------------- the rules bite


def _rearranged(q: Question, right_at: str, right_text: str | None = None) -> Question:
    """``q`` with its right option moved to letter ``right_at`` (and its text replaced)."""
    others = [o for x, o in zip(q.letters, q.options) if x != q.right]
    right = right_text if right_text is not None else q.options[q.letters.index(q.right)]
    at = q.letters.index(right_at)
    return replace(q, options=tuple(others[:at] + [right] + others[at:]), right=right_at)


def test_a_quiz_whose_right_answer_is_always_the_longest_fails():
    skewed = [_rearranged(q, q.right, right_text=max(q.options, key=len) + " (which is the point)")
              for q in QUESTIONS]
    stats = quiz_stats(skewed)
    assert stats.longest_right == stats.n
    assert any("longest option is right" in p for p in problems(stats))


def test_a_quiz_that_hides_the_answer_in_the_shortest_option_fails():
    skewed = [_rearranged(q, q.right, right_text="yes") for q in QUESTIONS]
    assert any("shortest option is right" in p for p in problems(quiz_stats(skewed)))


@pytest.mark.parametrize("favourite", ["a", "b", "c", "d"])
def test_a_quiz_that_favours_one_letter_fails(favourite):
    skewed = [_rearranged(q, favourite if i % 3 else q.right) for i, q in enumerate(QUESTIONS)]
    assert any(f"({favourite}) is right" in p for p in problems(quiz_stats(skewed)))


def test_a_quiz_that_never_uses_one_letter_fails():
    skewed = [_rearranged(q, "abc"[i % 3]) for i, q in enumerate(QUESTIONS)]
    assert any("(d) is right in 0" in p for p in problems(quiz_stats(skewed)))


def test_letter_rule_waits_for_enough_questions():
    few = [_rearranged(q, "a") for q in QUESTIONS[:MIN_QUESTIONS_FOR_LETTERS - 1]]
    assert not any("is right in" in p and p.startswith("(") for p in problems(quiz_stats(few)))


def test_an_option_twice_as_long_as_the_others_is_flagged():
    q = Question("xx", "quiz_1", ("yes", "no", "maybe", "only when the tide is low and the moon is full"),
                 "d")
    assert length_problem(q) is not None
    assert length_problem(replace(q, options=("1", "2", "3", "4"))) is None


def test_options_are_parsed_as_a_student_reads_them():
    inline = ("**2.** What is `q·k`?\n(a) `2·n·d` multiply-adds · (b) a weight ·\n"
              "(c) `n × n` · (d) (none) of these")
    want = ("2·n·d multiply-adds", "a weight", "n × n", "(none) of these")
    assert options_of(inline) == want
    listed = "**2.** What is `q·k`?\n\n- (a) `2·n·d` multiply-adds\n- (b) a weight\n- (c) `n × n`\n" \
             "- (d) (none) of these"
    assert options_of(listed) == want
    with pytest.raises(ValueError, match="out of order"):
        options_of("(a) one · (c) three")


def test_the_strictly_longest_and_lone_hedge_rules_bite():
    longest = [_rearranged(q, q.right, right_text=max(q.options, key=len) + " and more")
               for q in QUESTIONS[:20]] + QUESTIONS[20:]
    assert len(strictly_longest_right(longest)) > STRICTLY_LONGEST_MAX * len(QUESTIONS)
    q = QUESTIONS[0]
    hedged = _rearranged(q, q.right, right_text="loosely: " + q.options[q.letters.index(q.right)])
    assert lone_hedge_right([hedged]) == [hedged]
    both = replace(hedged, options=tuple(o if x == hedged.right else "partly " + o
                                         for x, o in zip(hedged.letters, hedged.options)))
    assert lone_hedge_right([both]) == [], "a hedge among several options is no cue"
