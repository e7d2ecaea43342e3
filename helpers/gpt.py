"""Lesson 11: a small GPT from the course's parts — the references of its exercises, the model,
the corpus and generation with a key/value cache.

The model is a decoder-only Transformer assembled from earlier lessons' references: token
embeddings times √D (as in Vaswani et al., 2017) plus lesson 05's ``sinusoidal_encoding``;
blocks of lesson 07's pre-norm layer (its ``layer_norm`` and ``feed_forward``) whose attention
is lesson 06's heads (``split_heads``, ``merge_heads``) under lesson 04's ``causal_mask``; a
final LayerNorm; logits read with the token embedding itself (tied, as in GPT-2). Weights are
applied as ``x @ w``. Dropout sits where GPT-2 puts it: on the embeddings, on the attention
weights, and on each sub-layer's output before it is added to the residual path.

Shapes: ``(B, T)`` token ids, ``(B, T, D)`` tokens as rows, ``(B, H, T, d_h)`` heads, ``(B, T, V)``
logits over a vocabulary of ``V`` characters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import paths
from .attention import scaled_dot_product_attention
from .block import feed_forward, layer_norm
from .heads import merge_heads, split_heads
from .masking import causal_mask
from .positional import sinusoidal_encoding
from .runtime import threads

DATA_DIR = paths.data_root() / "tiny_gpt"
CORPUS = "corpus.txt"

# ----------------------------------------------------------------------------- the exercises' references


def shift_targets(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T+1) ids -> (inputs (B, T), targets (B, T)): each position's target is the next token."""
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (B, T+1) with T+1 >= 2, got shape {tuple(tokens.shape)}")
    return tokens[:, :-1], tokens[:, 1:]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy in nats over every position. logits (B, T, V), targets (B, T) -> scalar."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lr_at(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """Linear warm-up from 0 to ``peak_lr``, then cosine decay to ``min_lr`` at ``total_steps``."""
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    if step >= total_steps:
        return float(min_lr)
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def train_step(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    max_norm: float = 1.0,
) -> float:
    """One step on lm_loss(model(inputs), targets), gradients clipped to ``max_norm``; the loss before it."""
    optimizer.zero_grad(set_to_none=True)  # no gradient of an earlier step may leak in
    loss = lm_loss(model(inputs), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # before the step uses them
    optimizer.step()
    return loss.item()


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(B, V) logits -> (B,) ids drawn from softmax(logits / temperature) over the top_k largest."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature  # before the softmax: it sharpens or flattens the distribution
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, H_kv, T, d_h) -> (B, H_kv·n_rep, T, d_h): query head h reads key/value head h // n_rep."""
    return x.repeat_interleave(n_rep, dim=1)


def kv_cache_bytes(
    n_layers: int, n_tokens: int, n_kv_heads: int, d_head: int, bytes_per_element: int = 2, batch: int = 1
) -> int:
    """Bytes of the cached keys and values: 2 · layers · batch · tokens · kv heads · d_head numbers."""
    return 2 * n_layers * batch * n_tokens * n_kv_heads * d_head * bytes_per_element


# ----------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Corpus:
    """A text as character ids, its vocabulary, and a split into training and validation ids."""

    text: str
    chars: str  # the vocabulary, sorted: id i is chars[i]
    train: torch.Tensor = field(repr=False)  # (N_train,) long
    val: torch.Tensor = field(repr=False)  # (N_val,) long

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """The ids of ``text``'s characters: (len(text),) long."""
        index = {c: i for i, c in enumerate(self.chars)}
        missing = sorted(set(text) - set(index))
        if missing:
            raise ValueError(f"characters outside the vocabulary: {''.join(missing)!r}")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        """The text of a 1-D sequence of ids."""
        return "".join(self.chars[int(i)] for i in ids)


def load_corpus(data_dir: Path = DATA_DIR, val_fraction: float = 0.1) -> Corpus:
    """The shipped corpus (the course's own prose), its last ``val_fraction`` held out for validation."""
    text = (paths.require(data_dir, "python -m experiments.tiny_gpt --corpus") / CORPUS).read_text(
        encoding="utf-8"
    )
    chars = "".join(sorted(set(text)))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    cut = int(len(ids) * (1 - val_fraction))
    return Corpus(text, chars, ids[:cut], ids[cut:])


