"""What lesson 01's trained sentiment models look at: [CLS] attention, and the recurrent models'
probability after each word.

``attention_forward`` recomputes ``models.AttentionClassifier`` from its parameters with the
references of ``helpers.block``, so that the attention weights of every layer come out with
the logits (the tests check the logits equal the model's).
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from . import sentiment
from .block import encoder_layer, encoder_params, layer_norm
from .plots import figure_png
from .trained import load_model
from .widgets import WithFallback

EXAMPLES: tuple[str, ...] = (
    "the lecture was not good",
    "honestly the slides were very confusing although the coffee was great",
    "the exam was never really boring in the winter semester if you ask me but the food was bad",
    "the course was excellent according to my friends during the first week while the wifi was not useful",
)


# ---------------------------------------------------------------- the attention model, written out


@torch.no_grad()
def attention_forward(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor
                      ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits (B,) and each layer's attention weights (B, H, T, T) of an ``AttentionClassifier``.

    ids (B, T) start with [CLS], lengths (B,) count it.
    """
    if not getattr(model, "needs_cls", False):
        raise ValueError(f"expected lesson 01's AttentionClassifier, got {type(model).__name__}")
    T = ids.shape[1]
    keep = torch.arange(T) < lengths[:, None]  # (B, T): True = a real token
    h = model.embedding(ids) + model.positions.weight[:T]  # (B, T, D)
    maps = []
    for layer in model.layers:  # pre-norm layers; no query may look at padding
        h, weights = encoder_layer(h, encoder_params(layer), model.config.n_heads, norm_first=True,
                                   mask=keep[:, None, None, :])
        maps.append(weights)
    cls = layer_norm(h[:, 0], model.norm.weight, model.norm.bias, model.norm.eps)  # (B, D)
    return (cls @ model.head.weight.T + model.head.bias).squeeze(-1), maps


# ---------------------------------------------------------------- which words decide


@dataclass(frozen=True)
class Roles:
    """Word positions (0 = first word, [CLS] not counted) that decide a review, and the distractor's."""

    target: int  # the negation before the deciding adjective if there is one, else the adjective
    negated: bool
    distractor: int | None  # the distractor clause's adjective, if the review has one


def roles(words: Sequence[str]) -> Roles:
    """Find the deciding word (the rule of ``sentiment.label_of``) and a distractor's adjective."""
    sentiment.label_of(words)  # raises a ValueError if there is no sentiment adjective
    adjectives = [i for i, w in enumerate(words) if w in sentiment.POSITIVE or w in sentiment.NEGATIVE]
    core = adjectives[0]
    j = core - 1
    if j >= 0 and words[j] in sentiment.INTENSIFIERS:  # look past "very" in "not very good"
        j -= 1
    negated = j >= 0 and words[j] in sentiment.NEGATIONS
    distractor = next((i for i in adjectives[1:] if any(w in sentiment.CONNECTORS for w in words[core:i])),
                      None)
    return Roles(j if negated else core, negated, distractor)


@dataclass(frozen=True)
class Shares:
    """Mean share of [CLS]'s attention, per layer and head (L, H): on the deciding word, on a
    distractor's adjective (reviews with one), and on [CLS] itself."""

    target: np.ndarray
    distractor: np.ndarray
    itself: np.ndarray
    n_reviews: int
    n_distractors: int

    def best_head(self, layer: int = 0) -> int:
        """The head of ``layer`` (0-based) with the largest mean share on the deciding word."""
        return int(np.argmax(self.target[layer]))


def cls_shares(model: nn.Module, reviews: sentiment.Reviews) -> Shares:
    """Measure where [CLS] attends in each layer and head of an attention model, over ``reviews``."""
    ids, lengths = sentiment.encode(reviews.sentences, add_cls=True)
    _, maps = attention_forward(model, ids, lengths)
    cls = torch.stack([m[:, :, 0, :] for m in maps], 1).numpy()  # (B, L, H, T): [CLS]'s row
    found = [roles(words) for words in reviews.sentences]
    rows = np.arange(len(found))
    target = cls[rows, :, :, [r.target + 1 for r in found]]  # +1: [CLS] sits at position 0
    with_d = [(b, r.distractor) for b, r in enumerate(found) if r.distractor is not None]
    distractor = (cls[[b for b, _ in with_d], :, :, [i + 1 for _, i in with_d]].mean(0) if with_d
                  else np.full(cls.shape[1:3], np.nan))
    return Shares(target.mean(0), distractor, cls[:, :, :, 0].mean(0), len(found), len(with_d))


# ---------------------------------------------------------------- one sentence, word by word


