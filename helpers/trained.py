"""Lesson 01's trained sentiment models as shipped in ``data/sentiment/``: load them, measure them.

``python -m experiments.training`` trains the three models (plain RNN, LSTM, attention) from seeds
0, 1 and 2 and writes their weights and accuracies there; this module reads them back for the
lessons that look inside the trained models (01, 03, 05, 06, 07, 10), with the four test sets they
are measured on and how the course reports a result over seeds (``span``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from . import paths, sentiment
from .models import LABELS, MODELS, build

DATA_DIR = paths.data_root() / "sentiment"
MODEL_NAMES: tuple[str, ...] = tuple(MODELS)  # ("rnn", "lstm", "attention")
TEST_SETS: tuple[str, ...] = tuple(spec[0] for spec in sentiment.DEFAULT.test_sets)
COMMAND = "python -m experiments.training"
DATA_SEED = 0  # the training and test reviews of every run


@dataclass(frozen=True)
class Encoded:
    """Reviews as tensors padded to the longest: ids (N, T), lengths (N,), labels (N,) as floats."""

    ids: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    @classmethod
    def of(cls, reviews: sentiment.Reviews, add_cls: bool) -> Encoded:
        return cls(*reviews.tensors(add_cls=add_cls))

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The reviews at ``index`` cut to the longest of them: ids (B, T_b), lengths (B,), labels (B,)."""
        lengths = self.lengths[index]
        return self.ids[index, : int(lengths.max())], lengths, self.labels[index]


@functools.cache
def test_data(add_cls: bool, data_seed: int = DATA_SEED) -> dict[str, Encoded]:
    """The four test sets of lesson 01 by name, encoded with or without [CLS]."""
    return {name: Encoded.of(reviews, add_cls)
            for name, reviews in sentiment.test_sets(seed=data_seed).items()}


def check_sample(seeds: Sequence[int], per_set: int) -> None:
    """The arguments of a measurement over shipped models: at least one seed, at least one review per set."""
    if per_set < 1 or not seeds:
        raise ValueError(f"need per_set ≥ 1 and at least one seed, "
                         f"got per_set={per_set}, seeds={list(seeds)}")


def initial_model(name: str, seed: int, factory: Callable[[], nn.Module] | None = None) -> nn.Module:
    """Model ``name`` (or ``factory()``) initialised from ``seed``: where ``train_run`` starts.

    The caller's global torch random state is left as it was.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory() if factory is not None else build(name)


@torch.no_grad()
def accuracy(model: nn.Module, data: Encoded) -> float:
    """The share of reviews in ``data`` whose predicted label (logit > 0) is right."""
    model.eval()
    predicted = model(data.ids, data.lengths) > 0  # (N,)
    return int((predicted == data.labels.bool()).sum()) / len(data.labels)


def evaluate(model: nn.Module, data_seed: int = DATA_SEED) -> dict[str, float]:
    """Accuracy of ``model`` on each of the four test sets, by name."""
    return {name: accuracy(model, data) for name, data in test_data(model.needs_cls, data_seed).items()}


def weights_path(name: str, seed: int, data_dir: Path = DATA_DIR) -> Path:
    """Where the weights of one run are stored."""
    return Path(data_dir) / f"{name}_seed{seed}.pt"


def load_results(data_dir: Path = DATA_DIR) -> dict:
    """The stored results: config, parameter counts and one row of accuracies per run."""
    path = paths.require(data_dir, COMMAND) / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to train the models and write it")
    return json.loads(path.read_text())


def load_model(name: str, seed: int, data_dir: Path = DATA_DIR) -> nn.Module:
    """A trained model from ``data_dir``, in eval mode."""
    path = weights_path(name, seed, paths.require(data_dir, COMMAND))
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to train the models")
    model = build(name)
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def accuracy_ranges(results: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """For each model and test set, the lowest and the highest accuracy over the seeds."""
    ranges: dict[str, dict[str, tuple[float, float]]] = {}
    for name in MODEL_NAMES:
        rows = [run for run in results["runs"] if run["model"] == name]
        if rows:
            ranges[name] = {t: (min(r[t] for r in rows), max(r[t] for r in rows)) for t in TEST_SETS}
    return ranges


def span(values: Sequence[float], fmt: str = ".1f", unit: str = "") -> str:
    """'lo–hi' of ``values`` formatted with ``fmt`` (one number when both ends agree), then ``unit``:
    how the course reports a result over seeds."""
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return (lo if lo == hi else f"{lo}–{hi}") + unit


def _span(lo: float, hi: float) -> str:
    return span((100 * lo, 100 * hi), ".1f", "%")


def results_markdown(results: dict) -> str:
    """The results as a Markdown table: accuracy ranges over the seeds, and parameter counts."""
    ranges = accuracy_ranges(results)
    names = list(ranges)
    seeds = sorted({run["seed"] for run in results["runs"]})
    lines = [f"| test set (1,000 reviews each) | {' | '.join(LABELS[n] for n in names)} |",
             "|---" * (len(names) + 1) + "|"]
    for name, n_fillers, distractor in sentiment.DEFAULT.test_sets:
        lo, hi = sentiment.length_range(n_fillers, distractor)
        what = f"`{name}`: {n_fillers} fillers, {'a' if distractor else 'no'} distractor ({lo}–{hi} words)"
        lines.append(f"| {what} | {' | '.join(_span(*ranges[n][name]) for n in names)} |")
    counts = [f"{results['parameters'][n]:,}" for n in names]
    lines.append(f"| parameters | {' | '.join(counts)} |")
    return "\n".join(lines) + f"\n\nRanges over the seeds {seeds}."


def print_ranges(results: dict, title: str) -> None:
    """Print accuracy ranges over the seeds, one line per model."""
    print(title)
    for name, by_set in accuracy_ranges(results).items():
        cells = "  ".join(f"{t} {_span(*by_set[t]):>12}" for t in TEST_SETS)
        print(f"  {name:<10} {cells}")
