"""The sentiment task: 89 words, the label rule (re-derived here on its own), lengths, seeds, encoding."""

import random
import re

import pytest
import torch

from helpers import sentiment as st  # never `from ... import test_sets`: pytest would collect it

# The rule, written again from scratch with a regular expression rather than the module's loop:
# the first sentiment adjective decides; "not"/"never" right before it (an intensifier may sit
# in between) flips it.
POSITIVE = {"good", "great", "helpful", "clear", "interesting", "useful", "excellent", "inspiring"}
NEGATIVE = {"bad", "boring", "confusing", "messy", "useless", "terrible", "dull", "chaotic"}
NEGATIONS = {"not", "never"}
INTENSIFIERS = {"very", "really", "quite", "extremely"}
CONNECTORS = {"although", "but", "while"}
ADJECTIVE = re.compile(
    r"\b(?:(not|never) )?(?:(?:very|really|quite|extremely) )?"
    r"(" + "|".join(sorted(POSITIVE | NEGATIVE)) + r")\b"
)
EXPECTED_RANGES = {"no_fillers": (4, 7), "distractor": (9, 14), "fillers_4": (25, 38), "fillers_8": (42, 60)}


def rule(words: list[str]) -> int:
    match = ADJECTIVE.search(" ".join(words))
    assert match, f"no sentiment adjective in {' '.join(words)!r}"
    negation, adjective = match.groups()
    return int((adjective in POSITIVE) != (negation is not None))


@pytest.fixture(scope="module")
def train() -> st.Reviews:
    return st.training_set()


@pytest.fixture(scope="module")
def tests() -> dict[str, st.Reviews]:
    return st.test_sets()


@pytest.fixture(scope="module")
def all_sets(train, tests) -> dict[str, st.Reviews]:
    return {"train": train, **tests}


def test_vocabulary_has_89_words_and_91_tokens():
    assert len(st.VOCAB) == len(set(st.VOCAB)) == 89
    assert st.VOCAB_SIZE == len(st.TOKENS) == 91
    assert st.TOKENS[st.PAD_ID] == st.PAD and st.PAD_ID == 0
    assert st.TOKENS[st.CLS_ID] == st.CLS and st.CLS not in st.VOCAB and st.PAD not in st.VOCAB


def test_generator_uses_exactly_the_vocabulary(all_sets):
    used = {word for reviews in all_sets.values() for words in reviews.sentences for word in words}
    assert used <= set(st.VOCAB), f"words outside VOCAB: {used - set(st.VOCAB)}"
    assert used == set(st.VOCAB), f"never generated: {set(st.VOCAB) - used}"


def test_word_lists_are_the_ones_this_rule_assumes():
    assert (set(st.POSITIVE), set(st.NEGATIVE)) == (POSITIVE, NEGATIVE)
    assert set(st.NEGATIONS) == NEGATIONS and set(st.INTENSIFIERS) == INTENSIFIERS
    assert set(st.CONNECTORS) == CONNECTORS
    # fillers, openers and nouns must not look like deciding words, or the rule would be ambiguous
    deciding = POSITIVE | NEGATIVE | NEGATIONS | INTENSIFIERS | CONNECTORS
    for phrase in (*st.FILLERS, *st.OPENERS, *st.COURSE_THINGS, *st.OTHER_THINGS):
        assert not set(phrase.split()) & deciding, phrase


@pytest.mark.parametrize(
    "text, label",
    [
        ("honestly the lecture was not very helpful in the winter semester according to my friends "
         "although the coffee was great", 0),
        ("the exercises were never boring", 1),
        ("the lab was messy but the food was not bad", 0),
        ("overall the exam was really clear while the chairs were terrible", 1),
        ("the course was not confusing if you ask me", 1),
    ],
)
def test_label_rule_on_examples(text, label):
    assert rule(text.split()) == label
    assert st.label_of(text.split()) == label


def test_labels_agree_with_an_independent_parser(all_sets):
    for name, reviews in all_sets.items():
        for words, label in zip(reviews.sentences, reviews.labels):
            assert rule(words) == label, f"{name}: {' '.join(words)!r} is labelled {label}"
            assert st.label_of(words) == label, f"{name}: label_of disagrees on {' '.join(words)!r}"


