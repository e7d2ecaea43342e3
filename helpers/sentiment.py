"""The course-review sentiment task of lesson 01: the deciding words can sit far from the end.

Every review is built from four parts, always in this order:

    opener?   core clause (decides)              filler phrases (0 to 8)       distractor? (ignored)
    honestly  the lecture was not very helpful   in the winter semester        although the coffee was great
                                                 according to my friends

The label is 1 (positive) or 0 (negative). It depends only on the core clause: its adjective,
the first sentiment word of the review, flipped when ``not`` or ``never`` stands right before
it (an intensifier such as ``very`` may sit in between). Filler phrases carry no sentiment and
push the deciding words away from the end of the review, the part a recurrent network reads
last. The distractor is a clause of the same shape about something that is not the course, so
its adjective (and any negation in it) must be ignored.

Every word comes from ``VOCAB`` (89 words); with ``[PAD]`` (id 0) and ``[CLS]`` there are 91 tokens.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

PAD, CLS = "[PAD]", "[CLS]"
PAD_ID, CLS_ID = 0, 1

OPENERS = ("honestly", "overall", "frankly", "personally")  # one word each
COURSE_THINGS = (
    "lecture", "course", "seminar", "tutorial", "professor", "exam", "textbook", "lab",
    "exercises", "slides", "assignments", "notes",
)
OTHER_THINGS = ("coffee", "weather", "food", "room", "wifi", "cafeteria", "parking", "chairs")
PLURALS = frozenset({"exercises", "slides", "assignments", "notes", "chairs"})  # these take "were"
NEGATIONS = ("not", "never")
INTENSIFIERS = ("very", "really", "quite", "extremely")
POSITIVE = ("good", "great", "helpful", "clear", "interesting", "useful", "excellent", "inspiring")
NEGATIVE = ("bad", "boring", "confusing", "messy", "useless", "terrible", "dull", "chaotic")
CONNECTORS = ("although", "but", "while")  # open the distractor clause
# No sentiment and no negation in here. Seven phrases of 4 words, two of 5, six of 6: any 8 of
# them add up to 33..46 words, so a review with 8 fillers and a distractor has 42..60 words.
FILLERS = (
    "in the winter semester",
    "according to my friends",
    "during the first week",
    "in my second year",
    "on most monday mornings",
    "if you ask me",
    "at least for me",
    "as far as i know",
    "from what i have heard",
    "at the end of the term",
    "according to most of the students",
    "during the second week of term",
    "as far as i can tell",
    "for most of the winter semester",
    "for most of my second year",
)

# The distinct words, in a fixed order (dict keys keep the first occurrence): ids never change.
VOCAB: tuple[str, ...] = tuple(dict.fromkeys([
    *OPENERS, "the", *COURSE_THINGS, *OTHER_THINGS, "was", "were", *NEGATIONS, *INTENSIFIERS,
    *POSITIVE, *NEGATIVE, *CONNECTORS, *(word for phrase in FILLERS for word in phrase.split()),
]))
TOKENS: tuple[str, ...] = (PAD, CLS, *VOCAB)  # a token's id is its index here
VOCAB_SIZE = len(TOKENS)
_WORD_ID = {word: i for i, word in enumerate(TOKENS) if i not in (PAD_ID, CLS_ID)}
_CLAUSE_WORDS = (4, 6)  # "the lecture was good" .. "the lecture was not very good"


def _check_n_fillers(n_fillers: int, name: str = "n_fillers") -> None:
    if not isinstance(n_fillers, int) or not 0 <= n_fillers <= len(FILLERS):
        raise ValueError(
            f"{name} must be an int from 0 to {len(FILLERS)} (a review uses each of the "
            f"{len(FILLERS)} filler phrases at most once), got {n_fillers!r}"
        )


def _check_count(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of reviews) must be a positive int, got {n!r}")


def _check_seed(seed: int) -> None:
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")


def _check_words(words: Sequence[str]) -> None:
    if isinstance(words, str):
        raise ValueError(f"expected a list of words, got the string {words!r} — split it first: text.split()")


def length_range(n_fillers: int, distractor: bool) -> tuple[int, int]:
    """The fewest and the most words a review with ``n_fillers`` fillers (and a distractor?) can have."""
    _check_n_fillers(n_fillers)
    lengths = sorted(len(phrase.split()) for phrase in FILLERS)
    fewest = _CLAUSE_WORDS[0] + sum(lengths[:n_fillers])  # no opener, the shortest fillers
    most = 1 + _CLAUSE_WORDS[1] + sum(lengths[len(lengths) - n_fillers :])  # a one-word opener, the longest
    if distractor:  # a connector and a second clause
        fewest, most = fewest + 1 + _CLAUSE_WORDS[0], most + 1 + _CLAUSE_WORDS[1]
    return fewest, most


@dataclass(frozen=True)
class TaskConfig:
    """How training and test reviews are drawn; the defaults are lesson 01's."""

    max_fillers: int = 8  # a training review gets 0..max_fillers filler phrases, uniformly
    p_distractor: float = 0.5  # share of training reviews with a distractor clause
    max_train_words: int = 59  # longer training draws are redrawn; 60 words is possible only in a test set
    # (name, filler phrases, distractor?) of each test set; n_fillers 0 vs 4 vs 8 isolates the distance
    test_sets: tuple[tuple[str, int, bool], ...] = (
        ("no_fillers", 0, False),
        ("distractor", 0, True),
        ("fillers_4", 4, True),
        ("fillers_8", 8, True),
    )

    def __post_init__(self) -> None:
        _check_n_fillers(self.max_fillers, "max_fillers")
        if not 0.0 <= self.p_distractor <= 1.0:
            raise ValueError(f"p_distractor is a probability, from 0 to 1, got {self.p_distractor!r}")
        shortest = length_range(self.max_fillers, distractor=True)[0]
        if self.max_train_words < shortest:  # else some draws could never be kept
            raise ValueError(
                f"max_train_words must be at least {shortest}, the shortest review with "
                f"{self.max_fillers} fillers and a distractor, got {self.max_train_words!r}"
            )
        names = [spec[0] for spec in self.test_sets]
        if len(set(names)) != len(names):
            raise ValueError(f"test set names must be distinct, got {names}")
        for name, n_fillers, _ in self.test_sets:
            _check_n_fillers(n_fillers, f"n_fillers of test set {name!r}")


