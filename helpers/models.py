"""The three sentiment classifiers of lesson 01: a plain RNN, an LSTM and a 2-layer attention model.

All three read a review as token ids ``(B, T)`` right-padded with ``PAD_ID`` and its true lengths
``(B,)``, and return one logit per review ``(B,)`` (positive if > 0). Each splits its forward pass
in two, ``embed`` (ids -> token embeddings) and ``from_embeddings`` (the rest), so that lesson 01
can differentiate the output with respect to each word's embedding.

- ``RNNClassifier`` and ``LSTMClassifier`` read the hidden state after the **last real word**
  (padding after it never reaches that state).
- ``AttentionClassifier`` reads the **[CLS]** position: its ids must start with ``CLS_ID``
  (``sentiment.encode(..., add_cls=True)``); ``needs_cls`` says which models want it.

Parameter counts with the default configs (91 tokens, one output logit):

- RNN 3,089 = 91·16 embeddings + (16·32 + 32·32 + 32 + 32) recurrence (PyTorch keeps two
  biases) + 33 head;
- LSTM 7,889 = 1,456 + 4·(16·32 + 32·32 + 2·32) for its four gates + 33;
- attention 22,689 = 91·32 tokens + 81·32 positions + 2 layers × 8,544 (attention 4·32·32 + 4·32
  = 4,224, feed-forward 32·64 + 64 + 64·32 + 32 = 4,192, two LayerNorms 128) + final LayerNorm 64
  + head 33. Width 32, 4 heads of 8, feed-forward width 64, positions for up to 81 tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .sentiment import PAD_ID, VOCAB_SIZE


@dataclass(frozen=True)
class RecurrentConfig:
    """A recurrent classifier: embedding -> RNN or LSTM -> the last real state -> one logit."""

    vocab_size: int = VOCAB_SIZE  # 89 words, [PAD] and [CLS]
    d_embed: int = 16
    d_hidden: int = 32


@dataclass(frozen=True)
class AttentionConfig:
    """An encoder-only attention classifier that reads its answer from the [CLS] position.

    Pre-norm encoder layers (ReLU, no dropout) and a final LayerNorm; learned absolute
    positions for up to ``max_len`` tokens ([CLS] included).
    """

    vocab_size: int = VOCAB_SIZE
    d_model: int = 32
    n_heads: int = 4  # 4 heads of width 8
    d_ff: int = 64  # inner width of the feed-forward network: 2 x d_model
    n_layers: int = 2
    max_len: int = 81  # [CLS] and up to 80 words; the longest review has 60

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")


def _check_inputs(ids: torch.Tensor, lengths: torch.Tensor) -> None:
    if ids.ndim != 2 or lengths.shape != ids.shape[:1]:
        raise ValueError(f"expected ids (B, T) and lengths (B,), got {tuple(ids.shape)} and "
                         f"{tuple(lengths.shape)}")
    if int(lengths.min()) < 1 or int(lengths.max()) > ids.shape[1]:
        raise ValueError(f"lengths must lie in 1..T = 1..{ids.shape[1]}, got {lengths.tolist()[:8]}...")


class _Recurrent(nn.Module):
    """Shared by the RNN and the LSTM: only the recurrent layer differs."""

    needs_cls = False
    cell: type[nn.RNNBase]

    def __init__(self, config: RecurrentConfig = RecurrentConfig()):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_embed, padding_idx=PAD_ID)
        self.recurrent = self.cell(config.d_embed, config.d_hidden, batch_first=True)
        self.head = nn.Linear(config.d_hidden, 1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings (B, T, d_embed) of ids (B, T)."""
        return self.embedding(ids)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden state after every position (B, T, d_hidden) of embeddings x (B, T, d_embed)."""
        return self.recurrent(x)[0]

    def from_embeddings(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits (B,) from embeddings x (B, T, d_embed): the state after the last real word."""
        h = self.states(x)  # (B, T, d_hidden)
        last = h[torch.arange(h.shape[0]), lengths - 1]  # (B, d_hidden)
        return self.head(last).squeeze(-1)  # (B,)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits (B,) of reviews ids (B, T) with true lengths (B,)."""
        _check_inputs(ids, lengths)
        return self.from_embeddings(self.embed(ids), lengths)


class RNNClassifier(_Recurrent):
    """Plain (Elman) RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)."""

    cell = nn.RNN


class LSTMClassifier(_Recurrent):
    """LSTM: the gated cell state c_t = f_t * c_{t-1} + i_t * g_t is an additive path."""

    cell = nn.LSTM


