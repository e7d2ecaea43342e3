"""Lesson 07's decoder at work: a tiny encoder–decoder that reverses digit strings.

    python -m experiments.decoding      # trains 3 seeds -> data/reverse/ (weights and results.json)

The task: a source of 8 random digits; the target is the same digits reversed. The model: one
shared embedding of the 10 digits and a start symbol, learned positions, one pre-norm encoder
layer and one pre-norm decoder layer (``nn.TransformerEncoderLayer``/``nn.TransformerDecoderLayer``,
width 32, 4 heads, FFN 128, dropout 0), final LayerNorms and a linear read-out. Trained with
teacher forcing (the decoder reads the right answer shifted by one, under a causal mask), Adam
at 3e-3, 300 steps of 64 fresh pairs.

``greedy_decode`` runs the trained weights through the course's references (``helpers.block``):
the encoder once, then the decoder one new token at a time, keeping each layer's self-attention
keys and values in a cache that grows by one row per step (lesson 04) — so every step computes
one query row, not the whole target again. ``greedy_decode_uncached`` recomputes the whole
target at every step and must give the same tokens.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from helpers import paths
from helpers.attention import scaled_dot_product_attention
from helpers.block import (
    ATTENTION_KEYS,
    decoder_block,
    decoder_params,
    encoder_block,
    encoder_params,
    feed_forward,
    layer_norm,
)
from helpers.runtime import threads

DATA_DIR = paths.data_root() / "reverse"
COMMAND = "python -m experiments.decoding"


@dataclass(frozen=True)
class ReverseConfig:
    """The task, the model and its training; the defaults are what ``data/reverse/`` holds."""

    length: int = 8
    n_digits: int = 10  # symbols 0-9; the start symbol is n_digits
    d_model: int = 32
    n_heads: int = 4
    steps: int = 300
    batch: int = 64
    lr: float = 3e-3
    n_test: int = 1000
    seeds: tuple[int, ...] = (0, 1, 2)

    @property
    def start(self) -> int:
        return self.n_digits


class Reverser(nn.Module):
    """Encoder–decoder: source (B, S) digits, target so far (B, T) -> logits (B, T, n_digits)."""

    def __init__(self, config: ReverseConfig = ReverseConfig()):
        super().__init__()
        c = config
        self.config = c
        self.embedding = nn.Embedding(c.n_digits + 1, c.d_model)  # + the start symbol
        self.source_positions = nn.Embedding(c.length, c.d_model)
        self.target_positions = nn.Embedding(c.length, c.d_model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nn's note about nested tensors and norm_first
            self.encoder = nn.TransformerEncoderLayer(c.d_model, c.n_heads, 4 * c.d_model, dropout=0.0,
                                                      batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoderLayer(c.d_model, c.n_heads, 4 * c.d_model, dropout=0.0,
                                                  batch_first=True, norm_first=True)
        self.encoder_norm = nn.LayerNorm(c.d_model)
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.out = nn.Linear(c.d_model, c.n_digits)

    def encode(self, source: torch.Tensor) -> torch.Tensor:
        x = self.embedding(source) + self.source_positions.weight[: source.shape[1]]  # (B, S, D)
        return self.encoder_norm(self.encoder(x))

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        T = target_in.shape[1]
        y = self.embedding(target_in) + self.target_positions.weight[:T]  # (B, T, D)
        blocked = ~torch.ones(T, T, dtype=torch.bool).tril()  # nn: True = may NOT attend
        h = self.decoder(y, self.encode(source), tgt_mask=blocked)
        return self.out(self.decoder_norm(h))  # (B, T, n_digits)


def pairs(n: int, config: ReverseConfig, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n sources (n, S) of random digits and their targets, the sources reversed (n, S)."""
    source = torch.randint(0, config.n_digits, (n, config.length), generator=generator)
    return source, source.flip(1)


def shifted(target: torch.Tensor, start: int) -> torch.Tensor:
    """The decoder's input under teacher forcing: the start symbol, then the target without its last token."""
    return torch.cat([torch.full_like(target[:, :1], start), target[:, :-1]], 1)


