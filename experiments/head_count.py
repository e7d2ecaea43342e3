"""Lesson 06: does the attention classifier trained with one head do as well as with four?

    python -m experiments.head_count           # the one-head classifier, seeds 0-2 -> data/heads/ (minutes)
    python -m experiments.head_count --spread  # seeds 0-5 on two kernel paths -> data/heads/spread.json

Lesson 01's attention classifier (``data/sentiment/``) has 4 heads of width 8 in each of its 2
layers. This trains the same model with ``n_heads = 1``: one head of width 32, so the same width,
the same 22,689 parameters and the same multiply-adds, only one attention pattern per layer
instead of four. It uses lesson 01's recipe (``training.DEFAULT``) and seeds, each run with one
thread in its own process, so the command reproduces ``data/heads/`` exactly on the same machine.
``--spread`` trains seeds 0-5 again under this CPU's own kernels and PyTorch's plainest ones
(``experiments.kernels``; on the machine that made the file the other two paths gave runs
identical to the CPU's own in lessons 01 and 03), and keeps only the accuracies.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from experiments import kernels, training
from helpers import paths
from helpers.models import AttentionClassifier, AttentionConfig, n_parameters

DATA_DIR = paths.data_root() / "heads"
COMMAND = "python -m experiments.head_count"
N_HEADS = 1


def one_head() -> nn.Module:
    """Lesson 01's attention classifier with one head of width d_model in each layer."""
    return AttentionClassifier(AttentionConfig(n_heads=N_HEADS))


def _run(seed: int, config: training.TrainConfig) -> tuple[int, dict, dict]:
    """One seed: its weights, and its accuracy on each of lesson 01's test sets."""
    model = training.train_run("attention", seed, config, factory=one_head)
    with training.threads(config.threads):
        return seed, model.state_dict(), training.evaluate(model, config.data_seed)


def weights_path(seed: int, directory: Path = DATA_DIR) -> Path:
    """Where the one-head classifier trained from ``seed`` is stored."""
    return Path(directory) / f"attention_1head_seed{seed}.pt"


def run_experiment(config: training.TrainConfig = training.DEFAULT, out_dir: Path = DATA_DIR,
                   processes: int = 2) -> dict:
    """Train the one-head classifier once per seed of ``config``; write its weights and results.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(seed, config) for seed in config.seeds]
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(min(processes, len(jobs))) as pool:
            done = pool.starmap(_run, jobs)
    else:
        done = [_run(*job) for job in jobs]
    for seed, state, _ in done:
        torch.save(state, weights_path(seed, out_dir))
    training_config = {k: v for k, v in asdict(config).items() if k != "models"}
    results = {"command": COMMAND, "n_heads": N_HEADS, "config": training_config, "torch": torch.__version__,
               "parameters": n_parameters(one_head()),
               "runs": [{"seed": seed, **accuracy} for seed, _, accuracy in done]}
    text = json.dumps(results, indent=1) + "\n"
    (out_dir / "results.json").write_text(text)
    return json.loads(text)


SPREAD_FILE = "spread.json"
SPREAD_SEEDS = tuple(range(6))
SPREAD_PATHS = ("native", "default")


def _spread_run(seed: int, config: training.TrainConfig) -> dict:
    return {"seed": seed, **_run(seed, config)[2], **kernels.this_path()}


def run_spread(seeds: tuple[int, ...] = SPREAD_SEEDS, kernel_paths: tuple[str, ...] = SPREAD_PATHS,
               processes: int = 2, out_dir: Path | None = DATA_DIR) -> dict:
    """The one-head classifier from every seed under each kernel path; with ``out_dir``, written there."""
    jobs = [(seed, training.DEFAULT) for seed in seeds]
    results = {"command": f"{COMMAND} --spread", "seeds": list(seeds),
               "kernel_paths": {p: kernels.KERNEL_PATHS[p] for p in kernel_paths},
               "runs": [{"path": p, **r} for p in kernel_paths
                        for r in kernels.run_under(p, _spread_run, jobs, processes)]}
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / SPREAD_FILE).write_text(json.dumps(results, indent=1) + "\n")
    return results


def load_spread(directory: Path = DATA_DIR) -> dict:
    """The shipped runs of ``run_spread`` (data/heads/spread.json)."""
    return paths.read_results(directory, f"{COMMAND} --spread", SPREAD_FILE)


def worst_sets(runs: list[dict]) -> list[float]:
    """Each run's accuracy on its hardest test set."""
    return [min(r[t] for t in training.TEST_SETS) for r in runs]


def spread_reading(spread: dict, close: float = 0.05) -> str:
    """What the one-head runs of every seed and kernel path show, in sentences computed from the file."""
    runs = spread["runs"]
    worst = worst_sets(runs)
    near = sum(w >= 1 - close for w in worst)
    seeds, n_paths = spread["seeds"], len(spread["kernel_paths"])
    text = (f"Trained from seeds {seeds[0]}–{seeds[-1]} on {n_paths} kernel paths of one machine "
            f"({len(runs)} runs), the one-head classifier gets "
            f"{training.span([100 * w for w in worst], '.1f', '%')} on its hardest test set; {near} of the "
            f"{len(runs)} runs are within {100 * close:.0f} points of 100% on every set.")
    by_seed: dict[int, list[float]] = {}
    for w, r in zip(worst, runs):
        by_seed.setdefault(r["seed"], []).append(w)
    gap, seed = max((max(ws) - min(ws), s) for s, ws in by_seed.items())
    if gap > close:
        text += (f" The rounding alone moves a run: seed {seed}'s hardest set differs by "
                 f"{100 * gap:.1f} points between kernel paths.")
    return text


def load_results(directory: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment`` (in data/heads/ by default)."""
    path = paths.require(directory, COMMAND) / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to create it")
    return json.loads(path.read_text())


def load_model(seed: int, directory: Path = DATA_DIR) -> nn.Module:
    """The one-head classifier trained from ``seed``, in eval mode."""
    path = weights_path(seed, paths.require(directory, COMMAND))
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to create it")
    model = one_head()
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def comparison(one: dict, four: dict) -> list[str]:
    """Lines of a table: per test set, the accuracy range over the seeds with 4 heads and with 1."""
    four_runs = [run for run in four["runs"] if run["model"] == "attention"]
    lines = [f"{'test set':<12}{'4 heads of 8':>16}{'1 head of 32':>16}"]
    for name in training.TEST_SETS:
        cells = []
        for runs in (four_runs, one["runs"]):
            lo, hi = (f"{100 * f(r[name] for r in runs):.1f}" for f in (min, max))
            cells.append(f"{lo}%" if lo == hi else f"{lo}–{hi}%")
        lines.append(f"{name:<12}{cells[0]:>16}{cells[1]:>16}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train lesson 06's one-head attention classifier.")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for weights and results.json")
    parser.add_argument("--processes", type=int, default=2, help="seeds trained side by side")
    parser.add_argument("--spread", action="store_true",
                        help=f"seeds 0-5 on two kernel paths -> {SPREAD_FILE}")
    args = parser.parse_args(argv)
    if args.spread:
        print(spread_reading(run_spread(processes=args.processes, out_dir=args.out)))
        return 0
    results = run_experiment(out_dir=args.out, processes=args.processes)
    print("\n".join(comparison(results, training.load_results())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
