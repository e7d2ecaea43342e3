"""Why recurrent networks forget: lesson 01's references and its gradient measurement.

- ``rnn_forward`` and ``gradient_by_position`` are the reference answers the checks compare with.
- ``torch_rnn_forward`` runs the same recurrence through ``torch.nn.RNN`` (an independent witness).
- ``gradient_profile`` measures, at initialisation, how strongly each word of a long review can
  move a model's output: the norm of the gradient of the logit with respect to each word's
  embedding, relative to the last word's, by distance from the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from . import sentiment
from .models import build
from .trained import load_model


def rnn_forward(x, w_x, w_h, b, h0=None) -> np.ndarray:
    """Hidden states H (T, d_h) of h_t = tanh(x_t w_x + h_{t-1} w_h + b); x (T, d_in), h0 (d_h,) or zeros."""
    x, w_x, w_h, b = (np.asarray(a, dtype=float) for a in (x, w_x, w_h, b))
    if x.ndim != 2 or w_x.shape != (x.shape[1], w_h.shape[0]) or w_h.shape[0] != w_h.shape[1]:
        raise ValueError(f"expected x (T, d_in), w_x (d_in, d_h), w_h (d_h, d_h); got x {x.shape}, "
                         f"w_x {w_x.shape}, w_h {w_h.shape}")
    if b.shape != (w_h.shape[0],):
        raise ValueError(f"expected b of shape ({w_h.shape[0]},), got {b.shape}")
    h = np.zeros(w_h.shape[0]) if h0 is None else np.asarray(h0, dtype=float)
    if h.shape != b.shape:
        raise ValueError(f"expected h0 of shape {b.shape}, got {h.shape}")
    states = []
    for x_t in x:  # one step per position: step t needs h_{t-1}
        h = np.tanh(x_t @ w_x + h @ w_h + b)  # (d_h,)
        states.append(h)
    return np.stack(states) if states else np.zeros((0, len(b)))  # (T, d_h)


def torch_rnn_forward(x, w_x, w_h, b, h0=None) -> np.ndarray:
    """The same states from ``torch.nn.RNN``, which stores the transposes: weight_ih is w_xᵀ (d_h, d_in)."""
    x = torch.as_tensor(np.asarray(x, dtype=float))
    w_x, w_h, b = (torch.as_tensor(np.asarray(a, dtype=float)) for a in (w_x, w_h, b))
    rnn = torch.nn.RNN(w_x.shape[0], w_x.shape[1], nonlinearity="tanh", dtype=torch.float64)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(w_x.T)
        rnn.weight_hh_l0.copy_(w_h.T)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()  # PyTorch has two biases; their sum plays the role of b
        h = torch.zeros(1, w_x.shape[1], dtype=torch.float64) if h0 is None else \
            torch.as_tensor(np.asarray(h0, dtype=float))[None]
        return rnn(x, h)[0].numpy()  # (T, d_h)


def gradient_by_position(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """L2 norm of ∂f/∂x_t for every row t of x (T, d) -> (T,), detached; x itself is left untouched."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise ValueError(f"x must be a (T, d) torch tensor, got {type(x).__name__} "
                         f"{tuple(getattr(x, 'shape', ()))}")
    leaf = x.detach().clone().requires_grad_(True)  # a copy: x keeps requires_grad=False, no .grad
    out = f(leaf)
    if out.numel() != 1:
        raise ValueError(f"f must return a scalar tensor, got shape {tuple(out.shape)}")
    (grad,) = torch.autograd.grad(out.reshape(()), leaf)  # (T, d)
    return grad.norm(dim=1).detach()  # (T,)


@dataclass(frozen=True)
class GradientProfile:
    """Gradient norm by distance from the last word, relative to the last word, per model.

    ``ratios[name]`` is (n_samples, n_distances); column d is the word d positions before the end.
    """

    ratios: dict[str, np.ndarray]
    n_distances: int
    last_word: dict[str, np.ndarray] = field(default_factory=dict)  # (n_samples,) the last word's own norm

    def median(self, name: str) -> np.ndarray:
        """Median ratio at each distance (n_distances,)."""
        return np.median(self.ratios[name], axis=0)

    def at(self, name: str, distance: int) -> float:
        """The median ratio ‖∂y/∂x at `distance` words before the end‖ / ‖∂y/∂x at the last word‖."""
        if not 0 <= distance < self.n_distances:
            raise ValueError(f"distance must lie in 0..{self.n_distances - 1}, got {distance}")
        return float(self.median(name)[distance])

    def absolute_at(self, name: str, distance: int) -> float:
        """The median ‖∂y/∂x‖ itself (not divided by the last word's) at ``distance`` words before the end."""
        if not 0 <= distance < self.n_distances:
            raise ValueError(f"distance must lie in 0..{self.n_distances - 1}, got {distance}")
        return float(np.median(self.ratios[name][:, distance] * self.last_word[name]))


def long_reviews(n: int, seed: int = 0) -> list[list[str]]:
    """``n`` reviews with 8 filler phrases and a distractor (42-60 words), drawn apart from the test sets."""
    rng = random.Random(f"gradients/{seed}")
    return [sentiment.make_sentence(rng, 8, distractor=True)[0] for _ in range(n)]


def gradient_profile(names: Sequence[str] = ("rnn", "lstm", "attention"), seeds: Sequence[int] = (0, 1, 2),
                     n_reviews: int = 10, n_distances: int = 42, trained: bool = False,
                     grad_fn: Callable = gradient_by_position) -> GradientProfile:
    """Measure ‖∂logit/∂(word embedding)‖ by distance from the end, for each model and seed.

    Each model is built with each seed — fresh random weights, or with ``trained`` the weights
    stored in ``data/sentiment/`` — and shown the same ``n_reviews`` long reviews; each review's
    norms are divided by its last word's.
    """
    reviews = long_reviews(n_reviews)
    if n_distances > min(len(r) for r in reviews):
        raise ValueError(f"n_distances must be at most {min(len(r) for r in reviews)}, the shortest review")
    ratios, last = {}, {}
    for name in names:
        rows, ends = [], []
        for seed in seeds:
            torch.manual_seed(seed)
            model = (load_model(name, seed) if trained else build(name)).double().eval()
            for words in reviews:
                ids, lengths = sentiment.encode([words], add_cls=model.needs_cls)  # (1, T), (1,)
                emb = model.embed(ids)[0].detach()  # (T, d)

                def logit(e, model=model, lengths=lengths):
                    return model.from_embeddings(e[None], lengths)[0]

                norms = grad_fn(logit, emb).numpy()[int(model.needs_cls):]  # one per word, not [CLS]
                from_end = norms[::-1][:n_distances]  # distance 0 = the last word
                rows.append(from_end / from_end[0])
                ends.append(from_end[0])
        ratios[name] = np.array(rows)  # (len(seeds) * n_reviews, n_distances)
        last[name] = np.array(ends)
    return GradientProfile(ratios, n_distances, last)
