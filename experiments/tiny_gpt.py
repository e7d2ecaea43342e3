"""Lesson 11's longer run: the TinyGPT of ``helpers.gpt`` trained on the course's prose, 3 seeds.

    python -m experiments.tiny_gpt            # 3 seeds over two processes -> data/tiny_gpt/
    python -m experiments.tiny_gpt --corpus   # rewrites data/tiny_gpt/corpus.txt from lessons 01-10 first

The corpus is the prose of the course's lessons 01-10 (their Markdown cells, the hand-graded
answers' mark schemes left out), MIT-licensed as the course is; ``--corpus`` extracts it again
from ``solutions/`` (which changes it whenever a lesson's prose changes, so the shipped runs are
trained on the shipped file). Every run: the loop of lesson 11 with the course's references
(``shift_targets``, ``lm_loss``, ``lr_at``, ``train_step``), AdamW, warm-up then cosine decay,
gradients clipped to norm 1, dropout 0.1, one thread; the seed sets the initial weights, the
dropout and the batches. Recorded per seed: the training loss of every step, the validation loss
every ``eval_every`` steps, and a sample; the weights.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from helpers import gpt, paths
from helpers.runtime import threads

DATA_DIR = gpt.DATA_DIR
COMMAND = "python -m experiments.tiny_gpt"
PROMPT = "Attention "


@dataclass(frozen=True)
class RunConfig:
    """How one run trains: the model's shape, the schedule, the batches, the evaluation."""

    block_size: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 3
    dropout: float = 0.1
    batch: int = 32
    steps: int = 1200
    peak_lr: float = 3e-3
    warmup_steps: int = 100
    min_lr: float = 3e-4
    weight_decay: float = 0.1
    max_norm: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8  # of 64 windows each, the same for every run and every evaluation
    sample_chars: int = 300
    sample_temperature: float = 0.8
    sample_top_k: int = 10
    seeds: tuple[int, ...] = (0, 1, 2)

    def model_config(self, vocab: int) -> gpt.GPTConfig:
        return gpt.GPTConfig(
            vocab=vocab,
            block_size=self.block_size,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            dropout=self.dropout,
        )


DEFAULT = RunConfig()


def extract_corpus(root: Path = paths.CHECKOUT_DATA.parent) -> str:
    """The Markdown of lessons 01-10 (mark schemes left out), one lesson after another."""
    import jupytext

    parts = []
    for source in sorted((root / "solutions").glob("[01][0-9]_*/[01][0-9]_*.py")):
        if source.parent.name >= "11":
            continue
        cells = jupytext.read(source).cells
        parts += [
            c.source.strip() for c in cells if c.cell_type == "markdown" and "MARK SCHEME" not in c.source
        ]
    return re.sub(r"\n{3,}", "\n\n", "\n\n".join(parts)) + "\n"


def validation_batches(corpus: gpt.Corpus, config: RunConfig = DEFAULT) -> list[torch.Tensor]:
    """The fixed validation windows every evaluation uses: ``eval_batches`` of (64, block_size + 1)."""
    generator = torch.Generator().manual_seed(12345)
    return [
        gpt.random_windows(corpus.val, 64, config.block_size + 1, generator)
        for _ in range(config.eval_batches)
    ]


@torch.no_grad()
def evaluate(model: gpt.TinyGPT, batches: Sequence[torch.Tensor]) -> float:
    """Mean lm_loss over ``batches`` with dropout off."""
    was_training = model.training
    model.eval()
    losses = [gpt.lm_loss(model(x), y).item() for x, y in map(gpt.shift_targets, batches)]
    model.train(was_training)
    return float(np.mean(losses))


def sample_text(
    model: gpt.TinyGPT,
    corpus: gpt.Corpus,
    config: RunConfig = DEFAULT,
    seed: int = 0,
    n_chars: int | None = None,
) -> str:
    """``PROMPT`` and ``n_chars`` characters after it, with the cache, at the config's temperature and
    top-k. Past the model's context it continues from the last ``block_size / 2`` characters."""
    n_chars = n_chars or config.sample_chars
    chunk = config.block_size // 2
    tokens = corpus.encode(PROMPT)[None]  # (1, T0)
    start, part = tokens.shape[1], 0
    while tokens.shape[1] - start < n_chars:
        out = gpt.generate(
            model,
            tokens[:, -chunk:],
            chunk,
            temperature=config.sample_temperature,
            top_k=config.sample_top_k,
            seed=1000 * seed + part,
        )
        tokens, part = torch.cat([tokens, out.tokens[:, -chunk:]], dim=1), part + 1
    return corpus.decode(tokens[0, : start + n_chars])