DEFAULT = TaskConfig()


@dataclass(frozen=True)
class Reviews:
    """Reviews as lists of words, and their labels (1 = positive, 0 = negative)."""

    sentences: list[list[str]]
    labels: list[int]

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.labels):
            raise ValueError(
                f"one label per review: got {len(self.sentences)} reviews and {len(self.labels)} labels"
            )

    def __len__(self) -> int:
        return len(self.labels)

    def tensors(
        self, add_cls: bool = False, max_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reviews encoded: ids (B, T), lengths (B,), labels (B,) as floats for BCEWithLogitsLoss."""
        ids, lengths = encode(self.sentences, max_len=max_len, add_cls=add_cls)
        return ids, lengths, torch.tensor(self.labels, dtype=torch.float32)


def _clause(rng: random.Random, things: Sequence[str]) -> tuple[list[str], int]:
    """'the <thing> was [not|never] [very|...] <adjective>' and its sentiment (1 = positive)."""
    thing = rng.choice(things)
    words = ["the", thing, "were" if thing in PLURALS else "was"]
    negated = rng.random() < 0.5
    if negated:
        words.append(rng.choice(NEGATIONS))
    if rng.random() < 0.5:
        words.append(rng.choice(INTENSIFIERS))
    positive = rng.random() < 0.5
    words.append(rng.choice(POSITIVE if positive else NEGATIVE))
    return words, int(positive != negated)  # "not good" is negative, "not boring" positive


def make_sentence(rng: random.Random, n_fillers: int, distractor: bool) -> tuple[list[str], int]:
    """One review (a list of words) and its label: opener?, core clause, ``n_fillers`` fillers, distractor?"""
    if not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random, such as random.Random(0), got {type(rng).__name__}")
    _check_n_fillers(n_fillers)
    words = [rng.choice(OPENERS)] if rng.random() < 0.5 else []
    core, label = _clause(rng, COURSE_THINGS)
    words += core
    for phrase in rng.sample(FILLERS, n_fillers):  # distinct phrases: no review says a thing twice
        words += phrase.split()
    if distractor:
        clause, _ = _clause(rng, OTHER_THINGS)  # its own coin flips: independent of the label
        words += [rng.choice(CONNECTORS), *clause]
    return words, label


def training_set(n: int = 8000, seed: int = 0, config: TaskConfig = DEFAULT) -> Reviews:
    """``n`` training reviews with 0..max_fillers fillers each, a share p_distractor with a distractor."""
    _check_count(n)
    _check_seed(seed)
    rng = random.Random(f"train/{seed}")  # its own stream: no global state, never the test sets' draws
    sentences, labels = [], []
    while len(sentences) < n:
        n_fillers = rng.randint(0, config.max_fillers)
        words, label = make_sentence(rng, n_fillers, distractor=rng.random() < config.p_distractor)
        if len(words) <= config.max_train_words:
            sentences.append(words)
            labels.append(label)
    return Reviews(sentences, labels)


def test_sets(n: int = 1000, seed: int = 0, config: TaskConfig = DEFAULT) -> dict[str, Reviews]:
    """The test sets of ``config.test_sets`` by name, ``n`` reviews each."""
    _check_count(n)
    _check_seed(seed)
    sets = {}
    for name, n_fillers, distractor in config.test_sets:
        rng = random.Random(f"test/{seed}/{name}")  # one stream per set: each set stands on its own
        pairs = [make_sentence(rng, n_fillers, distractor) for _ in range(n)]
        sets[name] = Reviews([words for words, _ in pairs], [label for _, label in pairs])
    return sets


def label_of(words: Sequence[str]) -> int:
    """The rule for any list of words: the first sentiment adjective, flipped by not/never before it."""
    _check_words(words)
    for i, word in enumerate(words):
        if word in POSITIVE or word in NEGATIVE:
            before = list(words[max(0, i - 2) : i])
            if before and before[-1] in INTENSIFIERS:  # look past "very" in "not very good"
                before.pop()
            negated = bool(before) and before[-1] in NEGATIONS
            return int((word in POSITIVE) != negated)
    raise ValueError(
        f"no sentiment adjective in {' '.join(words)!r}: the label needs a word of POSITIVE or NEGATIVE"
    )


def deciding_distance(words: Sequence[str]) -> int:
    """How many words follow the review's first sentiment adjective (0 = it is the last word)."""
    _check_words(words)
    for i, word in enumerate(words):
        if word in POSITIVE or word in NEGATIVE:
            return len(words) - 1 - i
    raise ValueError(f"no sentiment adjective in {' '.join(words)!r}: nothing decides its label")


def token_ids(words: Sequence[str]) -> list[int]:
    """The ids of a list of words (no [PAD], no [CLS]); a ValueError names any unknown word."""
    _check_words(words)
    ids = []
    for position, word in enumerate(words):
        if word not in _WORD_ID:
            guess = difflib.get_close_matches(word, VOCAB, n=1)
            hint = f" — did you mean {guess[0]!r}?" if guess else ""
            raise ValueError(
                f"{word!r} (word {position}) is not one of the task's {len(VOCAB)} words "
                f"(sentiment.VOCAB){hint}"
            )
        ids.append(_WORD_ID[word])
    return ids


def encode(
    sentences: Sequence[Sequence[str]], max_len: int | None = None, add_cls: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids right-padded with PAD_ID = 0, and the true lengths: ids (B, T), lengths (B,), both long.

    ``add_cls`` starts every row with CLS_ID, the token an attention classifier reads its answer
    from (lengths then count it). T is ``max_len``, or the longest row when it is None.
    """
    if isinstance(sentences, str) or len(sentences) == 0:
        raise ValueError(f"expected a non-empty list of reviews, each a list of words, got {sentences!r}")
    rows = []
    for i, words in enumerate(sentences):
        if len(words) == 0:
            raise ValueError(f"review {i} has no words")
        rows.append(([CLS_ID] if add_cls else []) + token_ids(words))
    longest = max(len(row) for row in rows)
    width = longest if max_len is None else max_len
    if width < longest:
        raise ValueError(
            f"max_len={max_len} is shorter than the longest review: {longest} tokens"
            + (" including [CLS]" if add_cls else "")
        )
    ids = torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows])  # (B, T)
    lengths = torch.tensor([len(row) for row in rows])  # (B,)
    return ids, lengths
