"""Where [CLS] reads in lesson 01's trained attention models: per seed, layer and head.

For every review of a test set, [CLS]'s row of attention weights in each layer and head is
split over the roles its words play (``ROLES``): [CLS] itself, the first word, the negation of
the deciding adjective, that adjective, a distractor clause's adjective, and every other word.
Two things are reported apart, because they are different questions:

- **sharpness**: the largest single weight in the row (1.0 = all on one token, wherever it is);
- **share on the deciding word**: the weight on the word that decides the label (the negation
  when the adjective is negated, else the adjective).

A head can be sharp and still read the wrong word: a *sink* head puts nearly all its weight on
the same position whatever the review says (here: the first word).

Measuring all three seeds and removing every sink takes a few seconds, which each run of lesson
07 (and each graded submission) would pay again: ``python -m experiments.cls_reading`` measures
once and writes ``data/cls_reading/results.json``, which ``load_readings`` and
``load_sink_removals`` read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from . import paths, sentiment
from .heads import classifier_logits
from .inspect_models import attention_forward, roles
from .runtime import threads
from .trained import Encoded, load_model, span

SEEDS: tuple[int, ...] = (0, 1, 2)
ROLES: tuple[str, ...] = ("[CLS]", "first word", "negation", "adjective", "distractor", "elsewhere")
SINK_SHARE = 0.9  # a head whose mean weight on one fixed position is at least this is a sink
DATA_DIR = paths.data_root() / "cls_reading"
COMMAND = "python -m experiments.cls_reading"


@dataclass(frozen=True)
class Reading:
    """[CLS]'s attention in one model, averaged over the reviews of one test set.

    ``roles`` (L, H, R): mean share on each of ``ROLES``; ``sharpness`` (L, H): mean largest
    single weight; ``deciding`` (L, H): mean share on the deciding word.
    """

    seed: int
    roles: np.ndarray
    sharpness: np.ndarray
    deciding: np.ndarray
    n_reviews: int

    def share(self, role: str) -> np.ndarray:
        """The (L, H) mean share on one of ``ROLES``."""
        return self.roles[..., ROLES.index(role)]

    def sinks(self, threshold: float = SINK_SHARE) -> list[tuple[int, int]]:
        """(layer, head), 0-based, of the heads that put ≥ ``threshold`` on the first word or on [CLS]."""
        fixed = np.maximum(self.share("first word"), self.share("[CLS]"))  # (L, H)
        return [(int(layer), int(head)) for layer, head in zip(*np.nonzero(fixed >= threshold))]

    def to_dict(self) -> dict:
        return {"seed": self.seed, "n_reviews": self.n_reviews, "roles": self.roles.tolist(),
                "sharpness": self.sharpness.tolist(), "deciding": self.deciding.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping) -> Reading:
        return cls(int(data["seed"]), np.array(data["roles"]), np.array(data["sharpness"]),
                   np.array(data["deciding"]), int(data["n_reviews"]))


def _role_index(words: Sequence[str]) -> np.ndarray:
    """The role (index into ``ROLES``) of every token of ``[CLS] + words``, (T + 1,)."""
    found = roles(words)
    index = np.full(len(words) + 1, ROLES.index("elsewhere"))
    adjective = found.target
    if found.negated:
        index[found.target + 1] = ROLES.index("negation")
        adjective = next(i for i in range(found.target + 1, len(words))
                         if words[i] in sentiment.POSITIVE or words[i] in sentiment.NEGATIVE)
    index[adjective + 1] = ROLES.index("adjective")
    if found.distractor is not None:
        index[found.distractor + 1] = ROLES.index("distractor")
    if index[1] == ROLES.index("elsewhere"):  # a deciding word in first place keeps its role
        index[1] = ROLES.index("first word")
    index[0] = ROLES.index("[CLS]")
    return index


def cls_reading(model: nn.Module, reviews: sentiment.Reviews, seed: int = 0) -> Reading:
    """Measure [CLS]'s attention per layer and head of an ``AttentionClassifier`` over ``reviews``."""
    ids, lengths = sentiment.encode(reviews.sentences, add_cls=True)
    with threads(1):
        _, maps = attention_forward(model, ids, lengths)
    cls = torch.stack([m[:, :, 0, :] for m in maps], 1).numpy()  # (B, L, H, T): [CLS]'s row
    B, L, H, T = cls.shape
    by_role = np.zeros((B, L, H, len(ROLES)))
    deciding = np.zeros((B, L, H))
    for b, words in enumerate(reviews.sentences):
        index = _role_index(words)
        row = cls[b, :, :, : len(index)]  # (L, H, T_b): padding gets no weight anyway
        for r in range(len(ROLES)):
            by_role[b, :, :, r] = row[..., index == r].sum(-1)
        deciding[b] = row[..., roles(words).target + 1]
    return Reading(seed, by_role.mean(0), cls.max(-1).mean(0), deciding.mean(0), B)