def train(
    seed: int, config: RunConfig = DEFAULT, corpus: gpt.Corpus | None = None, log=None
) -> tuple[gpt.TinyGPT, dict]:
    """One run: the model and its record (losses, validation losses, sample)."""
    corpus = corpus or gpt.load_corpus()
    with threads(1):
        torch.manual_seed(seed)
        model = gpt.TinyGPT(config.model_config(corpus.vocab))
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.peak_lr, weight_decay=config.weight_decay)
        data = torch.Generator().manual_seed(1000 + seed)
        val = validation_batches(corpus, config)
        losses, val_losses = [], []
        for step in range(config.steps):
            if step % config.eval_every == 0:
                val_losses.append([step, evaluate(model, val)])
                if log:
                    log(f"seed {seed} step {step}: validation loss {val_losses[-1][1]:.3f}")
            for group in optimizer.param_groups:
                group["lr"] = gpt.lr_at(
                    step, config.peak_lr, config.warmup_steps, config.steps, config.min_lr
                )
            inputs, targets = gpt.shift_targets(
                gpt.random_windows(corpus.train, config.batch, config.block_size + 1, data)
            )
            losses.append(gpt.train_step(model, inputs, targets, optimizer, config.max_norm))
        val_losses.append([config.steps, evaluate(model, val)])
        sample = sample_text(model, corpus, config, seed=seed)
    return model, {"seed": seed, "loss": losses, "val_loss": val_losses, "sample": sample}


def _job(args: tuple[int, RunConfig]) -> tuple[dict, dict]:
    model, record = train(*args, log=print)
    return record, model.state_dict()


def weights_path(seed: int, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"tiny_gpt_seed{seed}.pt"


def run_experiment(config: RunConfig = DEFAULT, out_dir: Path = DATA_DIR, processes: int = 2) -> Path:
    """Train every seed (``processes`` at a time, one thread each) and write the weights and results.json."""
    corpus = gpt.load_corpus(out_dir)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        done = pool.map(_job, [(seed, config) for seed in config.seeds])
    out_dir = Path(out_dir)
    for record, state in done:
        torch.save(state, weights_path(record["seed"], out_dir))
    model = gpt.TinyGPT(config.model_config(corpus.vocab))
    results = {
        "command": COMMAND,
        "config": asdict(config),
        "torch": torch.__version__,
        "vocab": corpus.vocab,
        "n_train": len(corpus.train),
        "n_val": len(corpus.val),
        "parameters": gpt.n_parameters(model),
        "unigram_loss": gpt.unigram_loss(corpus),
        "bigram_loss": gpt.bigram_loss(corpus),
        "runs": [record for record, _ in done],
    }
    path = out_dir / "results.json"
    path.write_text(json.dumps(results, indent=None, separators=(",", ":"), ensure_ascii=False) + "\n")
    return path


def load_results(data_dir: Path = DATA_DIR) -> dict:
    """The shipped results of ``run_experiment``."""
    return paths.read_results(data_dir, COMMAND)


def load_model(seed: int, data_dir: Path = DATA_DIR) -> gpt.TinyGPT:
    """A shipped model, in eval mode."""
    results = load_results(data_dir)
    config = RunConfig(**{**results["config"], "seeds": tuple(results["config"]["seeds"])})
    model = gpt.TinyGPT(config.model_config(results["vocab"]))
    model.load_state_dict(torch.load(weights_path(seed, data_dir), weights_only=True))
    return model.eval()


def final_val_losses(results: dict) -> list[float]:
    """Each seed's validation loss after the last step."""
    return [run["val_loss"][-1][1] for run in results["runs"]]


def plot_runs(results: dict, ax=None, smooth: int = 50):
    """Training loss (a running mean of ``smooth`` steps) and validation loss of every seed."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.6))
    for i, run in enumerate(results["runs"]):
        colour, smooth = f"C{i}", min(smooth, len(run["loss"]))
        loss = np.convolve(run["loss"], np.ones(smooth) / smooth, mode="valid")
        ax.plot(
            np.arange(smooth - 1, len(run["loss"])),
            loss,
            color=colour,
            alpha=0.45,
            lw=1,
            label=f"seed {run['seed']}, training (mean of {smooth} steps)",
        )
        steps, val = zip(*run["val_loss"])
        ax.plot(steps, val, "o-", color=colour, ms=3, lw=1.5, label=f"seed {run['seed']}, validation")
    for name, key, style in (
        ("characters' frequency alone", "unigram_loss", ":"),
        ("previous character alone", "bigram_loss", "--"),
    ):
        ax.axhline(results[key], color="grey", ls=style, lw=1, label=f"{name} ({results[key]:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per character)")
    lowest = min(v for run in results["runs"] for _, v in run["val_loss"])
    ax.set_ylim(lowest - 0.3, results["unigram_loss"] + 0.4)
    ax.legend(fontsize=7, ncol=2)
    return ax


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder for the weights and results.json")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--corpus", action="store_true", help="extract corpus.txt from lessons 01-10 first")
    args = parser.parse_args(argv)
    if args.corpus:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / gpt.CORPUS).write_text(extract_corpus(), encoding="utf-8")
    path = run_experiment(out_dir=args.out, processes=args.processes)
    print(
        f"wrote {path}; final validation losses:",
        ", ".join(f"{v:.3f}" for v in final_val_losses(load_results(args.out))),
    )


if __name__ == "__main__":
    main()
