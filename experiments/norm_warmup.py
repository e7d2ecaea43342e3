"""Post-norm against pre-norm, trained with and without a learning-rate warm-up (lesson 07).

    python -m experiments.norm_warmup      # 2 placements x 2 schedules x 3 seeds -> data/norm_warmup/

The task: read 10 random tokens (16 symbols) and write them out reversed, one answer per
position — a job only attention can do, since every output needs a token from elsewhere. The
model: a token embedding and a learned position embedding, a stack of 12
``nn.TransformerEncoderLayer`` (width 32, 4 heads, FFN 128, dropout 0; a final LayerNorm after
a pre-norm stack, as in GPT-2), and a linear read-out. Every run: Adam at learning rate 5e-3,
200 steps of 32 fresh sequences, cross-entropy; "warm-up" raises the learning rate linearly from
0 over the first 50 steps, "no warm-up" starts at full rate. A run's seed sets the initial weights
and the sequences, so the four variants of one seed start from the same draw of the data.

Recorded per run: the loss of every step, the gradient norm of each layer's weights at step 0
(before any update) and the token accuracy on 1,000 fresh sequences after training.
"""

from __future__ import annotations

import argparse
import multiprocessing
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from helpers import paths
from helpers.runtime import threads

DATA_DIR = paths.data_root() / "norm_warmup"
COMMAND = "python -m experiments.norm_warmup"
VARIANTS: tuple[tuple[str, bool, bool], ...] = (  # (name, norm_first, warm-up)
    ("post-norm, no warm-up", False, False), ("post-norm, warm-up", False, True),
    ("pre-norm, no warm-up", True, False), ("pre-norm, warm-up", True, True))


@dataclass(frozen=True)
class NormConfig:
    """The experiment's settings; the defaults are what ``data/norm_warmup/`` holds."""

    n_layers: int = 12
    d_model: int = 32
    n_heads: int = 4
    length: int = 10
    vocab: int = 16
    batch: int = 32
    steps: int = 200
    lr: float = 5e-3
    warmup_steps: int = 50
    n_eval: int = 1000
    seeds: tuple[int, ...] = (0, 1, 2)


