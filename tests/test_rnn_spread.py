"""Lesson 01's runs over eight seeds, four kernel paths and three budgets (data/sentiment_spread/):
the file holds the runs it says, and every sentence, question and mark scheme of lesson 01 that
rests on them holds for every run."""

import copy
import dataclasses
import json
import math

import numpy as np
import pytest

from experiments import kernels, rnn_control, rnn_spread, training
from helpers import paths, sentiment

LESSON = paths.CHECKOUT_DATA.parent / "solutions" / "01_rnn_bottleneck" / "01_rnn_bottleneck.py"


@pytest.fixture(scope="module")
def spread():
    return rnn_spread.load_results()


@pytest.fixture(scope="module")
def shipped():
    return training.load_results()


def _roundtrip(config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config)))


def test_the_file_holds_every_run_of_the_command(spread):
    assert spread["command"] == "python -m experiments.rnn_spread"
    assert spread["config"] == _roundtrip(rnn_spread.DEFAULT)
    assert spread["recipe"] == _roundtrip(training.DEFAULT), "not lesson 01's recipe"
    c = spread["config"]
    assert set(c["paths"]) == set(kernels.KERNEL_PATHS) and len(c["seeds"]) >= 8
    got = {(r["path"], r["model"], r["task"], r["seed"]) for r in spread["runs"]}
    want = {(p, "rnn", t, s) for p in c["paths"] for t in ("fillers", "control") for s in c["seeds"]}
    want |= {(p, m, "fillers", s) for p in c["paths"] if p != "native"
             for m in c["other_models"] for s in c["other_seeds"]}
    assert got == want
    for run in spread["runs"]:
        long_rnn = run["model"] == "rnn" and run["task"] == "fillers"
        assert len(run["loss"]) == (c["epochs"] if long_rnn else 20)
        assert sorted(map(int, run["accuracy"])) == (c["checkpoints"] if long_rnn else [20])
        if run["path"] in ("avx2", "default"):  # the selector took effect
            assert run["capability"] == run["path"].upper(), run["path"]


def test_the_twenty_epoch_checkpoint_is_lesson_01s_run(spread, shipped):
    """Where this machine's kernels made the shipped file, the checkpoint at 20 epochs is that run."""
    for row in (r for r in shipped["runs"] if r["model"] == "rnn"):
        for run in (r for r in rnn_spread.runs_of(spread) if r["seed"] == row["seed"]):
            assert run["loss"][0] == pytest.approx(row["loss"][0], rel=1e-5), "not the same run"
            if run["loss"][:20] == row["loss"]:
                assert run["accuracy"]["20"] == {t: row[t] for t in training.TEST_SETS}


def test_what_lesson_01_says_holds_in_every_run(spread):
    every = rnn_spread.runs_of(spread)
    rnn = rnn_spread.distinct(every)
    checkpoints = spread["config"]["checkpoints"]
    # The think question: "In every run above — any seed, any rounding, 20 epochs or 60 — the plain
    # RNN stays at chance on fillers_4 and fillers_8", "on no_fillers … its progress is slow and uneven".
    for epochs in checkpoints:
        assert rnn_spread.at_chance([a for t in rnn_control.LONG_SETS
                                     for a in rnn_spread.accuracies(every, t, epochs)]), epochs
    first, last = (rnn_spread.accuracies(rnn, "no_fillers", e) for e in (20, max(checkpoints)))
    assert max(first) < rnn_spread.LEARNED and np.median(last) > np.median(first), "not slow progress"
    assert max(last) - min(last) > 0.1, "not uneven from run to run"
    seed, lo, hi = rnn_spread.widest_by_rounding(rnn, "no_fillers", max(checkpoints))
    assert hi - lo > 0.05, "the rounding alone does not move a run"
    text = rnn_spread.spread_reading(spread)
    assert "at chance in every run" in text and "some runs creep up" in text
    assert "while the filler sets stay at chance" in text and "The rounding alone moves a run" in text
    # The LSTM and the attention model on the other paths: right on (nearly) every review.
    for model in ("lstm", "attention"):
        runs = rnn_spread.runs_of(spread, model)
        assert min(a for t in training.TEST_SETS for a in rnn_spread.accuracies(runs, t)) >= 0.99, model
    # The summary: the control "gets the short test reviews right in nearly every run".
    control = rnn_spread.distinct(rnn_spread.runs_of(spread, task="control"))
    right = [min(r["accuracy"]["20"][t] for t in rnn_control.SHORT_SETS) >= 0.95 for r in control]
    assert sum(right) >= 0.9 * len(right), right
    lesson = LESSON.read_text()
    assert "reviews right in nearly every run, so its state can hold the rule" in lesson
    assert "in every run, over seeds, kernel paths and three budgets" in lesson


