"""Why attention divides its scores by √d_k: reference answers and the measurements of lesson 03.

The reference functions (``score_std``, ``softmax_jacobian``, ``entropy``) are what the
checks compare against. The measurement functions draw random queries and keys, as at
initialisation, and report how peaked the softmax is and how large its Jacobian is, with and
without the scale; the lesson's figures, table and widget show their results.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .attention import softmax

# A softmax Jacobian whose Frobenius norm is below this counts as "stalled": the gradient that
# reaches the scores is at most this fraction of the gradient that reaches the weights.
STALLED = 1e-2


def score_std(d_k: int, n_pairs: int = 10_000, seed: int = 0) -> float:
    """Sample standard deviation of q·k over ``n_pairs`` pairs q, k ~ N(0, I) of width d_k."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_pairs, d_k))  # (n_pairs, d_k)
    k = rng.standard_normal((n_pairs, d_k))  # (n_pairs, d_k)
    scores = np.einsum("nd,nd->n", q, k)  # (n_pairs,) one dot product per pair
    return float(scores.std(ddof=1))


def softmax_jacobian(p) -> np.ndarray:
    """∂p_i/∂z_j = p_i(δ_ij − p_j) for probabilities p (n,) = softmax(z); returns (n, n)."""
    p = np.asarray(p, dtype=float)
    return np.diag(p) - np.outer(p, p)


def entropy(p, axis: int = -1) -> np.ndarray:
    """Shannon entropy −Σ p log p in nats along ``axis``, with 0·log 0 = 0 (no NaN, no warning)."""
    p = np.asarray(p, dtype=float)
    safe = np.where(p > 0, p, 1.0)  # log(1) = 0, so zero entries add nothing and log never sees 0
    return -np.sum(p * np.log(safe), axis=axis)


def measure_score_std(d_ks: Sequence[int], n_pairs: int = 10_000, seed: int = 0,
                      score_std: Callable = score_std) -> np.ndarray:
    """``score_std(d_k, n_pairs, seed)`` for each d_k (any implementation); returns (len(d_ks),)."""
    return np.array([float(score_std(int(d), n_pairs=n_pairs, seed=seed)) for d in d_ks])


def random_scores(d_k: int, n_queries: int = 500, n_keys: int = 16, seed: int = 0) -> np.ndarray:
    """Raw scores q·k of random queries, each against its own n_keys random keys: (n_queries, n_keys)."""
    rng = np.random.default_rng([seed, d_k])  # reproducible, and independent across d_k
    q = rng.standard_normal((n_queries, d_k))  # (n_queries, d_k)
    k = rng.standard_normal((n_queries, n_keys, d_k))  # (n_queries, n_keys, d_k)
    return np.einsum("qd,qkd->qk", q, k)  # (n_queries, n_keys)


@dataclass(frozen=True)
class SoftmaxStats:
    """How peaked the softmax of a batch of scores is, and how large its Jacobian is."""

    d_k: int
    scale: bool  # were the scores divided by √d_k?
    score_std: float  # spread of the scores that enter the softmax
    max_weight: float  # mean over queries of the largest weight (1 = one-hot)
    entropy: float  # mean over queries, in nats (log n_keys = uniform)
    jacobian_norm: float  # median over queries of the Frobenius norm of ∂p/∂z
    jacobian_quartiles: tuple[float, float]  # 25th and 75th percentiles of that norm
    stalled: float  # fraction of queries whose Jacobian norm is below STALLED