def test_pairs(config: ReverseConfig = ReverseConfig()) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed test set: ``n_test`` pairs no training step draws (their own generator)."""
    return pairs(config.n_test, config, torch.Generator().manual_seed(123_456))


# ---------------------------------------------------------------- decoding with the course's references


@dataclass
class Decoded:
    """Greedy output tokens (B, T), the cross-attention weights of every step (B, H, T, S), and
    how many query rows the decoder's self-attention computed."""

    tokens: torch.Tensor
    cross_weights: torch.Tensor
    query_rows: int


def _heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:  # (B, T, D) -> (B, H, T, D/H)
    B, T, D = t.shape
    return t.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def _memory(model: Reverser, source: torch.Tensor) -> torch.Tensor:
    """The encoder's output (B, S, D), computed with the course's ``encoder_block``."""
    x = model.embedding(source) + model.source_positions.weight[: source.shape[1]]
    h = encoder_block(x, encoder_params(model.encoder), model.config.n_heads, norm_first=True)
    return layer_norm(h, model.encoder_norm.weight, model.encoder_norm.bias, model.encoder_norm.eps)


@torch.no_grad()
def greedy_decode(model: Reverser, source: torch.Tensor) -> Decoded:
    """Greedy decoding one token at a time with a key/value cache for the decoder's self-attention."""
    c, H = model.config, model.config.n_heads
    p = decoder_params(model.decoder)
    memory = _memory(model, source)  # (B, S, D), computed once
    self_p = {key: p["self_" + key] for key in ATTENTION_KEYS}
    cross_k = _heads(memory @ p["cross_w_k"] + p["cross_b_k"], H)  # (B, H, S, d_h), computed once
    cross_v = _heads(memory @ p["cross_w_v"] + p["cross_b_v"], H)
    B = source.shape[0]
    token = torch.full((B,), c.start)
    cache_k, cache_v = [], []  # one (B, H, 1, d_h) row per step: the cache of lesson 04
    out, crosses = [], []
    for t in range(c.length):
        y = (model.embedding(token) + model.target_positions.weight[t])[:, None]  # (B, 1, D): the new token
        ln = layer_norm(y, p["ln1_gamma"], p["ln1_beta"], p["eps"])
        cache_k.append(_heads(ln @ self_p["w_k"] + self_p["b_k"], H))
        cache_v.append(_heads(ln @ self_p["w_v"] + self_p["b_v"], H))
        q = _heads(ln @ self_p["w_q"] + self_p["b_q"], H)  # (B, H, 1, d_h): one query row
        # no mask needed: the cache holds only this token and the ones before it
        mixed, _ = scaled_dot_product_attention(q, torch.cat(cache_k, 2), torch.cat(cache_v, 2))
        y = y + mixed.transpose(1, 2).reshape(B, 1, -1) @ self_p["w_o"] + self_p["b_o"]
        ln = layer_norm(y, p["ln2_gamma"], p["ln2_beta"], p["eps"])
        q = _heads(ln @ p["cross_w_q"] + p["cross_b_q"], H)
        read, weights = scaled_dot_product_attention(q, cross_k, cross_v)  # (B, H, 1, d_h), (B, H, 1, S)
        y = y + read.transpose(1, 2).reshape(B, 1, -1) @ p["cross_w_o"] + p["cross_b_o"]
        ln = layer_norm(y, p["ln3_gamma"], p["ln3_beta"], p["eps"])
        y = y + feed_forward(ln, p["w1"], p["b1"], p["w2"], p["b2"])
        logits = model.out(model.decoder_norm(y[:, 0]))  # (B, n_digits)
        token = logits.argmax(-1)
        out.append(token)
        crosses.append(weights)
    return Decoded(torch.stack(out, 1), torch.cat(crosses, 2), c.length)


@torch.no_grad()
def greedy_decode_uncached(model: Reverser, source: torch.Tensor) -> Decoded:
    """The same greedy decoding, recomputing the whole target so far at every step (no cache)."""
    c = model.config
    p = decoder_params(model.decoder)
    memory = _memory(model, source)
    tokens = torch.full((source.shape[0], 1), c.start)
    rows = 0
    for _ in range(c.length):
        T = tokens.shape[1]
        y = model.embedding(tokens) + model.target_positions.weight[:T]  # (B, T, D): everything again
        causal = torch.ones(T, T, dtype=torch.bool).tril()  # True = may attend
        h = decoder_block(y, memory, p, c.n_heads, norm_first=True, mask=causal)
        rows += T
        tokens = torch.cat([tokens, model.out(model.decoder_norm(h[:, -1])).argmax(-1, keepdim=True)], 1)
    return Decoded(tokens[:, 1:], torch.empty(0), rows)


