"""Lesson 01's runs again, over more seeds, on several kernel paths and for longer.

    python -m experiments.rnn_spread     # -> data/sentiment_spread/results.json (about 25 min on 2 cores)

Three seeds on one CPU can make a chaotic outcome look like a law. This command trains lesson
01's plain RNN with lesson 01's recipe (``training.DEFAULT``) from seeds 0-7 under each kernel
path of ``experiments.kernels`` (the same seeds, floats rounded four ways), for 60 epochs
instead of 20, and records its accuracy on the four test sets after 20, 40 and 60 epochs
(the 20-epoch checkpoint *is* lesson 01's run: the later epochs do not change the earlier
ones). It also trains the control (no fillers, ``rnn_control.CONTROL_TASK``) for 20 epochs from
the same seeds and paths, and the LSTM and the attention classifier from seeds 0-2 on the paths
other than this CPU's own. Nothing here is shipped as weights: only the accuracies and the
losses per epoch, which lesson 01 reads.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from experiments import kernels, rnn_control, training
from helpers import paths, sentiment
from helpers.models import LABELS

DATA_DIR = paths.data_root() / "sentiment_spread"
COMMAND = "python -m experiments.rnn_spread"
TASKS = {"fillers": sentiment.DEFAULT, "control": rnn_control.CONTROL_TASK}
LEARNED = 0.80  # a run "learns" a test set when it gets at least this share right
CHANCE = (0.40, 0.60)  # "at chance": a coin flip on 1,000 reviews lands here with certainty


@dataclass(frozen=True)
class SpreadConfig:
    """Which runs the command trains; the defaults are what data/sentiment_spread/ holds."""

    seeds: tuple[int, ...] = tuple(range(8))
    paths: tuple[str, ...] = tuple(kernels.KERNEL_PATHS)
    epochs: int = 60  # the RNN with fillers; the control and the other models train for 20
    checkpoints: tuple[int, ...] = (20, 40, 60)
    other_models: tuple[str, ...] = ("lstm", "attention")
    other_seeds: tuple[int, ...] = (0, 1, 2)

    def __post_init__(self) -> None:
        kernels.check_paths(self.paths)
        if not self.checkpoints or max(self.checkpoints) > self.epochs or min(self.checkpoints) < 1:
            raise ValueError(f"checkpoints must lie in 1..epochs={self.epochs}, got {self.checkpoints}")


DEFAULT = SpreadConfig()


def train_one(model: str, task: str, seed: int, epochs: int, checkpoints: Sequence[int]) -> dict:
    """One run with lesson 01's recipe: its loss per epoch and its accuracies at each checkpoint."""
    config = replace(training.DEFAULT, epochs=epochs)
    at: dict[str, dict[str, float]] = {}

    def measure(net: torch.nn.Module, done: int) -> None:
        if done in checkpoints:
            at[str(done)] = training.evaluate(net, config.data_seed)
            net.train()

    losses: list[float] = []
    training.train_run(model, seed, config, losses=losses, task=TASKS[task], after_epoch=measure)
    return {"model": model, "task": task, "seed": seed, **kernels.this_path(), "loss": losses,
            "accuracy": at}


def _jobs(config: SpreadConfig, path: str) -> list[tuple]:
    jobs = [("rnn", "fillers", s, config.epochs, config.checkpoints) for s in config.seeds]
    jobs += [("rnn", "control", s, 20, (20,)) for s in config.seeds]
    if path != "native":
        jobs += [(m, "fillers", s, 20, (20,)) for m in config.other_models for s in config.other_seeds]
    return sorted(jobs, key=lambda j: -j[3] * (4 if j[0] == "attention" else 1))  # longest first


def run_experiment(config: SpreadConfig = DEFAULT, out_dir: Path | None = DATA_DIR,
                   processes: int = 2) -> dict:
    """Every run of ``config`` on every path; with ``out_dir``, written to results.json there."""
    runs = []
    for path in config.paths:
        start = time.perf_counter()
        done = kernels.run_under(path, train_one, _jobs(config, path), processes)
        runs += [{"path": path, **r} for r in done]
        print(f"{path}: {len(done)} runs in {time.perf_counter() - start:.0f} s", flush=True)
    runs.sort(key=lambda r: (config.paths.index(r["path"]), r["model"], r["task"], r["seed"]))
    results = {"command": COMMAND, "config": asdict(config), "recipe": asdict(training.DEFAULT),
               "torch": torch.__version__, "kernel_paths": {p: kernels.KERNEL_PATHS[p] for p in config.paths},
               "runs": runs}
    text = json.dumps(results, indent=1) + "\n"
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "results.json").write_text(text)
    return json.loads(text)