def test_labels_are_balanced(all_sets):
    for name, reviews in all_sets.items():
        share = sum(reviews.labels) / len(reviews)
        assert 0.44 < share < 0.56, f"{name}: {share:.3f} positive"


def test_set_sizes_and_names(train, tests):
    assert len(train) == 8000
    assert list(tests) == ["no_fillers", "distractor", "fillers_4", "fillers_8"]
    assert all(len(reviews) == len(reviews.sentences) == 1000 for reviews in tests.values())


def test_lengths_stay_in_the_promised_ranges(train, tests):
    lengths = [len(words) for words in train.sentences]
    assert min(lengths) == 4 and max(lengths) <= 59
    assert sum(n >= 40 for n in lengths) > 0.2 * len(lengths), "most training reviews should be long"
    for name, (fewest, most) in EXPECTED_RANGES.items():
        n_fillers, distractor = {spec[0]: spec[1:] for spec in st.DEFAULT.test_sets}[name]
        assert st.length_range(n_fillers, distractor) == (fewest, most)
        lengths = [len(words) for words in tests[name].sentences]
        assert fewest <= min(lengths) and max(lengths) <= most, (name, min(lengths), max(lengths))
    for name in ("no_fillers", "distractor"):  # few combinations: both ends are drawn
        lengths = [len(words) for words in tests[name].sentences]
        assert (min(lengths), max(lengths)) == EXPECTED_RANGES[name]


def test_eight_fillers_give_42_to_60_words_by_construction():
    lengths = sorted(len(phrase.split()) for phrase in st.FILLERS)
    shortest = "the lab was bad".split() + "but the room was good".split()
    longest = ["honestly"] + "the lab was not very bad".split() + "but the room was never really good".split()
    assert len(shortest) + sum(lengths[:8]) == 42
    assert len(longest) + sum(lengths[-8:]) == 60
    rng = random.Random(5)
    for _ in range(3000):
        words, _ = st.make_sentence(rng, 8, distractor=True)
        assert 42 <= len(words) <= 60


def test_long_sets_put_the_deciding_words_far_from_the_end(tests):
    for words in tests["fillers_8"].sentences:
        text = " ".join(words)
        words_after = len(text[ADJECTIVE.search(text).start(2) :].split()) - 1  # after the adjective
        assert words_after >= 38, text  # at least 33 filler words and a 5-word distractor


def test_distractor_is_present_exactly_where_it_should_be(all_sets):
    has_distractor = {"no_fillers": False, "distractor": True, "fillers_4": True, "fillers_8": True}
    for name, reviews in all_sets.items():
        counts = [sum(word in POSITIVE | NEGATIVE for word in words) for words in reviews.sentences]
        connectors = [sum(word in CONNECTORS for word in words) for words in reviews.sentences]
        assert all(c == n - 1 for c, n in zip(connectors, counts)), f"{name}: a connector per distractor"
        if name == "train":
            share = counts.count(2) / len(counts)
            assert 0.45 < share < 0.55 and set(counts) == {1, 2}, f"train: {share:.3f} with a distractor"
        else:
            assert set(counts) == {2 if has_distractor[name] else 1}, name


def test_distractor_sentiment_is_independent_of_the_label(all_sets):
    adjective_agrees, clause_agrees = [], []
    for reviews in all_sets.values():
        for words, label in zip(reviews.sentences, reviews.labels):
            connector = [i for i, word in enumerate(words) if word in CONNECTORS]
            if connector:
                clause = words[connector[0] + 1 :]
                adjective_agrees.append(int(clause[-1] in POSITIVE) == label)
                clause_agrees.append(rule(clause) == label)
    assert len(clause_agrees) > 5000
    for agrees in (adjective_agrees, clause_agrees):
        assert 0.46 < sum(agrees) / len(agrees) < 0.54


