"""Lesson 03 in training: one attention layer at d_k = 128 learns a lookup, with and without √d_k.

    python -m experiments.scaled_lookup           # 2 variants x 3 seeds, two processes -> data/scaled_lookup/
    python -m experiments.scaled_lookup --spread  # seeds 0-5 on four kernel paths -> …/spread.json

The task: 16 pairs (key, value), keys all different (from 32 symbols), values from 16 symbols,
and a query that names one of the 16 keys; the answer is the value stored under it. Nothing but
attention can find it: the model must learn to put its weight on the pair whose key matches
the query.

The model: each pair is one token, ``(E_key[key] + E_value[value]) / √2``; the query is the
token ``E_key[query]`` (embeddings of unit-variance components). One head with
``W_Q, W_K, W_V`` of shape ``(d_model, d_k)``, drawn with standard deviation ``1/√d_model`` so
that every component of ``q`` and ``k`` starts with variance about 1 — the variance argument's
assumption —, then a linear read-out of the attention output to the 16 values. The two
variants differ only in the scores: ``q·k / √d_k`` ("scaled") or ``q·k`` ("unscaled"). A run's
seed sets the initial weights and the stream of lookups, so both variants of one seed start from
the same weights and see the same batches: Adam at the same learning rate, 400 steps of 64 fresh
lookups, cross-entropy.

Recorded per run: the loss of every step; every ``probe_every`` steps, on 256 fixed lookups,
the mean attention weight on the right pair and the mean largest weight; the spread of the
scores before training; the accuracy on 1,000 fresh lookups after training. One thread a run:
the command rewrites ``data/scaled_lookup/results.json`` byte for byte on the same machine.
``--spread`` trains seeds 0-5 of both variants again under each kernel path of
``experiments.kernels`` (the same runs, floats rounded four ways): what the lesson says of the
shipped runs must hold on every path.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from experiments import kernels
from helpers import paths
from helpers.runtime import threads

DATA_DIR = paths.data_root() / "scaled_lookup"
COMMAND = "python -m experiments.scaled_lookup"
VARIANTS: tuple[tuple[str, bool], ...] = (("scaled", True), ("unscaled", False))  # (name, divide by √d_k?)


@dataclass(frozen=True)
class LookupConfig:
    """The experiment's settings; the defaults are what ``data/scaled_lookup/`` holds."""

    d_model: int = 128
    d_k: int = 128  # one head: the width of q and k
    n_keys: int = 32
    n_values: int = 16
    n_pairs: int = 16
    batch: int = 64
    steps: int = 400
    lr: float = 1e-3  # Adam, the same for both variants
    probe_every: int = 10
    n_probe: int = 256
    n_eval: int = 1000
    seeds: tuple[int, ...] = (0, 1, 2)