def softmax_stats(raw_scores, d_k: int, scale: bool, entropy: Callable = entropy,
                  softmax_jacobian: Callable = softmax_jacobian) -> SoftmaxStats:
    """Statistics of softmax(raw_scores / √d_k if scale) over the rows of raw_scores (n_queries, n_keys).

    ``entropy`` and ``softmax_jacobian`` may be a learner's own implementations.
    """
    scores = np.asarray(raw_scores, dtype=float) / (math.sqrt(d_k) if scale else 1.0)
    weights = softmax(scores, axis=-1)  # (n_queries, n_keys)
    norms = np.array([np.linalg.norm(np.asarray(softmax_jacobian(p), dtype=float)) for p in weights])
    q25, median, q75 = np.quantile(norms, [0.25, 0.5, 0.75])
    return SoftmaxStats(
        d_k=int(d_k),
        scale=bool(scale),
        score_std=float(scores.std()),
        max_weight=float(weights.max(axis=-1).mean()),
        entropy=float(np.mean(entropy(weights, axis=-1))),
        jacobian_norm=float(median),
        jacobian_quartiles=(float(q25), float(q75)),
        stalled=float(np.mean(norms < STALLED)),
    )


@dataclass(frozen=True)
class Sweep:
    """``softmax_stats`` for each d_k, on the same random scores without and with the scale."""

    d_ks: tuple[int, ...]
    n_keys: int
    raw: tuple[SoftmaxStats, ...]
    scaled: tuple[SoftmaxStats, ...]


def scaling_sweep(d_ks: Sequence[int], n_queries: int = 500, n_keys: int = 16, seed: int = 0,
                  entropy: Callable = entropy, softmax_jacobian: Callable = softmax_jacobian) -> Sweep:
    """Measure the softmax of random scores without and with ÷√d_k for every d_k in ``d_ks``."""
    raw, scaled = [], []
    for d_k in d_ks:
        scores = random_scores(int(d_k), n_queries, n_keys, seed)  # (n_queries, n_keys)
        raw.append(softmax_stats(scores, int(d_k), False, entropy, softmax_jacobian))
        scaled.append(softmax_stats(scores, int(d_k), True, entropy, softmax_jacobian))
    return Sweep(tuple(int(d) for d in d_ks), n_keys, tuple(raw), tuple(scaled))


def sweep_table(sweep: Sweep) -> str:
    """The sweep as a plain-text table: one line per d_k, "without → with" the scale."""
    head = (f"{'d_k':>5} | {'score std':>14} | {'max weight':>14} | {'entropy (nats)':>14} | "
            f"{'median ‖J‖':>16} | {'stalled':>12}")
    lines = [head, "-" * len(head)]
    for r, s in zip(sweep.raw, sweep.scaled):
        lines.append(f"{r.d_k:>5} | {r.score_std:>6.2f} → {s.score_std:<5.2f} | "
                     f"{r.max_weight:>6.3f} → {s.max_weight:<5.3f} | "
                     f"{r.entropy:>6.3f} → {s.entropy:<5.3f} | "
                     f"{r.jacobian_norm:>7.4f} → {s.jacobian_norm:<6.4f} | "
                     f"{r.stalled:>4.0%} → {s.stalled:<4.0%}")
    lines.append(f"({sweep.n_keys} keys per query; uniform weights would have entropy "
                 f"log {sweep.n_keys} = {math.log(sweep.n_keys):.3f} nats and max weight "
                 f"{1 / sweep.n_keys:.3f}; stalled = ‖J‖ < {STALLED:g})")
    return "\n".join(lines)