@torch.no_grad()
def prefix_probabilities(model: nn.Module, ids: Sequence[int]) -> np.ndarray:
    """P(positive) after each word: the model run on every prefix of the word ids, (T,)."""
    T = len(ids)
    prefixes = torch.tensor([list(ids[: t + 1]) + [sentiment.PAD_ID] * (T - t - 1) for t in range(T)])
    lengths = torch.arange(1, T + 1)
    if getattr(model, "needs_cls", False):
        prefixes = torch.cat([torch.full((T, 1), sentiment.CLS_ID), prefixes], 1)
        lengths = lengths + 1
    return torch.sigmoid(model(prefixes, lengths)).numpy()


@dataclass(frozen=True)
class SentenceView:
    """What the models do with one review: [CLS] attention per layer and head on each word
    (L, H, T), P(positive) after each word for each recurrent model, and the final verdicts."""

    words: list[str]
    attention: np.ndarray  # (L, H, T) over the words; [CLS] itself left out
    on_cls: np.ndarray  # (L, H): what [CLS] keeps for itself
    after_word: dict[str, np.ndarray]  # "LSTM"/"plain RNN" -> (T,)
    p_attention: float
    label: int | None  # the task's rule, None if the review has no sentiment adjective


def parse_words(text: str) -> list[str]:
    """The words of ``text``; a ValueError lists every unknown word with close vocabulary words."""
    words = text.lower().replace(",", " ").replace(".", " ").split()
    if not words:
        raise ValueError("type a review, for example: the lecture was not good")
    try:
        sentiment.token_ids(words)
    except ValueError as err:
        lines = [str(err)]
        for word in dict.fromkeys(w for w in words if w not in sentiment.VOCAB):
            close = difflib.get_close_matches(word, sentiment.VOCAB, n=5, cutoff=0.5)
            lines.append(f"'{word}': close words — {', '.join(close) if close else 'none'}")
        raise ValueError("\n".join(lines)) from None
    return words


def load_models(seed: int = 0) -> dict[str, nn.Module]:
    """The shipped models of one seed: "attention", "LSTM" and "plain RNN"."""
    return {"attention": load_model("attention", seed), "LSTM": load_model("lstm", seed),
            "plain RNN": load_model("rnn", seed)}


def sentence_view(text: str | Sequence[str], models: dict[str, nn.Module]) -> SentenceView:
    """Run the three models of ``load_models`` on one review (a string or a list of words)."""
    words = parse_words(text) if isinstance(text, str) else parse_words(" ".join(text))
    ids = sentiment.token_ids(words)
    batch, lengths = sentiment.encode([words], add_cls=True)
    logits, maps = attention_forward(models["attention"], batch, lengths)
    cls = torch.stack([m[0, :, 0, :] for m in maps]).numpy()  # (L, H, T + 1)
    try:
        label = sentiment.label_of(words)
    except ValueError:
        label = None
    return SentenceView(words, cls[:, :, 1:], cls[:, :, 0],
                        {name: prefix_probabilities(models[name], ids) for name in ("LSTM", "plain RNN")},
                        float(torch.sigmoid(logits[0])), label)


EVERY_HEAD = "every head"  # the views' default: one row per layer and head, nothing averaged away


def _weights(view: SentenceView, layer: int, head: int | None) -> np.ndarray:
    """[CLS]'s weights on the words in ``layer``: one head, or the mean of the heads (T,)."""
    a = view.attention[layer]
    return a.mean(0) if head is None else a[head]


def _rows(view: SentenceView, head: int | str | None) -> list[tuple[str, np.ndarray]]:
    """(label, weights (T,)) per row shown: every head of every layer, one head, or the heads' mean."""
    L, H = view.attention.shape[:2]
    if head == EVERY_HEAD:
        return [(f"layer {layer + 1} · head {h}", view.attention[layer, h]) for layer, h in np.ndindex(L, H)]
    return [(f"layer {layer + 1}", _weights(view, layer, head)) for layer in range(L)]


def _which(head: int | str | None) -> str:
    return {None: "mean of the heads", EVERY_HEAD: EVERY_HEAD}.get(head, f"head {head}")


def _shade(value: float, rgb: tuple[int, int, int]) -> str:
    """A background of colour ``rgb`` whose strength grows with value in [0, 1]."""
    return f"rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, {min(max(value, 0.0), 1.0):.2f})"