def lookups(n: int, config: LookupConfig, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """n lookups: keys (n, P) all different in a row, values (n, P), the query key (n,), the answer (n,)."""
    keys = torch.argsort(torch.rand(n, config.n_keys, generator=generator), dim=1)[:, : config.n_pairs]
    values = torch.randint(0, config.n_values, (n, config.n_pairs), generator=generator)
    pick = torch.randint(0, config.n_pairs, (n, 1), generator=generator)  # which pair is asked for
    return keys, values, keys.gather(1, pick)[:, 0], values.gather(1, pick)[:, 0]


class LookupModel(nn.Module):
    """Pair tokens, one head, a read-out: (keys, values, query) -> (logits (B, V), weights (B, P))."""

    def __init__(self, config: LookupConfig, scaled: bool):
        super().__init__()
        c = config
        self.key_embedding = nn.Embedding(c.n_keys, c.d_model)  # N(0, 1) components
        self.value_embedding = nn.Embedding(c.n_values, c.d_model)
        self.w_q, self.w_k, self.w_v = (nn.Parameter(torch.randn(c.d_model, c.d_k) / math.sqrt(c.d_model))
                                        for _ in range(3))
        self.out = nn.Linear(c.d_k, c.n_values)
        self.divisor = math.sqrt(c.d_k) if scaled else 1.0

    def scores(self, keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """The query's scores against the P pair tokens (B, P), divided by √d_k if scaled."""
        x = (self.key_embedding(keys) + self.value_embedding(values)) / math.sqrt(2)  # (B, P, D)
        q = self.key_embedding(query) @ self.w_q  # (B, d_k)
        k = x @ self.w_k  # (B, P, d_k)
        return torch.einsum("bd,bpd->bp", q, k) / self.divisor

    def forward(self, keys: torch.Tensor, values: torch.Tensor,
                query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = (self.key_embedding(keys) + self.value_embedding(values)) / math.sqrt(2)  # (B, P, D)
        weights = self.scores(keys, values, query).softmax(-1)  # (B, P)
        mixed = torch.einsum("bp,bpd->bd", weights, x @ self.w_v)  # (B, d_k)
        return self.out(mixed), weights


def _probe(model: LookupModel, probe: tuple[torch.Tensor, ...]) -> tuple[float, float]:
    """Mean weight on the pair the query names, and mean largest weight, over the probe lookups."""
    keys, values, query, _ = probe
    with torch.no_grad():
        _, weights = model(keys, values, query)
    right = (keys == query[:, None]).float()  # (N, P): one 1 per row
    return (weights * right).sum(-1).mean().item(), weights.max(-1).values.mean().item()


def train_run(scaled: bool, seed: int, config: LookupConfig = LookupConfig()) -> dict:
    """Train one variant for one seed; return its losses, probes, initial score spread and accuracy."""
    with threads(1):
        torch.manual_seed(seed)
        model = LookupModel(config, scaled)
        data = torch.Generator().manual_seed(1000 + seed)
        probe = lookups(config.n_probe, config, torch.Generator().manual_seed(20_000 + seed))
        with torch.no_grad():
            score_std = model.scores(*probe[:3]).std().item()
        optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
        losses, on_right, largest = [], [], []
        for step in range(config.steps):
            if step % config.probe_every == 0:
                right, top = _probe(model, probe)
                on_right.append(right)
                largest.append(top)
            keys, values, query, answer = lookups(config.batch, config, data)
            loss = F.cross_entropy(model(keys, values, query)[0], answer)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
        test = torch.Generator().manual_seed(10_000 + seed)
        keys, values, query, answer = lookups(config.n_eval, config, test)
        with torch.no_grad():
            accuracy = (model(keys, values, query)[0].argmax(-1) == answer).float().mean().item()
    return {"scaled": scaled, "seed": seed, "loss": losses, "weight_on_right": on_right,
            "largest_weight": largest, "score_std": score_std, "accuracy": accuracy}


def _job(args: tuple[bool, int, LookupConfig]) -> dict:
    return train_run(*args)


def run_experiment(config: LookupConfig = LookupConfig(), processes: int = 2) -> dict:
    """Both variants for every seed, spread over ``processes`` processes of one thread each."""
    jobs = [(scaled, seed, config) for seed in config.seeds for _, scaled in VARIANTS]
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            runs = pool.map(_job, jobs, chunksize=1)
    else:
        runs = [_job(job) for job in jobs]
    return {"command": COMMAND, "config": asdict(config), "torch": torch.__version__, "runs": runs}


SPREAD_FILE = "spread.json"
SPREAD_SEEDS = tuple(range(6))


def _run_on_path(scaled: bool, seed: int, config: LookupConfig) -> dict:
    return {**train_run(scaled, seed, config), **kernels.this_path()}


def run_spread(config: LookupConfig = LookupConfig(seeds=SPREAD_SEEDS),
               kernel_paths: Sequence[str] = tuple(kernels.KERNEL_PATHS), processes: int = 2) -> dict:
    """Both variants for every seed of ``config`` under each kernel path: {"paths": {path: results}}."""
    jobs = [(scaled, seed, config) for seed in config.seeds for _, scaled in VARIANTS]
    by_path = {}
    for path in kernel_paths:
        by_path[path] = {"command": COMMAND, "config": asdict(config), "torch": torch.__version__,
                         "runs": kernels.run_under(path, _run_on_path, jobs, processes)}
    return {"command": f"{COMMAND} --spread", "paths": by_path,
            "kernel_paths": {p: kernels.KERNEL_PATHS[p] for p in kernel_paths}}


def load_spread(data_dir: Path = DATA_DIR) -> dict:
    """The runs of ``run_spread`` as shipped (``data/scaled_lookup/spread.json``)."""
    return paths.read_results(data_dir, f"{COMMAND} --spread", SPREAD_FILE)


def save(results: dict, out_dir: Path = DATA_DIR) -> Path:
    return paths.write_results(out_dir, results)


def load_results(data_dir: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment``."""
    return paths.read_results(data_dir, COMMAND)


def runs_of(results: dict, name: str) -> list[dict]:
    """The runs (one per seed) of the variant called ``name``: "scaled" or "unscaled"."""
    scaled = dict(VARIANTS)[name]
    return [r for r in results["runs"] if r["scaled"] == scaled]


def final_loss(run: dict, last: int = 20) -> float:
    """The mean training loss of the last ``last`` steps of a run."""
    return float(np.mean(run["loss"][-last:]))


def steps_to(run: dict, loss: float = 0.1, window: int = 10) -> int | None:
    """The first step at which the mean loss of ``window`` steps falls below ``loss``; None if never."""
    smooth = np.convolve(run["loss"], np.ones(window) / window, mode="valid")
    below = np.nonzero(smooth < loss)[0]
    return int(below[0]) + window if below.size else None


def steps_to_look(run: dict, share: float = 0.5, every: int = LookupConfig.probe_every) -> int | None:
    """The first probed step with ``share`` of the query's weight on the right pair; None if never."""
    reached = np.nonzero(np.asarray(run["weight_on_right"]) >= share)[0]
    return int(reached[0]) * every if reached.size else None


def _span(values: Sequence[float], fmt: str) -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def _steps(reached: Sequence[int | None], steps: int) -> str:
    done = sorted(s for s in reached if s is not None)
    text = _span(done, "d") + " steps" if done else ""
    missed = len(reached) - len(done)
    if missed:
        text += f" in {_seeds(len(done))}, " if done else ""
        text += f"not within {steps} steps in {_seeds(missed)}"
    return text


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def summary_markdown(results: dict) -> str:
    """A Markdown table, per variant the range over the seeds of: score spread and largest weight at
    step 0, weight on the right pair at step 0 and at the end, steps to half of it and to a loss of
    0.1, final loss, accuracy."""
    c = results["config"]
    steps = c["steps"]
    columns = {name: runs_of(results, name) for name, _ in VARIANTS}
    rows = [f"| {len(c['seeds'])} seeds, d_k = {c['d_k']} | q·k / √d_k (scaled) | q·k (unscaled) |",
            "|---|---|---|"]
    for label, cell in (
        ("spread of the scores at step 0", lambda rs: _span([r["score_std"] for r in rs], ".2f")),
        ("largest weight at step 0", lambda rs: _span([r["largest_weight"][0] for r in rs], ".2f")),
        ("weight on the right pair, step 0", lambda rs: _span([r["weight_on_right"][0] for r in rs], ".2f")),
        ("weight on the right pair, end", lambda rs: _span([r["weight_on_right"][-1] for r in rs], ".2f")),
        (f"steps to half the weight on it (probed every {c['probe_every']})",
         lambda rs: _steps([steps_to_look(r, every=c["probe_every"]) for r in rs], steps)),
        ("steps to a loss of 0.1", lambda rs: _steps([steps_to(r) for r in rs], steps)),
        ("loss, last 20 steps", lambda rs: _span([final_loss(r) for r in rs], ".3f")),
        ("accuracy, 1,000 fresh lookups", lambda rs: _span([100 * r["accuracy"] for r in rs], ".1f") + "%"),
    ):
        rows.append(f"| {label} | " + " | ".join(cell(rs) for rs in columns.values()) + " |")
    return "\n".join(rows)


def _compare(reach: dict[str, list[int | None]], what: str, steps: int) -> str:
    """One sentence: how many steps each variant took to reach ``what``, and whether they overlap."""
    never = steps + 1  # a run that never got there counts as later than the last step
    slowest_scaled = max(s if s is not None else never for s in reach["scaled"])
    fastest_unscaled = min(s if s is not None else never for s in reach["unscaled"])
    if slowest_scaled == fastest_unscaled == never:
        return f"No run {what} within {steps} steps."
    if slowest_scaled < fastest_unscaled:
        return (f"Every scaled run {what} in {_steps(reach['scaled'], steps)}, every unscaled run later: "
                f"{_steps(reach['unscaled'], steps)}, at least {fastest_unscaled / slowest_scaled:.1f} "
                "times as many steps.")
    return (f"The scaled runs {what} in {_steps(reach['scaled'], steps)}, the unscaled ones in "
            f"{_steps(reach['unscaled'], steps)}: the two overlap, no clear difference.")


def reading(results: dict, looked: float = 0.9) -> str:
    """What the runs show, in sentences computed from the file."""
    c = results["config"]
    scaled, unscaled = runs_of(results, "scaled"), runs_of(results, "unscaled")
    sentences = [
        f"Before training, at d_k = {c['d_k']}, the unscaled scores spread "
        f"{_span([r['score_std'] for r in unscaled], '.1f')} (√{c['d_k']} = {math.sqrt(c['d_k']):.1f}) and "
        f"the scaled ones {_span([r['score_std'] for r in scaled], '.2f')}; the largest of the "
        f"{c['n_pairs']} weights averages {_span([r['largest_weight'][0] for r in unscaled], '.2f')} "
        f"without the scale and {_span([r['largest_weight'][0] for r in scaled], '.2f')} with it, "
        f"while the right pair gets {_span([r['weight_on_right'][0] for r in unscaled + scaled], '.2f')} "
        f"in both, about 1/{c['n_pairs']}: the unscaled softmax starts nearly one-hot on a pair "
        "chosen by chance.",
        _compare({name: [steps_to_look(r, every=c["probe_every"]) for r in runs_of(results, name)]
                  for name, _ in VARIANTS}, "puts half of its weight on the right pair", c["steps"]),
        _compare({name: [steps_to(r) for r in runs_of(results, name)] for name, _ in VARIANTS},
                 "reaches a loss of 0.1", c["steps"]),
        f"After {c['steps']} steps the weight on the right pair is "
        f"{_span([r['weight_on_right'][-1] for r in scaled], '.2f')} with the scale and "
        f"{_span([r['weight_on_right'][-1] for r in unscaled], '.2f')} without, and the accuracy on "
        f"{c['n_eval']:,} fresh lookups {_span([100 * r['accuracy'] for r in scaled], '.1f')}% and "
        f"{_span([100 * r['accuracy'] for r in unscaled], '.1f')}%."]
    behind = sum(r["weight_on_right"][-1] < looked for r in unscaled)
    if behind:
        sentences.append(f"In {_seeds(behind)} the unscaled model has still not learned where to look "
                         f"(less than {looked:.0%} of the weight on the right pair).")
    else:
        sentences.append("So the unscaled model does learn where to look in the end: here the saturated "
                         "start slows learning down, it does not prevent it.")
    return " ".join(sentences)


def spread_reading(spread: dict) -> str:
    """What the runs of every seed on every kernel path show, in sentences computed from the file."""
    by_path = spread["paths"]
    every = next(iter(by_path.values()))["config"]["probe_every"]
    steps = next(iter(by_path.values()))["config"]["steps"]
    look = {name: [steps_to_look(r, every=every) for res in by_path.values() for r in runs_of(res, name)]
            for name, _ in VARIANTS}
    loss = {name: [steps_to(r) for res in by_path.values() for r in runs_of(res, name)]
            for name, _ in VARIANTS}
    n = len(look["scaled"])
    seeds = sorted({r["seed"] for res in by_path.values() for r in res["runs"]})
    ordered = all(max(steps_to_look(r, every=every) or steps + 1 for r in runs_of(res, "scaled"))
                  < min(steps_to_look(r, every=every) or steps + 1 for r in runs_of(res, "unscaled"))
                  for res in by_path.values())
    def reached(values: list[int | None]) -> str:
        done = [v for v in values if v is not None]
        text = f"{_span(done, 'd')} steps" if done else "no run"
        return text + (f" ({len(values) - len(done)} of {len(values)} runs not within {steps})"
                       if len(done) < len(values) else "")

    text = (f"On {len(by_path)} kernel paths of one machine, seeds {seeds[0]}–{seeds[-1]} on each ({n} runs "
            f"of each variant, the floats rounded {len(by_path)} ways): the scaled head puts half of its "
            f"weight on the right pair in {reached(look['scaled'])}, the unscaled one in "
            f"{reached(look['unscaled'])}")
    text += (", and on every path every scaled run gets there before every unscaled run." if ordered else
             "; on some path an unscaled run gets there before a scaled one.")
    return text + (f" A loss of 0.1: scaled in {reached(loss['scaled'])}, "
                   f"unscaled in {reached(loss['unscaled'])}.")


_STYLE = {"scaled": "#4c72b0", "unscaled": "#c44e52"}


def plot_scaled_lookup(results: dict, axes=None):
    """Left: training loss per variant (median line, band = min to max over seeds). Right: the
    mean attention weight on the right pair, on the probe lookups, over training."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")[1]
    c = results["config"]
    for name, _ in VARIANTS:
        colour = _STYLE[name]
        label = f"q·k / √{c['d_k']}" if name == "scaled" else "q·k (unscaled)"
        loss = np.array([r["loss"] for r in runs_of(results, name)])  # (S, steps)
        steps = np.arange(1, loss.shape[1] + 1)
        axes[0].fill_between(steps, loss.min(0), loss.max(0), color=colour, alpha=0.15, lw=0)
        axes[0].plot(steps, np.median(loss, 0), color=colour, label=label)
        right = np.array([r["weight_on_right"] for r in runs_of(results, name)])  # (S, probes)
        at = np.arange(right.shape[1]) * c["probe_every"]
        axes[1].fill_between(at, right.min(0), right.max(0), color=colour, alpha=0.15, lw=0)
        axes[1].plot(at, np.median(right, 0), color=colour, label=label)
    chance = np.log(c["n_values"])
    axes[0].axhline(chance, color="0.5", lw=0.8, ls=":")
    axes[0].text(0.99, chance, "guessing", transform=axes[0].get_yaxis_transform(), ha="right",
                 va="bottom", fontsize=8, color="0.4")
    axes[0].set_ylim(0, chance + 0.6)
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("cross-entropy")
    axes[0].set_title(f"training loss, d_k = {c['d_k']}, {len(c['seeds'])} seeds")
    axes[1].axhline(1 / c["n_pairs"], color="0.5", lw=0.8, ls=":")
    axes[1].text(0.99, 1 / c["n_pairs"], f"uniform, 1/{c['n_pairs']}",
                 transform=axes[1].get_yaxis_transform(),
                 ha="right", va="bottom", fontsize=8, color="0.4")
    axes[1].set_ylim(0, 1.02)
    axes[1].set_xlabel("training step")
    axes[1].set_ylabel("weight on the right pair")
    axes[1].set_title("where the query looks")
    for ax in axes:
        ax.legend(fontsize=8, loc="center right")
    return axes


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for results.json")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--spread", action="store_true",
                        help=f"seeds {SPREAD_SEEDS[0]}-{SPREAD_SEEDS[-1]} on every kernel path "
                             f"-> {SPREAD_FILE}")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.spread:
        spread = run_spread(processes=args.processes)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / SPREAD_FILE).write_text(json.dumps(spread, separators=(",", ":")) + "\n")
        for path, results in spread["paths"].items():
            print(f"{path}: {reading(results)}")
        print(f"wrote {args.out / SPREAD_FILE}; took {time.perf_counter() - start:.1f} s")
        return
    path = save(run_experiment(processes=args.processes), args.out)
    results = load_results(args.out)
    print(summary_markdown(results))
    print(reading(results))
    print(f"wrote {path}; took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