class ReverseModel(nn.Module):
    """Embeddings, a stack of encoder layers (post- or pre-norm), a linear read-out: (B, T) -> (B, T, V)."""

    def __init__(self, config: NormConfig, norm_first: bool):
        super().__init__()
        c = config
        self.embedding = nn.Embedding(c.vocab, c.d_model)
        self.positions = nn.Embedding(c.length, c.d_model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nn's note about nested tensors and norm_first
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(c.d_model, c.n_heads, 4 * c.d_model, dropout=0.0,
                                           batch_first=True, norm_first=norm_first)
                for _ in range(c.n_layers))
        self.final = nn.LayerNorm(c.d_model) if norm_first else nn.Identity()
        self.out = nn.Linear(c.d_model, c.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embedding(tokens) + self.positions.weight[: tokens.shape[1]]  # (B, T, D)
        for layer in self.layers:
            h = layer(h)
        return self.out(self.final(h))  # (B, T, V)


def sequences(n: int, config: NormConfig, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n random sequences (n, T) and their reversals, the targets (n, T)."""
    x = torch.randint(0, config.vocab, (n, config.length), generator=generator)
    return x, x.flip(1)


def layer_gradients(model: ReverseModel) -> list[float]:
    """L2 norm of the gradient of each encoder layer's weights (LayerNorms left out)."""
    return [torch.cat([p.grad.flatten() for name, p in layer.named_parameters() if "norm" not in name])
            .norm().item() for layer in model.layers]


def train_run(norm_first: bool, warmup: bool, seed: int, config: NormConfig = NormConfig()) -> dict:
    """Train one variant for one seed; return its losses, step-0 gradient norms and accuracy."""
    with threads(1):
        torch.manual_seed(seed)
        model = ReverseModel(config, norm_first)
        data = torch.Generator().manual_seed(1000 + seed)
        optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
        ramp = config.warmup_steps if warmup else 0
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda step: min(1.0, (step + 1) / ramp) if ramp else 1.0)
        losses, first_gradients = [], None
        for _ in range(config.steps):
            x, y = sequences(config.batch, config, data)
            loss = F.cross_entropy(model(x).reshape(-1, config.vocab), y.reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            if first_gradients is None:
                first_gradients = layer_gradients(model)
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
        x, y = sequences(config.n_eval, config, torch.Generator().manual_seed(10_000 + seed))
        with torch.no_grad():
            accuracy = (model(x).argmax(-1) == y).float().mean().item()
    return {"norm_first": norm_first, "warmup": warmup, "seed": seed, "loss": losses,
            "step0_gradients": first_gradients, "accuracy": accuracy}


def _job(args: tuple[bool, bool, int, NormConfig]) -> dict:
    return train_run(*args)


def run_experiment(config: NormConfig = NormConfig(), processes: int = 2) -> dict:
    """Every variant for every seed, spread over ``processes`` processes of one thread each."""
    jobs = [(nf, wu, s, config) for s in config.seeds for _, nf, wu in VARIANTS]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        runs = pool.map(_job, jobs)
    return {"command": COMMAND, "config": asdict(config), "torch": torch.__version__, "runs": runs}


def save(results: dict, out_dir: Path = DATA_DIR) -> Path:
    return paths.write_results(out_dir, results)


def load_results(data_dir: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment``."""
    return paths.read_results(data_dir, COMMAND)


def runs_of(results: dict, name: str) -> list[dict]:
    """The runs (one per seed) of the variant called ``name`` (see ``VARIANTS``)."""
    _, norm_first, warmup = next(v for v in VARIANTS if v[0] == name)
    return [r for r in results["runs"] if r["norm_first"] == norm_first and r["warmup"] == warmup]


def final_loss(run: dict, last: int = 20) -> float:
    """The mean training loss of the last ``last`` steps of a run."""
    return float(np.mean(run["loss"][-last:]))


def summary(results: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """Per variant, (min, max) over seeds of: final loss, accuracy, and the top layer's step-0 gradient."""
    out = {}
    for name, *_ in VARIANTS:
        runs = runs_of(results, name)
        out[name] = {key: (min(values), max(values)) for key, values in (
            ("final loss", [final_loss(r) for r in runs]),
            ("accuracy", [r["accuracy"] for r in runs]),
            ("top-layer gradient", [r["step0_gradients"][-1] for r in runs]))}
    return out


def steps_to(run: dict, loss: float = 0.5, window: int = 10) -> int | None:
    """The first step at which the mean loss of ``window`` steps falls below ``loss``; None if never."""
    smooth = np.convolve(run["loss"], np.ones(window) / window, mode="valid")
    below = np.nonzero(smooth < loss)[0]
    return int(below[0]) + window if below.size else None


_STYLE = {"post-norm, no warm-up": ("#c44e52", "-"), "post-norm, warm-up": ("#c44e52", "--"),
          "pre-norm, no warm-up": ("#4c72b0", "-"), "pre-norm, warm-up": ("#4c72b0", "--")}


def plot_norm_warmup(results: dict, axes=None):
    """Left: training loss per variant (median line, band = min to max over seeds). Right: the
    gradient norm of each layer at step 0, post- against pre-norm (band over seeds)."""
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")[1]
    for name, *_ in VARIANTS:
        colour, style = _STYLE[name]
        loss = np.array([r["loss"] for r in runs_of(results, name)])  # (S, steps)
        steps = np.arange(1, loss.shape[1] + 1)
        axes[0].fill_between(steps, loss.min(0), loss.max(0), color=colour, alpha=0.15, lw=0)
        axes[0].plot(steps, np.median(loss, 0), color=colour, ls=style, label=name)
    chance = np.log(results["config"]["vocab"])
    axes[0].axhline(chance, color="0.5", lw=0.8, ls=":")
    # at the right end, where trained curves have left the guessing line
    axes[0].text(0.99, chance, "guessing", transform=axes[0].get_yaxis_transform(), ha="right",
                 va="bottom", fontsize=8, color="0.4")
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("cross-entropy")
    axes[0].set_ylim(0, chance + 0.5)
    c = results["config"]
    axes[0].set_title(f"training, {c['n_layers']} layers, {len(c['seeds'])} seeds")
    for name in ("post-norm, no warm-up", "pre-norm, no warm-up"):  # step 0 comes before any warm-up
        grads = np.array([r["step0_gradients"] for r in runs_of(results, name)])  # (S, L)
        layers = np.arange(1, grads.shape[1] + 1)
        colour = _STYLE[name][0]
        label = name.split(",")[0]
        axes[1].fill_between(layers, grads.min(0), grads.max(0), color=colour, alpha=0.2, lw=0)
        axes[1].plot(layers, np.median(grads, 0), color=colour, marker="o", ms=4, label=label)
    axes[1].set_xlabel("layer (1 = nearest the input)")
    axes[1].set_ylabel("‖∂loss/∂weights of the layer‖")
    axes[1].set_title("gradients at step 0, before any update")
    axes[1].set_ylim(bottom=0)
    for ax in axes:
        ax.legend(fontsize=8)
    return axes


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for results.json")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    path = save(run_experiment(processes=args.processes), args.out)
    print(f"wrote {path}")
    for name, ranges in summary(load_results(args.out)).items():
        print(f"{name:>22}: " + ", ".join(f"{k} {lo:.3f}–{hi:.3f}" for k, (lo, hi) in ranges.items()))


if __name__ == "__main__":
    main()