def sweep_reading(sweep: Sweep, typical: int = 64) -> str:
    """What the sweep shows about the Jacobian, in sentences computed from it: where the unscaled
    softmax has the larger gradient, where it falls behind (and at the ``typical`` head width), where
    its median stalls, and the range the scaled one stays in."""
    pairs = list(zip(sweep.raw, sweep.scaled))
    out = []
    ahead = [(r, s) for r, s in pairs if r.jacobian_norm > s.jacobian_norm]
    if ahead:
        r, s = ahead[-1]
        out.append(f"Without the scale the median ‖J‖ is the larger one up to d_k = {r.d_k} "
                   f"({r.jacobian_norm:.3f} against {s.jacobian_norm:.3f}): scores that spread a little "
                   "sharpen the softmax, and a moderately peaked softmax is more sensitive than a flat "
                   "one. Both extremes have small gradients — a flat softmax because every weight is "
                   "small, a one-hot one because nothing moves.")
    behind = [(r, s) for r, s in pairs if r.jacobian_norm < s.jacobian_norm]
    if behind:
        r, s = behind[0]
        out.append(f"From d_k = {r.d_k} the unscaled softmax falls behind ({r.jacobian_norm:.3f} against "
                   f"{s.jacobian_norm:.3f}).")
    at = {r.d_k: (r, s) for r, s in pairs}.get(typical)
    if at:
        r, s = at
        out.append(f"At d_k = {typical}, a common head width, its median ‖J‖ is {r.jacobian_norm:.3f} "
                   f"against {s.jacobian_norm:.3f} with the scale, and {r.stalled:.0%} of the queries stall.")
    dead = [r for r, _ in pairs if r.jacobian_norm < STALLED]
    if dead:
        out.append(f"The median query itself stalls (‖J‖ < {STALLED:g}) from d_k = {dead[0].d_k}: "
                   + ", ".join(f"{r.jacobian_norm:.4f} at {r.d_k}" for r in dead)
                   + f", with {dead[0].stalled:.0%}–{dead[-1].stalled:.0%} of the queries stalled.")
    scaled = [s.jacobian_norm for _, s in pairs]
    worst = max(s.stalled for _, s in pairs)
    stalls = "no query stalls." if worst == 0 else f"at most {worst:.0%} of the queries stall."
    out.append(f"With the scale the median stays between {min(scaled):.3f} and {max(scaled):.3f} at every "
               f"width, and {stalls}")
    return textwrap.fill(" ".join(out), width=100)


@dataclass(frozen=True)
class ScalingView:
    """What the lesson 03 widget shows for one d_k and one setting of the scale switch."""

    d_k: int
    scale: bool
    scores: np.ndarray  # (n_queries, n_keys) the scores that enter the softmax
    weights: np.ndarray  # (n_queries, n_keys) their softmax
    stats: SoftmaxStats
    shown: int  # the query on display: the median one by its largest weight without the scale