def load_results(directory: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment`` (data/sentiment_spread/ by default)."""
    return paths.read_results(directory, COMMAND)


def runs_of(results: dict, model: str = "rnn", task: str = "fillers") -> list[dict]:
    """The runs of one model on one task, every path and seed."""
    return [r for r in results["runs"] if r["model"] == model and r["task"] == task]


def accuracies(runs: Sequence[dict], test_set: str, epochs: int = 20) -> list[float]:
    """Each run's accuracy on ``test_set`` after ``epochs``."""
    return [r["accuracy"][str(epochs)][test_set] for r in runs]


def learned_count(runs: Sequence[dict], test_set: str, epochs: int = 20) -> int:
    """How many of ``runs`` get at least ``LEARNED`` of ``test_set`` right after ``epochs``."""
    return sum(a >= LEARNED for a in accuracies(runs, test_set, epochs))


def at_chance(values: Sequence[float]) -> bool:
    """Every value within the band a coin flip lands in."""
    return all(CHANCE[0] <= v <= CHANCE[1] for v in values)


def _pct(values: Sequence[float]) -> str:
    return training.span([100 * v for v in values], ".1f", "%")


def distinct(runs: Sequence[dict]) -> list[dict]:
    """``runs`` without repeats: kernel paths that round alike on a CPU give identical runs."""
    seen, kept = set(), []
    for r in runs:
        key = (r["model"], r["task"], r["seed"], tuple(r["loss"]))
        if key not in seen:
            seen.add(key)
            kept.append(r)
    return kept


def widest_by_rounding(runs: Sequence[dict], test_set: str, epochs: int) -> tuple[int, float, float]:
    """The seed whose accuracy on ``test_set`` after ``epochs`` differs most between kernel paths:
    (seed, lowest, highest)."""
    by_seed: dict[int, list[float]] = {}
    for r in runs:
        by_seed.setdefault(r["seed"], []).append(r["accuracy"][str(epochs)][test_set])
    seed = max(by_seed, key=lambda k: max(by_seed[k]) - min(by_seed[k]))
    return seed, min(by_seed[seed]), max(by_seed[seed])


def _count_right(runs: Sequence[dict], test_set: str, share: float) -> str:
    values = accuracies(runs, test_set)
    good = sum(v >= share for v in values)
    rest = [v for v in values if v < share]
    return (f"on `{test_set}` in {good} of {len(values)}"
            + (f" (the {'other' if len(rest) == 1 else 'others'}: {_pct(rest)})" if rest else ""))


def spread_reading(results: dict) -> str:
    """What the runs of every seed and kernel path show about the plain RNN, in computed sentences."""
    c = results["config"]
    every = runs_of(results)
    rnn = distinct(every)  # the counts below are of different runs
    n, n_paths, n_seeds = len(rnn), len(c["paths"]), len(c["seeds"])
    long_sets = rnn_control.LONG_SETS
    long_20 = [a for t in long_sets for a in accuracies(rnn, t)]
    short_20 = accuracies(rnn, "no_fillers")
    learned = learned_count(rnn, "no_fillers")
    sentences = [
        f"Trained the same way from {n_seeds} seeds on each of {n_paths} kernel paths of this "
        f"machine's PyTorch ({len(every)} runs"
        + (f", {n} of them different: paths that round alike on this CPU give identical runs"
           if n < len(every) else "") +
        f"), the plain RNN gets {_pct(long_20)} of `fillers_4` and `fillers_8` right after 20 epochs"
        + (", at chance in every run." if at_chance(long_20) else ".")]
    if learned == 0:
        sentences.append(f"On `no_fillers` it gets {_pct(short_20)}: no run reaches {LEARNED:.0%}.")
    elif learned == n:
        sentences.append(f"It learns `no_fillers` in every one of them (at least {LEARNED:.0%} right).")
    else:
        sentences.append(f"{learned} of the {n} runs get at least {LEARNED:.0%} of `no_fillers` right, "
                         f"the others {_pct([a for a in short_20 if a < LEARNED])}.")
    last = max(c["checkpoints"])
    if n > n_seeds:
        seed, lo, hi = widest_by_rounding(rnn, "no_fillers", last)
        sentences.append(f"The rounding alone moves a run: seed {seed} gets {100 * lo:.1f}% of `no_fillers` "
                         f"after {last} epochs on one kernel path and {100 * hi:.1f}% on another.")
    if last > 20:
        short_late = accuracies(rnn, "no_fillers", last)
        above = sum(a > CHANCE[1] for a in short_late)
        long_late = [a for t in long_sets for a in accuracies(rnn, t, last)]
        loss_20 = [r["loss"][19] for r in rnn]
        loss_end = [r["loss"][-1] for r in rnn]
        late_learned = learned_count(rnn, "no_fillers", last)
        sentences.append(
            f"Trained for {last} epochs, " + ("some runs creep up" if above else "no run rises above chance")
            + f" on `no_fillers` ({_pct(short_late)}; {above} of {n} above {CHANCE[1]:.0%}, "
            f"{late_learned or 'none'} at {LEARNED:.0%} or more)"
            + (f" while the filler sets stay at chance ({_pct(long_late)})" if at_chance(long_late) else
               f", and the filler sets are at {_pct(long_late)}")
            + f"; the training loss goes from {training.span(loss_20, '.3f')} after 20 epochs to "
            f"{training.span(loss_end, '.3f')} after {last} (ln 2 = 0.693 is guessing).")
    control = distinct(runs_of(results, task="control"))
    if control:
        sentences.append(
            "The control (no fillers in training, 20 epochs) gets 95% or more right "
            + " and ".join(_count_right(control, t, 0.95) for t in rnn_control.SHORT_SETS) + " of its runs.")
    for model in c["other_models"]:
        runs = distinct(runs_of(results, model))
        if runs:
            worst = min(a for t in training.TEST_SETS for a in accuracies(runs, t))
            sentences.append(f"The {LABELS[model]}, {len(runs)} different runs on the other "
                             f"kernel paths: at least {100 * worst:.1f}% on every test set.")
    return " ".join(sentences)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for results.json")
    parser.add_argument("--processes", type=int, default=2, help="runs trained side by side")
    parser.add_argument("--paths", nargs="+", default=list(DEFAULT.paths), help="kernel paths to train on")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    run_experiment(replace(DEFAULT, paths=tuple(args.paths)), out_dir=args.out, processes=args.processes)
    print(f"wrote {args.out / 'results.json'}; took {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
