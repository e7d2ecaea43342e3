"""Lesson 09's two image classifiers, their training, and the shipped weights and results.

    python -m experiments.vision     # both models, seeds 0-2 -> data/vision/ (8 to 30 minutes on 2 cores)

- ``TinyViT``: a patch embedding (a convolution with kernel = stride = P), a learned [CLS] token
  and learned positions, pre-norm encoder blocks whose attention is written out so that the
  weights can be returned, and one logit read from [CLS].
- ``SmallCNN``: three blocks of two 3 × 3 convolutions and a 2 × 2 max-pool, then a small MLP.

Both read images ``(B, 1, 32, 32)`` and return one logit per image ``(B,)`` (label 1 if > 0).
Each run (a model and a seed) is trained in its own process with one thread, so the command
reproduces ``data/vision/`` exactly on the same machine.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import textwrap
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from torch import nn

from helpers import image_task, paths
from helpers.runtime import threads
from helpers.trained import span

DATA_DIR = paths.data_root() / "vision"
MODEL_NAMES = ("vit", "cnn")
SEEDS = (0, 1, 2)  # every model is trained once from each


# ---------------------------------------------------------------- the tiny ViT


@dataclass(frozen=True)
class ViTConfig:
    """A tiny Vision Transformer for one-channel square images."""

    image_size: int = image_task.IMAGE_SIZE
    patch_size: int = 4  # 8 × 8 = 64 patches, 65 tokens with [CLS]
    channels: int = 1
    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 4
    d_ff: int = 64


class Block(nn.Module):
    """One pre-norm encoder block: x + MHA(LN(x)), then x + FFN(LN(x)); can return the weights."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> (x (B, T, D), attention weights (B, H, T, T))."""
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(D, dim=-1)  # each (B, T, D)
        q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.n_heads)  # (B, H, T, T)
        weights = scores.softmax(dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        x = x + self.out(mixed)
        return x + self.ffn(self.norm2(x)), weights


class TinyViT(nn.Module):
    """Patches -> tokens (+[CLS], + positions) -> encoder blocks -> one logit from [CLS]."""

    def __init__(self, config: ViTConfig = ViTConfig()):
        super().__init__()
        if config.image_size % config.patch_size:
            raise ValueError(f"patch_size {config.patch_size} must divide image_size {config.image_size}")
        self.config = config
        n_patches = (config.image_size // config.patch_size) ** 2
        d = config.d_model
        # kernel = stride = P: each output position sees exactly one patch, i.e. a linear map per patch.
        self.patch_embed = nn.Conv2d(config.channels, d, config.patch_size, stride=config.patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.positions = nn.Parameter(0.02 * torch.randn(1, n_patches + 1, d))
        self.blocks = nn.ModuleList(Block(d, config.n_heads, config.d_ff) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 1)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """images (B, C, H, W) -> the encoder's input (B, 1 + N, D): [CLS] then the patches, + positions."""
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, D), row-major patches
        cls = self.cls.expand(len(images), -1, -1)  # (B, 1, D)
        return torch.cat([cls, patches], dim=1) + self.positions

    def forward(self, images: torch.Tensor, return_attention: bool = False):
        """images (B, C, H, W) -> logits (B,), and with ``return_attention`` the weights of every
        layer (L, B, H, T, T)."""
        x = self.tokens(images)
        maps = []
        for block in self.blocks:
            x, weights = block(x)
            maps.append(weights)
        logits = self.head(self.norm(x[:, 0])).squeeze(-1)  # read [CLS]
        return (logits, torch.stack(maps)) if return_attention else logits

    @torch.no_grad()
    def cls_attention(self, images: torch.Tensor) -> torch.Tensor:
        """How much [CLS] attends to each patch: (L, B, H, h, w) with h × w the patch grid."""
        _, maps = self(images, return_attention=True)  # (L, B, H, T, T)
        side = self.config.image_size // self.config.patch_size
        return maps[..., 0, 1:].reshape(*maps.shape[:3], side, side)


# ---------------------------------------------------------------- the small CNN


@dataclass(frozen=True)
class CNNConfig:
    """A small convolutional network: three conv blocks (32 -> 16 -> 8 -> 4 pixels) and an MLP."""

    channels: int = 1
    widths: tuple[int, ...] = (8, 16, 32)
    d_hidden: int = 32
    batch_norm: bool = True
    image_size: int = image_task.IMAGE_SIZE


class SmallCNN(nn.Module):
    """(conv 3×3, ReLU) × 2, max-pool 2×2, three times; flatten; Linear, ReLU, Linear -> one logit."""

    def __init__(self, config: CNNConfig = CNNConfig()):
        super().__init__()
        self.config = config
        layers, c_in = [], config.channels
        for c_out in config.widths:
            for c in (c_in, c_out):
                layers += [nn.Conv2d(c, c_out, 3, padding=1)]
                layers += [nn.BatchNorm2d(c_out)] if config.batch_norm else []
                layers += [nn.ReLU()]
            layers += [nn.MaxPool2d(2)]
            c_in = c_out
        self.features = nn.Sequential(*layers)
        side = config.image_size // 2 ** len(config.widths)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c_in * side * side, config.d_hidden), nn.ReLU(),
                                  nn.Linear(config.d_hidden, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """images (B, C, H, W) -> logits (B,)."""
        return self.head(self.features(images)).squeeze(-1)


def build(name: str) -> nn.Module:
    """A fresh model by name: "vit" or "cnn" (default configs)."""
    if name == "vit":
        return TinyViT()
    if name == "cnn":
        return SmallCNN()
    raise ValueError(f"unknown model {name!r}; choose one of {list(MODEL_NAMES)}")


def n_parameters(model: nn.Module) -> int:
    """The number of trainable numbers in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------- training


@dataclass(frozen=True)
class TrainConfig:
    """How both models are trained: AdamW, a linear warm-up then cosine decay, binary cross-entropy."""

    n_train: int = image_task.N_TRAIN
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_epochs: int = 2
    seed: int = 0  # initial weights and batch order
    threads: int = 1  # per model: the result does not depend on how many processes run

    def __post_init__(self) -> None:
        for name in ("n_train", "epochs", "batch_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")


DEFAULT = TrainConfig()


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 500) -> float:
    """Share of images (N, C, H, W) whose predicted label (logit > 0) equals ``labels`` (N,)."""
    model.eval()
    right = sum(int(((model(x) > 0).float() == y).sum())
                for x, y in zip(images.split(batch_size), labels.split(batch_size)))
    return right / len(labels)


def train(name: str, config: TrainConfig = DEFAULT, max_steps: int | None = None,
          log: Callable[[str], None] | None = None) -> tuple[nn.Module, list[float]]:
    """Train model ``name`` from scratch; return it and its test accuracy after each epoch.

    The test accuracy is only recorded, to draw the learning curves; nothing is chosen by it
    (the weights kept are those after the last epoch). ``max_steps`` stops early (for tests)."""
    with threads(config.threads):
        torch.manual_seed(config.seed)
        model = build(name)
        x, y = image_task.training_set(config.n_train).tensors()
        x_test, y_test = image_task.test_set().tensors()
        steps_per_epoch = math.ceil(len(y) / config.batch_size)
        total = config.epochs * steps_per_epoch
        warmup = config.warmup_epochs * steps_per_epoch
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / max(warmup, 1), 0.5 * (1 + math.cos(math.pi * s / total))))
        generator = torch.Generator().manual_seed(config.seed)
        loss_fn = nn.BCEWithLogitsLoss()
        history, step = [], 0
        for epoch in range(config.epochs):
            model.train()
            for index in torch.randperm(len(y), generator=generator).split(config.batch_size):
                loss = loss_fn(model(x[index]), y[index])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                step += 1
                if max_steps is not None and step >= max_steps:
                    model.eval()
                    return model, history
            history.append(accuracy(model, x_test, y_test))
            if log is not None:
                log(f"{name} epoch {epoch + 1}: loss {loss.item():.3f}, test accuracy {history[-1]:.3f}")
        model.eval()
        return model, history


# ---------------------------------------------------------------- the experiment and its files


def _print(line: str) -> None:
    print(line, flush=True)


def _train_and_save(name: str, config: TrainConfig, out_dir: Path, verbose: bool = True) -> dict:
    """Train ``name`` with ``config.seed``, save its weights to ``out_dir/<name>_seed<seed>.pt``;
    return its run's entry of the results."""
    start = time.perf_counter()
    model, history = train(name, config, log=_print if verbose else None)
    seconds = time.perf_counter() - start
    torch.save(model.state_dict(), weights_path(name, config.seed, out_dir))
    x, y = image_task.training_set(config.n_train).tensors()
    with threads(config.threads):
        train_accuracy = accuracy(model, x, y)
    return {"seed": config.seed, "test_accuracy": history[-1], "train_accuracy": train_accuracy,
            "history": history, "seconds": round(seconds, 1),
            "parameters": n_parameters(model), "config": asdict(model.config)}


def weights_path(name: str, seed: int, directory: Path = DATA_DIR) -> Path:
    """Where the weights of model ``name`` trained from ``seed`` are stored."""
    return Path(directory) / f"{name}_seed{seed}.pt"


def run_experiment(config: TrainConfig = DEFAULT, seeds: tuple[int, ...] = SEEDS, out_dir: Path = DATA_DIR,
                   processes: int = 2, verbose: bool = True) -> dict:
    """Train both models once per seed (in parallel processes, one thread each); write the weights
    and results.json. ``config.seed`` is replaced by each seed in turn."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(name, replace(config, seed=seed), out_dir, verbose) for seed in seeds for name in MODEL_NAMES]
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(min(processes, len(jobs))) as pool:
            entries = pool.starmap(_train_and_save, jobs)
    else:
        entries = [_train_and_save(*job) for job in jobs]
    models = {}
    for (name, *_), entry in zip(jobs, entries):
        model = models.setdefault(name, {"parameters": entry.pop("parameters"), "config": entry.pop("config"),
                                         "runs": []})
        entry.pop("parameters", None)
        entry.pop("config", None)
        model["runs"].append(entry)
    training = asdict(config)
    training.pop("seed")
    results = {
        "command": "python -m experiments.vision" + ("" if config.n_train == DEFAULT.n_train else " --sweep"),
        "task": {"image_size": image_task.IMAGE_SIZE, "n_train": config.n_train,
                 "n_test": image_task.N_TEST, "train_seed": image_task.TRAIN_SEED,
                 "test_seed": image_task.TEST_SEED, "shapes": list(image_task.SHAPE_NAMES)},
        "training": training,
        "seeds": list(seeds),
        "models": models,
        "seconds": round(time.perf_counter() - start, 1),
        "torch": torch.__version__,
    }
    text = json.dumps(results, indent=1) + "\n"
    (out_dir / "results.json").write_text(text)
    return json.loads(text)  # exactly what load_results will read back (lists, not tuples)


def load_results(directory: Path = DATA_DIR) -> dict:
    """The results written by ``run_experiment`` (by default the shipped ones in data/vision/)."""
    path = paths.require(directory, "python -m experiments.vision") / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python -m experiments.vision` to create it")
    return json.loads(path.read_text())


def load_model(name: str, seed: int = 0, directory: Path = DATA_DIR) -> nn.Module:
    """Model ``name`` trained from ``seed``, with the weights stored in ``directory`` (by default
    the shipped ones), in eval mode."""
    path = weights_path(name, seed, paths.require(directory, "python -m experiments.vision"))
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python -m experiments.vision` to create it")
    model = build(name)
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def ranges(results: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """Per model, the (lowest, highest) over the seeds of its final test and train accuracy."""
    out = {}
    for name, entry in results["models"].items():
        runs = entry["runs"]
        out[name] = {key: (min(r[key] for r in runs), max(r[key] for r in runs))
                     for key in ("test_accuracy", "train_accuracy")}
    return out


def first_epoch_at(history: list[float], level: float) -> int | None:
    """The first epoch (counted from 1) whose test accuracy reaches ``level``; None if none does."""
    return next((epoch for epoch, value in enumerate(history, start=1) if value >= level), None)


def runs_table(results: dict) -> str:
    """One line per model and seed: test and training accuracy, and the first epoch at 60, 90 and 99%."""
    levels = (0.6, 0.9, 0.99)
    lines = [f"{'model':>5} {'seed':>4} {'test':>7} {'train':>7}   first epoch at"
             + "".join(f"{level:>6.0%}" for level in levels)]
    for name, entry in results["models"].items():
        for run in entry["runs"]:
            firsts = [first_epoch_at(run["history"], level) for level in levels]
            accuracies = f"{run['test_accuracy']:>7.1%} {run['train_accuracy']:>7.1%}"
            lines.append(f"{name:>5} {run['seed']:>4} {accuracies}" + " " * 17
                         + "".join(f"{'never' if e is None else e:>6}" for e in firsts))
    return "\n".join(lines)


def run_summary(results: dict, chance: float = 0.55) -> dict[str, str]:
    """Per model, one sentence with the ranges over the seeds of what ``runs_table`` lists."""
    out = {}
    for name, entry in results["models"].items():
        runs = entry["runs"]
        test, train = ([r[key] for r in runs] for key in ("test_accuracy", "train_accuracy"))
        text = (f"{name}, {len(runs)} seeds: test accuracy {span(test, '.1%')}, "
                f"training accuracy {span(train, '.1%')}")
        stuck = [(first_epoch_at(r["history"], chance) or len(r["history"]) + 1) - 1 for r in runs]
        if max(stuck) > 0:
            text += f"; below {chance:.0%} (chance is 50%) for the first {span(stuck, 'd')} epochs"
        for level in (0.9, 0.99):
            firsts = [first_epoch_at(r["history"], level) for r in runs]
            if all(e is None for e in firsts):
                text += f"; never {level:.0%}"
            elif all(e is not None for e in firsts):
                text += f"; reaches {level:.0%} at epoch {span(firsts, 'd')}"
            else:
                text += f"; {level:.0%} in {sum(e is not None for e in firsts)} of {len(runs)} seeds"
        out[name] = text + "."
    return out


SWEEP_SIZES = (2_500, 5_000, 20_000)  # training-set sizes besides the default 10,000


def sweep_dir(n_train: int, directory: Path = DATA_DIR) -> Path:
    """Where the runs with ``n_train`` training images are stored (the default size: ``directory``)."""
    return Path(directory) if n_train == DEFAULT.n_train else Path(directory) / f"n_train_{n_train}"


def load_sweep(directory: Path = DATA_DIR) -> dict[int, dict]:
    """The results of every training-set size, by size: the default run and the sweep's."""
    sizes = sorted((DEFAULT.n_train, *SWEEP_SIZES))
    return {n: load_results(sweep_dir(n, directory)) for n in sizes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train lesson 09's tiny ViT and small CNN.")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for weights and results.json")
    parser.add_argument("--processes", type=int, default=2, help="runs trained side by side")
    parser.add_argument("--sweep", action="store_true",
                        help=f"instead, train on {', '.join(f'{n:,}' for n in SWEEP_SIZES)} images, "
                             "each size into its own n_train_N folder")
    args = parser.parse_args(argv)
    sizes = SWEEP_SIZES if args.sweep else (DEFAULT.n_train,)
    for n_train in sizes:
        out = sweep_dir(n_train, args.out)
        results = run_experiment(replace(DEFAULT, n_train=n_train), out_dir=out, processes=args.processes)
        for name, entry in results["models"].items():
            for run in entry["runs"]:
                print(f"n_train {n_train:,} {name} seed {run['seed']}: {entry['parameters']:,} parameters, "
                      f"test accuracy {run['test_accuracy']:.4f}, "
                      f"train accuracy {run['train_accuracy']:.4f}, {run['seconds']} s")
        print(f"total {results['seconds']} s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def plot_histories(results: dict, ax=None):
    """Test accuracy after each epoch, one line per model and seed, from ``load_results()``."""
    if ax is None:
        ax = plt.subplots(figsize=(5, 3.2), layout="constrained")[1]
    for colour, (name, entry) in zip(("C0", "C1", "C2"), results["models"].items()):
        for i, run in enumerate(entry["runs"]):
            epochs = range(1, len(run["history"]) + 1)
            label = f"{name}, {len(entry['runs'])} seeds ({entry['parameters']:,} parameters)"
            label = label if i == 0 else None
            ax.plot(epochs, run["history"], "o-", ms=2.5, lw=1.2, color=colour, alpha=0.8, label=label)
    ax.axhline(0.5, color="0.5", lw=0.8, ls=":", label="chance")
    ax.set_ylim(0.4, 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=8)
    return ax


def _by_size(sweep: dict[int, dict], name: str, key: str) -> dict[int, list[float]]:
    """{n_train: [the value of ``key`` of each seed's run]} for model ``name``."""
    return {n: [run[key] for run in results["models"][name]["runs"]] for n, results in sorted(sweep.items())}


def sweep_table(sweep: dict[int, dict]) -> str:
    """One line per training-set size: each model's test and training accuracy, ranges over the seeds."""
    names = list(next(iter(sweep.values()))["models"])
    head = f"{'images':>8}" + "".join(f"  {name + ' test':>13}  {name + ' train':>13}" for name in names)
    columns = [_by_size(sweep, name, key) for name in names for key in ("test_accuracy", "train_accuracy")]
    lines = [head]
    for n in sorted(sweep):
        lines.append(f"{n:>8,}" + "".join(f"  {span(column[n], '.1%'):>13}" for column in columns))
    return "\n".join(lines)


def _sizes(sizes: list[int]) -> str:
    """2,500 / 2,500 and 5,000 / 2,500, 5,000 and 10,000."""
    words = [f"{n:,}" for n in sizes]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def sweep_regimes(sweep: dict[int, dict], name: str, fitted: float = 0.95,
                  general: float = 0.9) -> dict[int, str]:
    """Per training-set size, what model ``name`` does in every seed: "generalises" (at least ``fitted``
    right on its training images and ``general`` on the test images), "memorises" (fits its training
    images, not the test images) or "underfits" (some seed below ``fitted`` on its own training images)."""
    test, train = _by_size(sweep, name, "test_accuracy"), _by_size(sweep, name, "train_accuracy")
    out = {}
    for n in sorted(sweep):
        if min(train[n]) < fitted:
            out[n] = "underfits"
        else:
            out[n] = "generalises" if min(test[n]) >= general else "memorises"
    return out


def sweep_reading(sweep: dict[int, dict], fitted: float = 0.95, general: float = 0.9,
                  width: int = 92) -> dict[str, str]:
    """Per model, a sentence computed from ``load_sweep()``: what it does at each training-set size
    (``sweep_regimes``) and its accuracies there, ranges over the seeds."""
    out = {}
    for name in next(iter(sweep.values()))["models"]:
        test, train = _by_size(sweep, name, "test_accuracy"), _by_size(sweep, name, "train_accuracy")
        regimes = sweep_regimes(sweep, name, fitted, general)
        groups: list[tuple[str, list[int]]] = []
        for n, regime in regimes.items():  # runs of consecutive sizes with the same regime
            if groups and groups[-1][0] == regime:
                groups[-1][1].append(n)
            else:
                groups.append((regime, [n]))
        parts = []
        for regime, sizes in groups:
            where = "at every size" if len(groups) == 1 else f"with {_sizes(sizes)} images"
            tests = [a for n in sizes for a in test[n]]
            trains = [a for n in sizes for a in train[n]]
            if regime == "generalises":
                parts.append(f"generalises {where} (test {span(tests, '.1%')})")
            elif regime == "memorises":
                parts.append(f"memorises its training images {where} ({span(trains, '.1%')} right on "
                             f"them, {span(tests, '.1%')} on new ones)")
            else:
                per_size = ", ".join(f"{span(test[n], '.1%')} with {n:,}" for n in sizes)
                parts.append(f"underfits {where} (training accuracy {span(trains, '.1%')}, below "
                             f"{fitted:.0%} in some seed); its test accuracy is {per_size}")
        out[name] = textwrap.fill(f"{name}: " + "; ".join(parts) + ".", width)
    return out


def plot_sweep(sweep: dict[int, dict], ax=None):
    """Test (solid) and training (dashed) accuracy against the number of training images, per seed."""
    if ax is None:
        ax = plt.subplots(figsize=(5.5, 3.4), layout="constrained")[1]
    sizes = sorted(sweep)
    for colour, name in zip(("C0", "C1", "C2"), next(iter(sweep.values()))["models"]):
        for key, style in (("test_accuracy", "o-"), ("train_accuracy", "s--")):
            values = _by_size(sweep, name, key)
            for seed in range(len(values[sizes[0]])):
                label = f"{name}, {key.split('_')[0]}" if seed == 0 else None
                ax.plot(sizes, [values[n][seed] for n in sizes], style, color=colour, ms=3, lw=1,
                        alpha=0.8, label=label)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.minorticks_off()
    ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
    ax.set_ylim(0.4, 1.02)
    ax.set_xlabel("training images")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8)
    return ax