def scaling_view(d_k: int, scale: bool, n_queries: int = 500, n_keys: int = 16,
                 seed: int = 0) -> ScalingView:
    """Random scores for width d_k, divided by √d_k if ``scale``, their softmax and its statistics."""
    if int(d_k) < 1:
        raise ValueError(f"d_k must be a positive integer, got {d_k}")
    raw = random_scores(int(d_k), n_queries, n_keys, seed)  # (n_queries, n_keys)
    scores = raw / (math.sqrt(d_k) if scale else 1.0)
    peak = softmax(raw, axis=-1).max(axis=-1)  # (n_queries,) the same ranking with the scale on or off
    shown = int(np.argsort(peak)[len(peak) // 2])  # a typical query, not a lucky or an unlucky one
    return ScalingView(int(d_k), bool(scale), scores, softmax(scores, axis=-1),
                       softmax_stats(raw, int(d_k), scale), shown)


def view_summary(view: ScalingView) -> str:
    """One line of the numbers behind a ``ScalingView``."""
    s, n = view.stats, view.weights.shape[1]
    how = "q·k / √d_k" if view.scale else "q·k (not scaled)"
    return (f"d_k = {view.d_k}, scores {how}: std {s.score_std:.2f} · mean max weight "
            f"{s.max_weight:.3f} · mean entropy {s.entropy:.2f} of log {n} = {math.log(n):.2f} nats · "
            f"median ‖J‖ {s.jacobian_norm:.2g} · stalled {s.stalled:.0%}")


@dataclass(frozen=True)
class InitSpread:
    """Spreads measured through freshly initialised ``nn.Linear`` projections."""

    component_std: float  # std of one component of q = x W_Q
    score_std: float  # std of q·k
    scaled_score_std: float  # std of q·k / √d_k


def init_spread(d_model: int = 512, d_k: int = 64, n_tokens: int = 2048, seed: int = 0) -> InitSpread:
    """Project unit-variance tokens x (n_tokens, d_model) with PyTorch's default ``nn.Linear`` init."""
    import torch  # only this measurement needs torch; keep the rest of the module light

    with torch.random.fork_rng():  # leave the caller's global torch RNG untouched
        torch.manual_seed(seed)
        w_q = torch.nn.Linear(d_model, d_k, bias=False)
        w_k = torch.nn.Linear(d_model, d_k, bias=False)
        x = torch.randn(n_tokens, d_model)  # (n, d_model)
        with torch.no_grad():
            q, k = w_q(x), w_k(x)  # (n, d_k) each
            scores = q @ k.T  # (n, n)
            off_diagonal = ~torch.eye(n_tokens, dtype=torch.bool)  # a token against the others
            raw = scores[off_diagonal]
    return InitSpread(float(q.std()), float(raw.std()), float(raw.std() / math.sqrt(d_k)))


@dataclass(frozen=True)
class HeadSpread:
    """How one head of lesson 01's attention classifier scores its keys, on lesson 01's test reviews."""

    seed: int
    layer: int  # 1 or 2
    head: int  # 1 … 4
    trained: bool  # the shipped weights, or the same model as initialised from the same seed
    score_std: float  # std of q·k/√d_head over the real (query, key) pairs
    entropy: float  # mean entropy of a query's weights, as a share of log(number of real keys)
    largest: float  # mean largest weight of a query
    stalled: float  # share of queries whose softmax Jacobian has Frobenius norm below STALLED


UNSCALED_64 = math.sqrt(64)  # the spread of q·k for unit-variance components at d_k = 64


def init_prediction(model) -> float:
    """The spread of q·k/√d_head that the variance argument predicts for ``model`` at initialisation.

    PyTorch draws ``nn.MultiheadAttention``'s input projection (3D, D) with Xavier's uniform
    initialisation: weights of variance 2 / (fan_in + fan_out). A pre-norm layer feeds it
    LayerNorm's output, of variance 1 per token at initialisation, so each component of q and k
    has variance σ² = D · 2 / (D + 3D) = ½, and the scaled scores have standard deviation σ².
    """
    fan_out, fan_in = model.layers[0].self_attn.in_proj_weight.shape
    return fan_in * 2.0 / (fan_in + fan_out)


def _row_stats(scores, keep):
    """Per query row of scaled scores (B, T, T) with −∞ at padding: entropy share, largest, ‖J‖."""
    import torch

    p = scores.softmax(dim=-1)  # (B, T, T)
    entropy = -torch.where(p > 0, p * p.clamp_min(1e-30).log(), 0.0).sum(-1)  # (B, T)
    n_keys = keep.sum(-1, keepdim=True).expand_as(entropy).double()  # (B, T)
    p2 = (p * p).sum(-1)
    # ‖diag(p) − p pᵀ‖²_F = Σ p_i² − 2 Σ p_i³ + (Σ p_i²)²
    jacobian = (p2 - 2 * (p ** 3).sum(-1) + p2 ** 2).clamp_min(0).sqrt()
    return entropy / n_keys.log(), p.max(-1).values, jacobian


def trained_spread(seeds: Sequence[int] = (0, 1, 2), per_set: int = 250) -> list[HeadSpread]:
    """Every head of the shipped attention classifiers (lesson 01) and of the same models untrained.

    Reads the first ``per_set`` reviews of each of lesson 01's four test sets; only real tokens count,
    as queries and as keys.
    """
    import torch

    from .trained import check_sample, initial_model, load_model, test_data

    check_sample(seeds, per_set)
    reviews = [(data.ids[:per_set], data.lengths[:per_set])
               for data in test_data(add_cls=True).values()]
    out = []
    for seed in seeds:
        untrained = initial_model("attention", seed)  # what training started from
        for trained, model in ((False, untrained), (True, load_model("attention", seed))):
            model.eval()
            per_layer: dict[tuple[int, int], list] = {}
            for ids, lengths in reviews:
                ids = ids[:, : int(lengths.max())]
                keep = torch.arange(ids.shape[1]) < lengths[:, None]  # (B, T) real tokens
                pairs = keep[:, :, None] & keep[:, None, :]  # (B, T, T) real query and real key
                for layer, scores in enumerate(model.attention_scores(ids, lengths), start=1):
                    for head in range(scores.shape[1]):
                        s = scores[:, head].double()  # (B, T, T)
                        share, largest, jacobian = _row_stats(s, keep)
                        per_layer.setdefault((layer, head + 1), []).append(
                            (s[pairs], share[keep], largest[keep], jacobian[keep]))
            for (layer, head), parts in per_layer.items():
                s, share, largest, jacobian = (torch.cat(column) for column in zip(*parts))
                out.append(HeadSpread(seed, layer, head, trained, float(s.std()), float(share.mean()),
                                      float(largest.mean()), float((jacobian < STALLED).double().mean())))
    return out


def spread_groups(spreads: Sequence[HeadSpread]) -> list[tuple[str, list[HeadSpread]]]:
    """The heads at initialisation (both layers), then the trained heads of each layer."""
    layers = sorted({s.layer for s in spreads})
    groups = [("at initialisation", [s for s in spreads if not s.trained])]
    groups += [(f"trained, layer {n}", [s for s in spreads if s.trained and s.layer == n]) for n in layers]
    return [(name, heads) for name, heads in groups if heads]


def trained_spread_table(spreads: Sequence[HeadSpread]) -> str:
    """Ranges over heads and seeds: score spread, entropy share, largest weight, stalled queries."""
    from .trained import span

    lines = [f"{'':20} {'heads':>5}  {'std of q·k/√d':>14}  {'entropy / log n':>15}  "
             f"{'largest weight':>14}  {'stalled':>9}"]
    for name, heads in spread_groups(spreads):
        lines.append(f"{name:20} {len(heads):>5}  {span([h.score_std for h in heads], '.2g'):>14}  "
                     f"{span([h.entropy for h in heads], '.2f'):>15}  "
                     f"{span([h.largest for h in heads], '.2f'):>14}  "
                     f"{span([100 * h.stalled for h in heads], '.0f', '%'):>9}")
    return "\n".join(lines)


def trained_spread_reading(spreads: Sequence[HeadSpread], predicted: float, width: int = 92) -> str:
    """What the table says, in sentences computed from it."""
    from .trained import span

    untrained = [h.score_std for h in spreads if not h.trained]
    trained = [h for h in spreads if h.trained]
    growth = [t.score_std / u.score_std for t in trained for u in spreads
              if not u.trained and (u.seed, u.layer, u.head) == (t.seed, t.layer, t.head)]
    layers = sorted({h.layer for h in trained})
    last = [h.score_std for h in trained if h.layer == layers[-1]]
    beyond = sum(v > UNSCALED_64 for v in last)
    sharp = sum(h.largest > 0.5 for h in trained)
    text = (f"Before training, the {len(untrained)} heads' scaled scores have a spread of "
            f"{span(untrained, '.2f')}: the variance argument predicts {predicted:.2f}. After training "
            f"each head's spread is {span(growth, '.3g', '×')} what it started with. In layer "
            f"{layers[-1]} it is {span(last, '.2g')}, and {beyond} of its {len(last)} heads spread their "
            f"scores wider than {UNSCALED_64:g}, the spread of unscaled scores at d_k = 64. "
            f"In {sharp} of the {len(trained)} trained heads the average query puts more than half of "
            "its weight on one key.")
    return textwrap.fill(text, width)