def readings(test_set: str = "fillers_4", seeds: Sequence[int] = SEEDS) -> list[Reading]:
    """``cls_reading`` of the shipped attention model of every seed on one of lesson 01's test sets."""
    reviews = sentiment.test_sets()[test_set]
    return [cls_reading(load_model("attention", s), reviews, s) for s in seeds]


def load_readings(data_dir: Path = DATA_DIR) -> list[Reading]:
    """The shipped ``readings`` of every seed on the test set ``results.json`` names (fillers_4)."""
    results = paths.read_results(data_dir, COMMAND)
    if list(results["roles"]) != list(ROLES):
        raise ValueError(f"{data_dir}/results.json splits by the roles {results['roles']}, not "
                         f"{list(ROLES)}: run `{COMMAND}` to measure again")
    return [Reading.from_dict(r) for r in results["readings"]]


def load_sink_removals(data_dir: Path = DATA_DIR) -> dict[tuple[int, int, int], dict[str, float]]:
    """The shipped ``removal_cost`` of every sink of ``load_readings()``, by (seed, layer, head)."""
    results = paths.read_results(data_dir, COMMAND)
    return {(r["seed"], r["layer"], r["head"]): r["lost"] for r in results["sink_removals"]}


def percent_range(values: Sequence[float]) -> str:
    """'12–34%' over ``values`` in [0, 1] (one number if they round alike)."""
    return span([100 * float(v) for v in values], ".0f", "%")


def reading_rows(reading: Reading) -> list[str]:
    """One line per layer and head: sharpness, share on the deciding word, and the share per role."""
    names = ("sharpness", "deciding", *ROLES)  # each column as wide as its name: fits a slide
    lines = [f"seed {reading.seed} ({reading.n_reviews} reviews)", "layer head  " + " ".join(names)]
    for layer, h in np.ndindex(reading.sharpness.shape):
        values = (reading.sharpness[layer, h], reading.deciding[layer, h], *reading.roles[layer, h])
        cells = " ".join(f"{v:>{len(n)}.0%}" for n, v in zip(names, values))
        lines.append(f"{layer + 1:>5} {h:>4}  {cells}")
    return lines


def best_heads(reading: Reading) -> list[tuple[int, float, float]]:
    """Per layer, the head with the largest share on the deciding word: (head, share, sharpness)."""
    out = []
    for layer in range(reading.deciding.shape[0]):
        h = int(np.argmax(reading.deciding[layer]))
        out.append((h, float(reading.deciding[layer, h]), float(reading.sharpness[layer, h])))
    return out


def removal_cost(model: nn.Module, layer: int, head: int, data: Mapping[str, Encoded]) -> dict[str, float]:
    """Accuracy points lost on each test set when one head is removed (as in lesson 06's ablation)."""
    L, H = len(model.layers), model.config.n_heads
    head_on = torch.ones(L, H)
    head_on[layer, head] = 0.0
    lost = {}
    with threads(1):
        for name, d in data.items():
            right = d.labels.bool()
            full = ((classifier_logits(model, d.ids, d.lengths) > 0) == right).float().mean()
            without = ((classifier_logits(model, d.ids, d.lengths, head_on) > 0) == right).float().mean()
            lost[name] = 100 * float(full - without)
    return lost


_COLOURS = {"[CLS]": "#8c8c8c", "first word": "#937860", "negation": "#c44e52", "adjective": "#dd8452",
            "distractor": "#8172b3", "elsewhere": "#dcdcdc"}


def plot_readings(found: Sequence[Reading], axes=None):
    """One panel per seed: stacked bars of [CLS]'s weight by role per layer and head, sharpness as dots."""
    if axes is None:
        axes = plt.subplots(1, len(found), figsize=(4.2 * len(found), 3.6), layout="constrained",
                            sharey=True, squeeze=False)[1][0]
    for ax, reading in zip(axes, found):
        L, H = reading.sharpness.shape
        x = np.arange(L * H) + np.repeat(np.arange(L), H) * 0.6  # a gap between the layers
        bottom = np.zeros(L * H)
        for r, role in enumerate(ROLES):
            share = reading.roles[..., r].reshape(-1)
            ax.bar(x, share, 0.8, bottom=bottom, color=_COLOURS[role], label=role)
            bottom += share
        ax.plot(x, reading.sharpness.reshape(-1), "k_", ms=14, mew=2.5, label="sharpness (largest weight)")
        ax.set_xticks(x, [f"L{layer + 1}\nh{h}" for layer, h in np.ndindex(L, H)], fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"seed {reading.seed}", fontsize=10)
    axes[0].set_ylabel("[CLS]'s weight, mean over reviews")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return axes