def random_windows(ids: torch.Tensor, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``batch`` windows of ``length`` consecutive ids from random places: (batch, length) long."""
    starts = torch.randint(0, len(ids) - length + 1, (batch,), generator=generator)
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


def unigram_loss(corpus: Corpus) -> float:
    """Cross-entropy in nats on the validation text of a model that knows only how often each
    character occurs in the training text (add-one smoothing): the loss of ignoring context."""
    counts = torch.bincount(corpus.train, minlength=corpus.vocab).double() + 1.0
    log_p = torch.log(counts / counts.sum())
    return float(-log_p[corpus.val].mean())


def bigram_loss(corpus: Corpus) -> float:
    """The same for a table of how often each character follows each other one (add-one
    smoothing): the loss of a model that reads only the previous character."""
    pairs = corpus.train[:-1] * corpus.vocab + corpus.train[1:]
    counts = torch.bincount(pairs, minlength=corpus.vocab**2).double().view(corpus.vocab, corpus.vocab) + 1.0
    log_p = torch.log(counts / counts.sum(dim=1, keepdim=True))  # (V, V): row = previous character
    return float(-log_p[corpus.val[:-1], corpus.val[1:]].mean())


# ----------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a TinyGPT. ``n_kv_heads`` < ``n_heads`` is grouped-query attention."""

    vocab: int
    block_size: int = 64  # the longest context T it reads
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    n_kv_heads: int | None = None  # None: as many as query heads
    dropout: float = 0.1
    d_ff: int | None = None  # None: 4 · d_model

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


class Block(nn.Module):
    """One pre-norm decoder-only block: x + attention(LN1(x)), then + FFN(LN2(x)), under a causal mask.

    Its parameters carry the names of ``helpers.block.encoder_params`` (weights as ``x @ w``); the
    keys and values have ``n_kv_heads`` heads, each shared by ``n_heads / n_kv_heads`` query heads.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        D, F_, kv = config.d_model, config.d_ff or 4 * config.d_model, config.kv_heads * config.d_head
        if D % config.n_heads or config.n_heads % config.kv_heads:
            raise ValueError(f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, got {config}")
        self.n_heads, self.n_kv_heads, self.eps = config.n_heads, config.kv_heads, 1e-5
        shapes = {
            "w_q": (D, D),
            "b_q": (D,),
            "w_k": (D, kv),
            "b_k": (kv,),
            "w_v": (D, kv),
            "b_v": (kv,),
            "w_o": (D, D),
            "b_o": (D,),
            "w1": (D, F_),
            "b1": (F_,),
            "w2": (F_, D),
            "b2": (D,),
        }
        self.p = nn.ParameterDict()
        for name, shape in shapes.items():
            if name.startswith("w"):  # GPT-2's initialisation: N(0, 0.02)
                self.p[name] = nn.Parameter(torch.randn(shape) * 0.02)
            else:
                self.p[name] = nn.Parameter(torch.zeros(shape))
        for i in (1, 2):
            self.p[f"ln{i}_gamma"] = nn.Parameter(torch.ones(D))
            self.p[f"ln{i}_beta"] = nn.Parameter(torch.zeros(D))
        self.attn_drop, self.resid_drop = nn.Dropout(config.dropout), nn.Dropout(config.dropout)
        self.repeat: Callable[[torch.Tensor, int], torch.Tensor] = repeat_kv

    def params(self) -> dict:
        """The weights as a plain dict with ``eps`` (``helpers.block.encoder_layer``'s, if H_kv = H)."""
        return {**dict(self.p.items()), "eps": self.eps}

    def forward(self, x: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        """x (B, T, D) -> (B, T, D). With ``cache`` (a list, empty at first) x holds only the new
        positions, their keys and values are appended to the cache and the queries read all of it."""
        p = self.p
        h = layer_norm(x, p["ln1_gamma"], p["ln1_beta"], self.eps)
        q = split_heads(h @ p["w_q"] + p["b_q"], self.n_heads)  # (B, H, T, d_h)
        k = split_heads(h @ p["w_k"] + p["b_k"], self.n_kv_heads)  # (B, H_kv, T, d_h)
        v = split_heads(h @ p["w_v"] + p["b_v"], self.n_kv_heads)  # (B, H_kv, T, d_h)
        if cache is not None:
            if cache:
                k = torch.cat([cache[0], k], dim=2)  # (B, H_kv, t + T, d_h)
                v = torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]  # the cache keeps H_kv heads: that is what grouped-query attention saves
        n_q, n_k = q.shape[2], k.shape[2]
        mask = causal_mask(n_k)[n_k - n_q :]  # (T, t + T): query i sits at position n_k − n_q + i
        rep = self.n_heads // self.n_kv_heads
        k, v = self.repeat(k, rep), self.repeat(v, rep)  # (B, H, t + T, d_h)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, d_h), (B, H, T, t + T)
        if self.training and self.attn_drop.p > 0:
            out = self.attn_drop(weights) @ v
        x = x + self.resid_drop(merge_heads(out) @ p["w_o"] + p["b_o"])
        h = layer_norm(x, p["ln2_gamma"], p["ln2_beta"], self.eps)
        return x + self.resid_drop(feed_forward(h, p["w1"], p["b1"], p["w2"], p["b2"]))


class TinyGPT(nn.Module):
    """A decoder-only Transformer over characters: (B, T) ids -> (B, T, V) logits of the next character."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        # N(0, 1/D), read ×√D (Vaswani et al., 2017, §3.4): each embedded token has about the size of
        # its position vector, and the tied read-out starts with logits of about unit size
        self.tok_emb = nn.Parameter(torch.randn(config.vocab, config.d_model) / math.sqrt(config.d_model))
        self.register_buffer(
            "positions", sinusoidal_encoding(config.block_size, config.d_model), persistent=False
        )
        self.emb_drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f_gamma = nn.Parameter(torch.ones(config.d_model))
        self.ln_f_beta = nn.Parameter(torch.zeros(config.d_model))

    def forward(self, tokens: torch.Tensor, caches: list[list] | None = None, start: int = 0) -> torch.Tensor:
        """Logits (B, T, V) for ids (B, T) at positions ``start`` … ``start + T − 1``; ``caches``
        (one list per block) holds the keys and values of the earlier positions."""
        T = tokens.shape[1]
        if start + T > self.config.block_size:
            raise ValueError(f"the model reads at most {self.config.block_size} positions, got {start + T}")
        scale = math.sqrt(self.config.d_model)
        x = self.emb_drop(self.tok_emb[tokens] * scale + self.positions[start : start + T])  # (B, T, D)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        x = layer_norm(x, self.ln_f_gamma, self.ln_f_beta)
        return x @ self.tok_emb.T  # (B, T, V): the embedding matrix reads the logits too (tied)

    def params(self) -> dict:
        """The weights as a plain dict: ``tok_emb`` (V, D), ``blocks`` (one dict per block, the keys of
        ``helpers.block.encoder_params``), ``ln_f_gamma``, ``ln_f_beta`` (D,)."""
        return {
            "tok_emb": self.tok_emb,
            "blocks": [b.params() for b in self.blocks],
            "ln_f_gamma": self.ln_f_gamma,
            "ln_f_beta": self.ln_f_beta,
        }

    def use_repeat(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
        """Let every block share its key/value heads with ``fn`` (a ``repeat_kv``)."""
        for block in self.blocks:
            block.repeat = fn


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def gpt_logits(tokens: torch.Tensor, params: dict, n_heads: int) -> torch.Tensor:
    """The reference of the assembly exercise: TinyGPT's logits (B, T, V) from ``TinyGPT.params()``,
    written with lesson 07's ``encoder_block`` (pre-norm) under lesson 04's causal mask."""
    from .block import encoder_block

    T, D = tokens.shape[1], params["tok_emb"].shape[1]
    x = params["tok_emb"][tokens] * math.sqrt(D) + sinusoidal_encoding(T, D).to(params["tok_emb"].dtype)
    mask = causal_mask(T)  # (T, T), True = may attend
    for p in params["blocks"]:
        x = encoder_block(x, p, n_heads, norm_first=True, mask=mask)
    x = layer_norm(x, params["ln_f_gamma"], params["ln_f_beta"])
    return x @ params["tok_emb"].T


# ----------------------------------------------------------------------------- generation


@dataclass
class Generated:
    """What ``generate`` produced: the ids (B, T0 + n), the logits of every new step (B, n, V) and,
    with a cache, its size in bytes after the last step."""

    tokens: torch.Tensor
    logits: torch.Tensor
    cache_bytes: int = 0


Sampler = Callable[..., torch.Tensor]


@torch.no_grad()
def generate(
    model: TinyGPT,
    prompt: torch.Tensor,
    n_new: int,
    sampler: Sampler = sample_next,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    cache: bool = True,
) -> Generated:
    """Continue ``prompt`` (B, T0) by ``n_new`` ids, drawing each with ``sampler`` and a generator
    seeded with ``seed``. With ``cache`` each step feeds only the newest id and reuses every earlier
    key and value; without, it recomputes the whole sequence. Both give the same ids."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    tokens, steps = prompt.clone(), []
    caches = [[] for _ in model.blocks] if cache else None
    fed = 0  # positions already in the cache
    try:
        with threads(1):  # one position at a time: tensors too small to share between threads
            for _ in range(n_new):
                if cache:
                    logits = model(tokens[:, fed:], caches, start=fed)[:, -1]  # (B, V)
                    fed = tokens.shape[1]
                else:
                    logits = model(tokens)[:, -1]
                steps.append(logits)
                nxt = sampler(logits, temperature=temperature, top_k=top_k, generator=generator)
                tokens = torch.cat([tokens, nxt.view(-1, 1).to(tokens.dtype)], dim=1)
    finally:
        model.train(was_training)
    size = sum(t.numel() * t.element_size() for c in (caches or []) for t in c)
    return Generated(tokens, torch.stack(steps, dim=1), size)