def accuracy(tokens: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Token accuracy and the share of sequences with every token right."""
    right = tokens == target
    return {"tokens": right.float().mean().item(), "sequences": right.all(1).float().mean().item()}


# ---------------------------------------------------------------- training and the shipped files


def train(seed: int, config: ReverseConfig = ReverseConfig()) -> tuple[Reverser, list[float]]:
    """Train one model with teacher forcing; returns it (in eval mode) and its loss per step."""
    with threads(1):
        torch.manual_seed(seed)
        model = Reverser(config)
        data = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
        losses = []
        for _ in range(config.steps):
            source, target = pairs(config.batch, config, data)
            logits = model(source, shifted(target, config.start))
            loss = F.cross_entropy(logits.reshape(-1, config.n_digits), target.reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    return model.eval(), losses


def _job(args: tuple[int, ReverseConfig]) -> tuple[int, dict, dict]:
    seed, config = args
    model, losses = train(seed, config)
    with threads(1):
        got = accuracy(greedy_decode(model, test_pairs(config)[0]).tokens, test_pairs(config)[1])
    return seed, model.state_dict(), {"seed": seed, "loss": losses, "greedy": got}


def weights_path(seed: int, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"reverser_seed{seed}.pt"


def run_experiment(config: ReverseConfig = ReverseConfig(), out_dir: Path = DATA_DIR,
                   processes: int = 2) -> dict:
    """Train every seed, decode the test set greedily, write the weights and ``results.json``."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        done = pool.map(_job, [(s, config) for s in config.seeds])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for seed, state, _ in done:
        torch.save(state, weights_path(seed, out_dir))
    results = {"command": COMMAND, "config": asdict(config), "torch": torch.__version__,
               "runs": [run for _, _, run in done]}
    (out_dir / "results.json").write_text(json.dumps(results, separators=(",", ":")) + "\n")
    return results


def load_results(data_dir: Path = DATA_DIR) -> dict:
    """The shipped configuration and, per seed, the loss and the greedy accuracy."""
    return paths.read_results(data_dir, COMMAND)


def load_reverser(seed: int, data_dir: Path = DATA_DIR) -> Reverser:
    """A shipped model, in eval mode."""
    path = weights_path(seed, paths.require(data_dir, COMMAND))
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{COMMAND}` to train the models")
    model = Reverser(ReverseConfig(**{k: tuple(v) if isinstance(v, list) else v
                                      for k, v in load_results(data_dir)["config"].items()}))
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def plot_cross_attention(decoded: Decoded, source: torch.Tensor, index: int = 0, head: int | None = None,
                         ax=None):
    """Which source digit each output step reads in cross-attention (mean of the heads, or one head)."""
    if ax is None:
        ax = plt.subplots(figsize=(4.2, 3.8), layout="constrained")[1]
    w = decoded.cross_weights[index]  # (H, T, S)
    w = (w.mean(0) if head is None else w[head]).numpy()
    ax.imshow(w, cmap="Blues", vmin=0, vmax=1)
    src, out = source[index].tolist(), decoded.tokens[index].tolist()
    ax.set_xticks(range(len(src)), [str(d) for d in src])
    ax.set_yticks(range(len(out)), [f"step {t + 1}: {d}" for t, d in enumerate(out)], fontsize=8)
    ax.set_xlabel("source digit (keys and values from the encoder)")
    ax.set_title("cross-attention, " + ("mean of the heads" if head is None else f"head {head}"), fontsize=10)
    return ax


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    results = run_experiment(out_dir=args.out, processes=args.processes)
    for run in results["runs"]:
        print(f"seed {run['seed']}: greedy decoding of the test set — {run['greedy']}")


if __name__ == "__main__":
    main()