class EncoderLayer(nn.Module):
    """A pre-norm encoder layer: x + attention(LayerNorm(x)), then x + FFN(LayerNorm(x)).

    Its parameters have the names and shapes of ``nn.TransformerEncoderLayer(d_model, n_heads,
    d_ff, dropout=0.0, batch_first=True, norm_first=True)``, whose state_dict it loads and whose
    output it reproduces; written out here so that the attention weights can be read.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)  # holds the weights
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def scores(self, x: torch.Tensor, keep: torch.Tensor,
               n_queries: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The scaled scores q·k/√d_head (B, H, T_q, T) of x (B, T, D), −∞ at padded keys, and the
        values (B, H, T, D/H); the first ``n_queries`` positions are the queries (all T when None).
        """
        B, T, D = x.shape
        H = self.n_heads
        qkv = F.linear(x, self.self_attn.in_proj_weight, self.self_attn.in_proj_bias)  # (B, T, 3D)
        q, k, v = qkv.view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)  # each (B, H, T, D/H)
        q = q[:, :, :n_queries]  # (B, H, T_q, D/H)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)  # (B, H, T_q, T)
        return scores.masked_fill(~keep[:, None, None, :], float("-inf")), v  # no query looks at padding

    def attend(self, x: torch.Tensor, keep: torch.Tensor,
               n_queries: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Multi-head self-attention of x (B, T, D); keep (B, T) is True at real tokens.

        Returns the output (B, T_q, D) and the weights (B, H, T_q, T) of the first ``n_queries``
        positions as queries (all T when None); every position is a key.
        """
        scores, v = self.scores(x, keep, n_queries)
        weights = scores.softmax(dim=-1)  # [CLS] is always a real key: no row is empty
        B, T_q, D = weights.shape[0], weights.shape[2], x.shape[2]
        out = (weights @ v).transpose(1, 2).reshape(B, T_q, D)  # heads side by side again
        return self.self_attn.out_proj(out), weights

    def forward(self, x: torch.Tensor, keep: torch.Tensor, n_queries: int | None = None) -> torch.Tensor:
        """x (B, T, D) -> (B, T_q, D): the new states of the first ``n_queries`` positions (all if None)."""
        x = x[:, :n_queries] + self.attend(self.norm1(x), keep, n_queries)[0]
        return x + self.linear2(F.relu(self.linear1(self.norm2(x))))


class AttentionClassifier(nn.Module):
    """Token + learned position embeddings -> pre-norm encoder layers -> LayerNorm -> logit at [CLS]."""

    needs_cls = True

    def __init__(self, config: AttentionConfig = AttentionConfig()):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model, padding_idx=PAD_ID)
        self.positions = nn.Embedding(config.max_len, config.d_model)
        self.layers = nn.ModuleList(EncoderLayer(config.d_model, config.n_heads, config.d_ff)
                                    for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, 1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings (B, T, d_model) of ids (B, T), positions not yet added."""
        return self.embedding(ids)

    def _start(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = x.shape[1]
        if T > self.config.max_len:
            raise ValueError(f"at most max_len = {self.config.max_len} tokens, got {T}")
        keep = torch.arange(T) < lengths[:, None]  # (B, T): True = a real token, may be attended to
        return x + self.positions.weight[:T], keep  # (B, T, d_model)

    def from_embeddings(self, x: torch.Tensor, lengths: torch.Tensor, cls_only: bool = False) -> torch.Tensor:
        """Logits (B,) from token embeddings x (B, T, d_model): add positions, encode, read [CLS].

        ``cls_only`` computes the last layer for the [CLS] position alone, the only one read:
        the same logits with less work (the fast training path uses it).
        """
        h, keep = self._start(x, lengths)
        for i, layer in enumerate(self.layers):
            h = layer(h, keep, 1 if cls_only and i == len(self.layers) - 1 else None)
        return self.head(self.norm(h[:, 0])).squeeze(-1)  # [CLS] is position 0 -> (B,)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, cls_only: bool = False) -> torch.Tensor:
        """Logits (B,) of ids (B, T) that start with [CLS], with true lengths (B,) counting it."""
        _check_inputs(ids, lengths)
        return self.from_embeddings(self.embed(ids), lengths, cls_only)

    @torch.no_grad()
    def attention_scores(self, ids: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
        """The scaled scores of every layer, each (B, H, T, T), −∞ at padded keys: row i = query i."""
        _check_inputs(ids, lengths)
        h, keep = self._start(self.embed(ids), lengths)
        scores = []
        for layer in self.layers:
            scores.append(layer.scores(layer.norm1(h), keep)[0])
            h = layer(h, keep)
        return scores

    def attention_maps(self, ids: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer, each (B, H, T, T): row i = query i over the keys."""
        return [s.softmax(dim=-1) for s in self.attention_scores(ids, lengths)]


MODELS: dict[str, type[nn.Module]] = {"rnn": RNNClassifier, "lstm": LSTMClassifier,
                                      "attention": AttentionClassifier}
LABELS = {"rnn": "plain RNN", "lstm": "LSTM", "attention": "attention (2 layers)"}


def build(name: str) -> nn.Module:
    """A freshly initialised model by name ("rnn", "lstm" or "attention") with its default config."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name]()


def n_parameters(model: nn.Module) -> int:
    """The number of trainable numbers in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