def sentence_html(view: SentenceView, head: int | str | None = EVERY_HEAD) -> str:
    """An HTML table: words shaded by [CLS] attention (every head, one head, or their mean per layer),
    and P(positive) after each word."""
    label = {None: "no sentiment adjective", 1: "positive", 0: "negative"}[view.label]
    which = _which(head)
    rows = []
    for name, w in _rows(view, head):
        cells = "".join(f'<td style="background:{_shade(x / max(w.max(), 1e-9), (76, 114, 176))};'
                        f'padding:2px 4px" title="{x:.3f}">{html.escape(word)}<br>'
                        f'<small>{100 * x:.0f}%</small></td>' for word, x in zip(view.words, w))
        rows.append(f"<tr><th style='text-align:left;white-space:nowrap'>{name}</th>{cells}</tr>")
    for name, p in view.after_word.items():
        colours = [(85, 168, 104) if x > 0.5 else (196, 78, 82) for x in p]  # green positive, red negative
        cells = "".join(f'<td style="background:{_shade(abs(x - 0.5) * 2, c)};padding:2px 4px">{x:.2f}</td>'
                        for x, c in zip(p, colours))
        rows.append(f"<tr><th style='text-align:left'>{html.escape(name)}</th>{cells}</tr>")
    return (f"<p>[CLS] attention ({which}; shading relative to the row's largest weight) and "
            f"P(positive) after each word. The rule says: <b>{label}</b>; the attention model says "
            f"P(positive) = <b>{view.p_attention:.3f}</b>.</p>"
            f"<div style='overflow-x:auto'><table style='border-collapse:collapse;font-size:12px'>"
            f"{''.join(rows)}</table></div>")


def plot_sentence_view(view: SentenceView, head: int | str | None = EVERY_HEAD, axes=None):
    """Two panels: [CLS] attention on each word (every head as a heatmap, or bars per layer for one
    head or the heads' mean); P(positive) after each word per model."""
    rows = _rows(view, head)
    if axes is None:
        tall = 0.28 * len(rows) if head == EVERY_HEAD else 2.6
        axes = plt.subplots(2, 1, figsize=(max(6.0, 0.45 * len(view.words) + 2), tall + 2.6), sharex=True,
                            layout="constrained", height_ratios=(tall, 2.6))[1]
    x = np.arange(len(view.words))
    if head == EVERY_HEAD:
        grid = np.stack([w for _, w in rows])  # (L·H, T)
        axes[0].imshow(grid, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for i, j in np.ndindex(grid.shape):
            if grid[i, j] >= 0.05:
                axes[0].text(j, i, f"{100 * grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                             color="white" if grid[i, j] > 0.6 else "black")
        short = [name.replace("ayer ", "").replace("ead ", "") for name, _ in rows]  # "l1 · h0"
        axes[0].set_yticks(range(len(rows)), short, fontsize=8)
        axes[0].set_ylabel("layer · head")
    else:
        for layer, (name, w) in enumerate(rows):
            width = 0.8 / len(rows)
            axes[0].bar(x + (layer - (len(rows) - 1) / 2) * width, w, width, label=name)
        axes[0].set_ylim(0, 1)
        axes[0].set_ylabel("[CLS] attention")
        axes[0].legend(fontsize=8)
    axes[0].set_title(f"where [CLS] looks ({_which(head)}; numbers in %)")
    for name, p in view.after_word.items():
        axes[1].plot(x, p, marker="o", ms=3, label=name)
    axes[1].axhline(0.5, color="0.6", lw=0.8, ls=":")
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_ylabel("P(positive) after the word")
    axes[1].legend(fontsize=8)
    axes[1].set_xticks(x, view.words, rotation=60, ha="right", fontsize=8)
    return axes


def attention_explorer(models: dict[str, nn.Module], examples: Sequence[str] = EXAMPLES) -> WithFallback:
    """Pick an example or type a review; see [CLS] attention per layer and the recurrent models' curves."""
    pick = W.Dropdown(options=list(examples), value=examples[0], description="example",
                      layout=W.Layout(width="95%"))
    text = W.Text(value=examples[0], description="review", continuous_update=False,
                  layout=W.Layout(width="95%"))
    head = W.Dropdown(options=[(EVERY_HEAD, EVERY_HEAD)]
                      + [(f"head {h}", h) for h in range(models["attention"].config.n_heads)]
                      + [("mean of the heads", None)], value=EVERY_HEAD, description="heads")
    out = W.HTML()

    def update(_=None) -> None:
        try:
            out.value = sentence_html(sentence_view(text.value, models), head.value)
        except ValueError as err:
            out.value = f'<pre style="color:#b00">{html.escape(str(err))}</pre>'

    pick.observe(lambda change: setattr(text, "value", change["new"]), names="value")
    for control in (text, head):
        control.observe(update, names="value")
    update()
    axes = plot_sentence_view(sentence_view(examples[0], models))
    fig = axes[0].figure
    return WithFallback(W.VBox([pick, text, head, out]), figure_png(fig))