def test_same_seed_same_sets_other_seed_other_sets():
    assert st.training_set(300, seed=3) == st.training_set(300, seed=3)
    assert st.training_set(300, seed=3) != st.training_set(300, seed=4)
    assert st.test_sets(100, seed=3) == st.test_sets(100, seed=3)
    a, b = st.test_sets(100, seed=3), st.test_sets(100, seed=4)
    assert all(a[name] != b[name] for name in a)
    assert st.training_set(100, seed=0).sentences != st.test_sets(100, seed=0)["fillers_4"].sentences


def test_generation_leaves_the_global_random_state_alone():
    random.seed(123)
    want = random.random()
    random.seed(123)
    st.training_set(50)
    st.test_sets(50)
    assert random.random() == want


def test_max_train_words_caps_training_lengths():
    reviews = st.training_set(500, config=st.TaskConfig(max_train_words=45))
    assert max(len(words) for words in reviews.sentences) <= 45


def test_encode_pads_with_zero_and_can_prepend_cls():
    sentences = [["the", "lab", "was", "good"], "the exercises were not very boring at least for me".split()]
    ids, lengths = st.encode(sentences)
    assert ids.shape == (2, 10) and ids.dtype == torch.long
    assert lengths.tolist() == [4, 10]
    assert ids[0, 4:].eq(st.PAD_ID).all() and ids[0, :4].ne(st.PAD_ID).all()
    assert [st.TOKENS[i] for i in ids[1].tolist()] == sentences[1]
    ids, lengths = st.encode(sentences, max_len=12, add_cls=True)
    assert ids.shape == (2, 12) and lengths.tolist() == [5, 11]
    assert ids[:, 0].eq(st.CLS_ID).all()
    assert ids[0, 1:5].tolist() == st.token_ids(sentences[0])


def test_reviews_tensors_are_ready_for_training(tests):
    ids, lengths, labels = tests["fillers_8"].tensors(add_cls=True)
    assert ids.shape == (1000, int(lengths.max())) and labels.shape == (1000,)
    assert labels.dtype == torch.float32 and int(labels.sum()) == sum(tests["fillers_8"].labels)
    assert int(ids.max()) < st.VOCAB_SIZE


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: st.make_sentence(random.Random(0), -1, False), ValueError, "n_fillers must be an int from"),
        (lambda: st.make_sentence(random.Random(0), 16, True), ValueError, "at most once"),
        (lambda: st.make_sentence(0, 2, True), TypeError, "rng must be a random.Random"),
        (lambda: st.training_set(-5), ValueError, "must be a positive int, got -5"),
        (lambda: st.test_sets(0), ValueError, "must be a positive int"),
        (lambda: st.training_set(10, seed="a"), TypeError, "seed must be an int"),
        (lambda: st.length_range(20, True), ValueError, "n_fillers must be an int"),
        (lambda: st.TaskConfig(p_distractor=1.5), ValueError, "p_distractor is a probability"),
        (lambda: st.TaskConfig(max_fillers=20), ValueError, "max_fillers must be an int from 0 to 15"),
        (lambda: st.TaskConfig(max_train_words=30), ValueError, "max_train_words must be at least 42"),
        (lambda: st.TaskConfig(test_sets=(("a", 0, False), ("a", 4, True))), ValueError, "distinct"),
        (lambda: st.TaskConfig(test_sets=(("long", 99, True),)), ValueError, "test set 'long'"),
        (lambda: st.token_ids(["the", "lectures"]), ValueError, "'lectures' .* did you mean 'lecture'"),
        (lambda: st.token_ids("the lecture was good"), ValueError, r"split it first"),
        (lambda: st.encode([]), ValueError, "non-empty list"),
        (lambda: st.encode([["the", "lab"], []]), ValueError, "review 1 has no words"),
        (lambda: st.encode([["the", "lab", "was", "good"]], max_len=4, add_cls=True), ValueError,
         "shorter than the longest review: 5 tokens including"),
        (lambda: st.label_of(["the", "lecture", "was"]), ValueError, "no sentiment adjective"),
        (lambda: st.Reviews([["the", "lab", "was", "good"]], [1, 0]), ValueError, "one label per review"),
    ],
)
def test_bad_arguments_are_explained(call, error, match):
    with pytest.raises(error, match=match):
        call()