def test_the_loss_curves_say_what_the_lesson_reads_from_them(spread, shipped):
    guess = math.log(2)
    lesson = LESSON.read_text()
    assert "The LSTM sits on the guessing line for several epochs and then\n# drops" in lesson
    for run in (r for r in shipped["runs"] if r["model"] == "lstm"):
        near_guess = [abs(x - guess) < 0.02 for x in run["loss"]]
        assert sum(near_guess[:8]) >= 5 and run["loss"][-1] < 0.05, run["seed"]
    for run in rnn_spread.runs_of(spread):
        assert max(run["loss"][:20]) < guess + 0.02, "the plain RNN starts near guessing"
    rnn = rnn_spread.distinct(rnn_spread.runs_of(spread))
    assert "its loss keeps edging\n# down in most runs" in lesson
    assert sum(r["loss"][-1] < r["loss"][19] - 0.002 for r in rnn) > len(rnn) / 2


def test_the_mark_scheme_rests_on_the_data():
    train = sentiment.training_set()
    distance = np.array([sentiment.deciding_distance(w) for w in train.sentences])
    near = np.mean(distance <= 7)
    assert 1 / 7 < near < 1 / 5, "the mark scheme says about one training review in six"
    lesson = LESSON.read_text()
    assert "about one training review in six" in lesson
    assert "NEAR = 7" in lesson


def test_deciding_distance():
    assert sentiment.deciding_distance("the lecture was good".split()) == 0
    assert sentiment.deciding_distance("the lecture was not good but the coffee was bad".split()) == 5
    with pytest.raises(ValueError, match="no sentiment adjective"):
        sentiment.deciding_distance("the lecture was".split())


def _with(spread: dict, **accuracy_at_20) -> dict:
    fake = copy.deepcopy(spread)
    for run in rnn_spread.runs_of(fake):
        run["accuracy"]["20"].update(accuracy_at_20)
    return fake


def test_the_reading_follows_the_numbers(spread):
    text = rnn_spread.spread_reading(_with(spread, fillers_4=0.9))
    assert "at chance in every run" not in text
    text = rnn_spread.spread_reading(_with(spread, no_fillers=0.5))
    assert "no run reaches 80%" in text
    text = rnn_spread.spread_reading(_with(spread, no_fillers=0.95))
    assert "in every one of them" in text and "no run reaches" not in text
    flat = copy.deepcopy(spread)
    for run in rnn_spread.runs_of(flat):
        run["accuracy"]["60"].update(no_fillers=0.5, fillers_4=0.7)
    text = rnn_spread.spread_reading(flat)
    assert "no run rises above chance" in text and "the filler sets are at" in text
    assert "stay at chance" not in text


def test_the_spread_config_is_checked():
    with pytest.raises(ValueError, match="unknown kernel paths"):
        rnn_spread.SpreadConfig(paths=("native", "avx9"))
    with pytest.raises(ValueError, match="checkpoints must lie"):
        rnn_spread.SpreadConfig(epochs=20, checkpoints=(20, 40))


def test_missing_file_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m experiments.rnn_spread"):
        rnn_spread.load_results(tmp_path)
