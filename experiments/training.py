"""Train lesson 01's three sentiment models, three seeds each; store their weights and accuracies.

    python -m experiments.training               # the whole experiment -> data/sentiment/
    python -m experiments.training --benchmark   # the plain loop and the fast path, timed side by side

Every run is trained the same way: the 8,000 reviews of ``sentiment.training_set()``, binary
cross-entropy on one logit, Adam (learning rate 0.01, gradients clipped to norm 1), 20 epochs of
batches of 64. A run's seed sets the model's initial weights and the order of the batches; the
training and test reviews are the same for every run.

Two loops can train a run; both make the same kind of update to the same model:

- the **plain loop** (``fast=False``), the one written first: every epoch a random permutation,
  cut into batches of 64, each padded to its longest review; one process;
- the **fast path** (``fast=True``, what the command uses): *length buckets* — each batch holds
  reviews of similar length, so little padding is computed (the batches still come in random
  order); for the attention model, the last layer computed at the one position the loss reads,
  [CLS] (the same logits and gradients, without the states nobody reads); and the nine runs
  spread over *two processes* of one thread each.

A run always uses ``TrainConfig.threads`` threads (one), so it gives the same result in whichever
process it runs: retraining reproduces the files in ``data/sentiment/`` exactly on the same
machine. (Another CPU may round floats differently; ``tests/test_training.py`` says how much
difference it accepts.)
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from helpers import sentiment
from helpers.models import build, n_parameters
from helpers.runtime import threads
from helpers.trained import (  # noqa: F401 -- what the shipped runs are read with, kept here too
    COMMAND,
    DATA_DIR,
    DATA_SEED,
    MODEL_NAMES,
    TEST_SETS,
    Encoded,
    accuracy,
    accuracy_ranges,
    check_sample,
    evaluate,
    initial_model,
    load_model,
    load_results,
    print_ranges,
    results_markdown,
    span,
    test_data,
    weights_path,
)


@dataclass(frozen=True)
class TrainConfig:
    """How every run of the experiment is trained; the defaults are lesson 01's."""

    n_train: int = 8000  # training reviews: sentiment.training_set(n_train, data_seed)
    data_seed: int = DATA_SEED  # the same training and test reviews for every run
    epochs: int = 20
    batch_size: int = 64
    lr: float = 1e-2  # Adam; the same for the three models
    clip: float = 1.0  # largest gradient norm: guards the RNN against exploding steps
    bucket_batches: int = 16  # the fast path sorts by length within chunks of this many batches
    seeds: tuple[int, ...] = (0, 1, 2)
    models: tuple[str, ...] = MODEL_NAMES
    threads: int = 1  # torch threads of a fast run: its result does not depend on the process

    def __post_init__(self) -> None:
        unknown = sorted(set(self.models) - set(MODEL_NAMES))
        if unknown:
            raise ValueError(f"unknown models {unknown}; choose from {list(MODEL_NAMES)}")
        for name in ("n_train", "epochs", "batch_size", "bucket_batches", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if not self.lr > 0 or not self.clip > 0:
            raise ValueError(f"lr and clip must be positive, got lr={self.lr!r}, clip={self.clip!r}")


DEFAULT = TrainConfig()


def random_batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch of the plain loop: a random permutation of range(n) cut into batches of indices."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


def bucketed_batches(lengths: torch.Tensor, batch_size: int, generator: torch.Generator,
                     bucket_batches: int = DEFAULT.bucket_batches) -> list[torch.Tensor]:
    """One epoch in length buckets: shuffle, sort by length within chunks, cut, shuffle the batches."""
    batches = []
    for chunk in torch.randperm(len(lengths), generator=generator).split(batch_size * bucket_batches):
        by_length = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches += list(by_length.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


@functools.cache
def _training_data(n_train: int, data_seed: int, add_cls: bool,
                   task: sentiment.TaskConfig = sentiment.DEFAULT) -> Encoded:
    return Encoded.of(sentiment.training_set(n_train, data_seed, task), add_cls)


def train_run(name: str, seed: int, config: TrainConfig = DEFAULT, fast: bool = True,
              progress: Callable[[], None] | None = None, losses: list[float] | None = None,
              factory: Callable[[], nn.Module] | None = None,
              task: sentiment.TaskConfig = sentiment.DEFAULT,
              after_epoch: Callable[[nn.Module, int], None] | None = None) -> nn.Module:
    """Train model ``name`` from scratch with ``seed``: length buckets if ``fast``, else the plain loop.

    Runs with ``config.threads`` torch threads; ``progress`` is called after every epoch, and the
    mean training loss of every epoch is appended to ``losses``. ``factory`` builds a variant of
    the model instead of ``build(name)`` (lesson 06's one-head classifier); ``task`` draws other
    training reviews (lesson 01's control: no fillers); ``after_epoch(model, epochs_done)`` may
    measure the model between epochs (it must leave the model in train mode and touch no random
    state: the checkpoints of a long run are then the short runs). Returns the model in eval mode.
    """
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; choose one of {list(MODEL_NAMES)}")
    with threads(config.threads):
        model = initial_model(name, seed, factory)
        data = _training_data(config.n_train, config.data_seed, model.needs_cls, task)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        loss_fn = nn.BCEWithLogitsLoss()
        # The fast path asks the attention model for its last layer at [CLS] only: the same logits.
        options = {"cls_only": True} if fast and model.needs_cls else {}
        model.train()
        for done in range(1, config.epochs + 1):
            if fast:
                batches = bucketed_batches(data.lengths, config.batch_size, generator, config.bucket_batches)
            else:
                batches = random_batches(len(data.labels), config.batch_size, generator)
            total = 0.0
            for index in batches:
                ids, lengths, labels = data.batch(index)
                loss = loss_fn(model(ids, lengths, **options), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), config.clip)
                optimizer.step()
                total += loss.item() * len(index)
            if losses is not None:
                losses.append(total / len(data.labels))
            if progress is not None:
                progress()
            if after_epoch is not None:
                after_epoch(model, done)
    return model.eval()


# ---------------------------------------------------------------- the experiment

_progress_queue = None  # set in each worker process: where it reports finished epochs


def _init_worker(queue) -> None:
    global _progress_queue
    _progress_queue = queue


def _train_and_evaluate(name: str, seed: int, config: TrainConfig, fast: bool,
                        progress: Callable[[], None] | None) -> tuple[str, int, dict, dict]:
    """One run: its weights, and its accuracy on each test set and training loss by epoch."""
    losses: list[float] = []
    model = train_run(name, seed, config, fast, progress, losses)
    with threads(config.threads):
        return name, seed, model.state_dict(), {**evaluate(model, config.data_seed), "loss": losses}


def _job(args: tuple[str, int, TrainConfig, bool]) -> tuple[str, int, dict, dict]:
    """One run in a worker process, which reports each finished epoch on its queue."""
    report = (lambda: _progress_queue.put(1)) if _progress_queue is not None else None
    return _train_and_evaluate(*args, progress=report)


def _jobs_order(models: Sequence[str]) -> list[str]:
    """The slowest model first (attention, LSTM, RNN), so that two processes finish together."""
    return sorted(models, key=lambda n: -MODEL_NAMES.index(n))


def _jobs(config: TrainConfig, fast: bool) -> list[tuple[str, int, TrainConfig, bool]]:
    return [(name, seed, config, fast) for name in _jobs_order(config.models) for seed in config.seeds]


def _start_pool(processes: int):
    """Worker processes for training runs, and the queue on which they report finished epochs."""
    context = multiprocessing.get_context("spawn")  # fork after torch has started threads can hang
    queue = context.Queue()
    return context.Pool(processes, initializer=_init_worker, initargs=(queue,)), queue


def _run_in_pool(pool, queue, jobs: list, bar) -> list:
    pending = pool.map_async(_job, jobs, chunksize=1)
    while not pending.ready():
        pending.wait(0.2)
        while not queue.empty():
            bar.update(queue.get())
    done = pending.get()
    while not queue.empty():
        bar.update(queue.get())
    return done


def run_experiment(config: TrainConfig = DEFAULT, processes: int = 2, fast: bool = True,
                   out_dir: Path | None = DATA_DIR, progress: bool = True, pool=None) -> dict:
    """Train every model and seed of ``config``; returns the results and, with ``out_dir``, saves all.

    ``processes`` > 1 trains runs side by side in worker processes (the fast path's second core);
    ``pool`` reuses the workers of ``_start_pool`` instead of starting new ones.
    """
    jobs = _jobs(config, fast)
    bar = tqdm(total=len(jobs) * config.epochs, desc="epochs (all runs)", disable=not progress)
    if pool is not None:
        done = _run_in_pool(*pool, jobs, bar)
    elif processes == 1:
        done = [_train_and_evaluate(*job, progress=lambda: bar.update(1)) for job in jobs]
    else:
        workers, queue = _start_pool(processes)
        try:
            done = _run_in_pool(workers, queue, jobs, bar)
        finally:
            workers.close()
            workers.join()
    bar.close()
    results = _results(config, done)
    if out_dir is not None:
        save(results, {(name, seed): weights for name, seed, weights, _ in done}, out_dir)
    return results


def _results(config: TrainConfig, done: Sequence[tuple[str, int, dict, dict]]) -> dict:
    runs = sorted(done, key=lambda r: (MODEL_NAMES.index(r[0]), r[1]))
    return {
        "command": COMMAND,
        "config": asdict(config),
        "torch": torch.__version__,
        "parameters": {name: n_parameters(build(name)) for name in config.models},
        "runs": [{"model": name, "seed": seed, **acc} for name, seed, _, acc in runs],
    }


def save(results: dict, weights: dict[tuple[str, int], dict], out_dir: Path = DATA_DIR) -> None:
    """Write ``results.json`` and one state_dict file per run into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for (name, seed), state in weights.items():
        torch.save(state, weights_path(name, seed, out_dir))
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def benchmark(config: TrainConfig = DEFAULT, processes: int = 2,
              plain_threads: int = 1) -> tuple[float, float]:
    """Time the whole experiment with the plain loop and with the fast path; returns both wall times (s).

    Other people's work on the same cores slows whichever half runs while they work, so the halves
    alternate in two blocks of runs — first as many runs as there are processes (the slowest),
    then the rest, the fast path's usual schedule — plain, then fast, for each block; the fast
    path keeps its worker processes throughout. CPU times are printed too: they hardly depend on
    how busy the machine is.
    """
    jobs = {"plain": _jobs(replace(config, threads=plain_threads), fast=False),
            "fast": _jobs(config, fast=True)}
    blocks = [slice(0, processes), slice(processes, None)]
    wall, cpu = {"plain": 0.0, "fast": 0.0}, {"plain": 0.0, "fast": 0.0}
    done: dict[str, list] = {"plain": [], "fast": []}
    bar = tqdm(total=2 * len(jobs["fast"]) * config.epochs, desc="epochs (plain and fast)")
    children = _cpu_seconds(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    pool = _start_pool(processes)
    wall["fast"] += time.perf_counter() - start
    try:
        for block in blocks:
            for kind in ("plain", "fast"):
                start, start_cpu = time.perf_counter(), _cpu_seconds(resource.RUSAGE_SELF)
                if kind == "plain":
                    done[kind] += [_train_and_evaluate(*job, progress=lambda: bar.update(1))
                                   for job in jobs[kind][block]]
                else:
                    done[kind] += _run_in_pool(*pool, jobs[kind][block], bar)
                wall[kind] += time.perf_counter() - start
                cpu[kind] += _cpu_seconds(resource.RUSAGE_SELF) - start_cpu
    finally:
        start = time.perf_counter()
        pool[0].close()
        pool[0].join()  # reaped: the workers' CPU time now counts in RUSAGE_CHILDREN
        wall["fast"] += time.perf_counter() - start
    bar.close()
    cpu["fast"] += _cpu_seconds(resource.RUSAGE_CHILDREN) - children
    n_runs = len(jobs["fast"])
    print(f"plain loop: {n_runs} runs, batches of {config.batch_size} padded to their longest review, "
          f"one process of {plain_threads} thread(s): {wall['plain']:.1f} s ({cpu['plain']:.1f} s of CPU)")
    print(f"fast path:  {n_runs} runs, length buckets, {processes} processes of {config.threads} thread: "
          f"{wall['fast']:.1f} s ({cpu['fast']:.1f} s of CPU)")
    print(f"speed-up:   {wall['plain'] / wall['fast']:.2f}x in wall time "
          f"(and {cpu['plain'] / cpu['fast']:.2f}x less CPU work)")
    print_ranges(_results(config, done["plain"]), "accuracy, plain loop (min–max over seeds):")
    print_ranges(_results(config, done["fast"]), "accuracy, fast path (min–max over seeds):")
    return wall["plain"], wall["fast"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", action="store_true",
                        help="time the plain loop and the fast path on the whole experiment; saves nothing")
    parser.add_argument("--processes", type=int, default=2, help="worker processes of the fast path")
    parser.add_argument("--plain-threads", type=int, default=1,
                        help="torch threads of the plain loop in the benchmark")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="where weights and results go")
    args = parser.parse_args(argv)
    if args.benchmark:
        benchmark(DEFAULT, args.processes, args.plain_threads)
        return
    start = time.perf_counter()
    results = run_experiment(DEFAULT, processes=args.processes, out_dir=args.out)
    print_ranges(results, f"accuracy (min–max over seeds), written to {args.out}:")
    print(f"took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
