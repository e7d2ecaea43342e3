"""Lesson 01's control: the same plain RNN, trained on reviews without fillers.

    python -m experiments.rnn_control     # the RNN without fillers, seeds 0-2 -> data/sentiment_control/

Lesson 01 explains the plain RNN's failure by distance: filler phrases push the deciding words
far from the end, where its gradient has faded. The control changes only that. The same RNN
(``models.build("rnn")``), the same recipe and seeds (``training.DEFAULT``: 8,000 reviews, Adam at
0.01, gradients clipped to norm 1, 20 epochs of 64, length buckets, one thread a run), trained on
reviews drawn like lesson 01's but with no filler phrase (``CONTROL_TASK``: the distractor clause
stays, in half of them), and evaluated on the same four test sets. Every run sets its own seeds
and uses one thread, so the command rewrites ``data/sentiment_control/`` byte for byte on the
same machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import torch
from torch import nn

from experiments import training
from helpers import paths, sentiment
from helpers.models import build, n_parameters

DATA_DIR = paths.data_root() / "sentiment_control"
COMMAND = "python -m experiments.rnn_control"
MODEL = "rnn"
CONTROL_TASK = replace(sentiment.DEFAULT, max_fillers=0)  # the one change: no filler phrases
SHORT_SETS = ("no_fillers", "distractor")  # the deciding words at most a clause from the end
LONG_SETS = ("fillers_4", "fillers_8")
CLEAR_PASS = 0.95  # "right on (nearly) every review"
NEAR_CHANCE = 0.60  # lesson 01's bound for the shipped RNN (tests/test_training.py)


def _run(seed: int, config: training.TrainConfig) -> tuple[int, dict, dict]:
    """One seed: its weights, its accuracy on each of lesson 01's test sets and its loss per epoch."""
    losses: list[float] = []
    model = training.train_run(MODEL, seed, config, losses=losses, task=CONTROL_TASK)
    with training.threads(config.threads):
        return seed, model.state_dict(), {**training.evaluate(model, config.data_seed), "loss": losses}


def weights_path(seed: int, directory: Path = DATA_DIR) -> Path:
    """Where the control RNN trained from ``seed`` is stored."""
    return Path(directory) / f"{MODEL}_seed{seed}.pt"


def run_experiment(config: training.TrainConfig = training.DEFAULT, out_dir: Path | None = DATA_DIR,
                   processes: int = 2) -> dict:
    """Train the control RNN once per seed of ``config``; with ``out_dir``, write weights and results.json."""
    jobs = [(seed, config) for seed in config.seeds]
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(min(processes, len(jobs))) as pool:
            done = pool.starmap(_run, jobs)
    else:
        done = [_run(*job) for job in jobs]
    training_config = {k: v for k, v in asdict(config).items() if k != "models"}
    results = {"command": COMMAND, "model": MODEL, "task": asdict(CONTROL_TASK), "config": training_config,
               "torch": torch.__version__, "parameters": n_parameters(build(MODEL)),
               "runs": [{"seed": seed, **row} for seed, _, row in done]}
    text = json.dumps(results, indent=1) + "\n"
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for seed, state, _ in done:
            torch.save(state, weights_path(seed, out_dir))
        (out_dir / "results.json").write_text(text)
    return json.loads(text)


def load_results(directory: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment`` (in data/sentiment_control/ by default)."""
    return paths.read_results(directory, COMMAND)


def load_model(seed: int, directory: Path = DATA_DIR) -> nn.Module:
    """The control RNN trained from ``seed``, in eval mode."""
    path = weights_path(seed, paths.require(directory, COMMAND))
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to create it")
    model = build(MODEL)
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def _rows(results: dict, model: str | None = None) -> list[dict]:
    return [r for r in results["runs"] if model is None or r.get("model") == model]


def _percent(rows: Sequence[dict], test_set: str) -> str:
    return training.span([100 * r[test_set] for r in rows], ".1f", "%")


def comparison_markdown(control: dict, shipped: dict) -> str:
    """A Markdown table: per test set, the RNN's accuracy range over the seeds trained with fillers
    (lesson 01's runs, ``shipped``) and without them (``control``)."""
    with_fillers, without = _rows(shipped, MODEL), _rows(control)
    lines = ["| test set | RNN trained with 0–8 fillers | RNN trained without fillers |", "|---|---|---|"]
    for name, n_fillers, distractor in sentiment.DEFAULT.test_sets:
        what = f"`{name}`: {n_fillers} fillers, {'a' if distractor else 'no'} distractor"
        lines.append(f"| {what} | {_percent(with_fillers, name)} | {_percent(without, name)} |")
    seeds = ", ".join(str(r["seed"]) for r in without)
    return "\n".join(lines) + f"\n\nRanges over the seeds {seeds} of each."


def control_reading(control: dict, shipped: dict) -> str:
    """What the control shows, in sentences computed from both files."""
    with_fillers, without = _rows(shipped, MODEL), _rows(control)
    low = {t: min(r[t] for r in without) for t in training.TEST_SETS}
    high = {t: max(r[t] for r in without) for t in training.TEST_SETS}
    before = {t: max(r[t] for r in with_fillers) for t in training.TEST_SETS}
    a, b = SHORT_SETS
    sentences = [
        f"Trained without fillers, the same RNN gets {_percent(without, a)} of `{a}` and "
        f"{_percent(without, b)} of `{b}` right, against {_percent(with_fillers, a)} and "
        f"{_percent(with_fillers, b)} when its training reviews had fillers."]
    short_pass = all(low[t] >= CLEAR_PASS for t in SHORT_SETS)
    failed_before = all(before[t] <= NEAR_CHANCE for t in SHORT_SETS)
    if short_pass and failed_before:
        sentences.append(
            "So the RNN can hold the rule — the first adjective, flipped by `not` or `never`, with "
            "the distractor ignored — and training finds it, on every seed, when every training "
            "review keeps the deciding words within a few steps of the end. Lesson 01's runs fail "
            "in training, not for want of a state that can hold the rule.")
    elif short_pass:
        sentences.append(
            "The RNN trained with fillers was not at chance on these short reviews in every seed, "
            "so the control only shows that removing the fillers helps.")
    else:
        sentences.append(
            "Even without fillers the RNN does not learn the short reviews on every seed: distance "
            "alone does not explain its failure.")
    c, d = LONG_SETS
    by_seed = "; ".join(f"{100 * r[c]:.1f}% and {100 * r[d]:.1f}% (seed {r['seed']})" for r in without)
    sentences.append(f"On `{c}` and `{d}` the control gets {by_seed}.")
    if max(high[t] for t in LONG_SETS) < min(low[t] for t in SHORT_SETS) - 0.10:
        sentences.append(
            "Every seed is far below its short reviews, but that tests less than it seems: these reviews "
            "put the deciding words far back *and* contain filler words the control never saw in "
            "training, so the two causes are mixed here. The first rows are the test.")
    else:
        sentences.append("It handles the fillers it never saw in training about as well as the short "
                         "reviews.")
    return " ".join(sentences)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for weights and results.json")
    parser.add_argument("--processes", type=int, default=2, help="seeds trained side by side")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = run_experiment(out_dir=args.out, processes=args.processes)
    print(comparison_markdown(results, training.load_results()))
    print(f"wrote {args.out}; took {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
