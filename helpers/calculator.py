"""The attention lookup of one query, step by step: the logic behind lesson 02's calculator."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np

from .attention import _matrix, softmax


@dataclass(frozen=True)
class LookupSteps:
    """Every number on the way from one query to its output."""

    tokens: tuple[str, ...]
    query_index: int
    query: np.ndarray  # (d_k,)
    raw_scores: np.ndarray  # (n,)  q · k_j
    scale: float  # √d_k, or 1 when scaling is switched off
    scaled_scores: np.ndarray  # (n,)
    weights: np.ndarray  # (n,)  softmax of the scaled scores
    contributions: np.ndarray  # (n, d_v)  weight_j · v_j
    output: np.ndarray  # (d_v,)  sum of the contributions


def lookup_steps(q, k, v, query_index: int, tokens=None, scale: bool = True) -> LookupSteps:
    """The lookup of query row ``query_index``. q: (n_q, d_k), k: (n, d_k), v: (n, d_v)."""
    q, k, v = _matrix("Q", q), _matrix("K", k), _matrix("V", v)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"Q and K need the same number of columns (d_k), got {q.shape} and {k.shape}")
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"K and V need one row per token, got {k.shape[0]} and {v.shape[0]} rows")
    if not 0 <= query_index < q.shape[0]:
        raise ValueError(f"query_index must be in 0..{q.shape[0] - 1}, got {query_index}")
    tokens = tuple(tokens) if tokens is not None else tuple(f"token {j}" for j in range(k.shape[0]))
    if len(tokens) != k.shape[0]:
        raise ValueError(f"need one token name per key row: {len(tokens)} names, {k.shape[0]} rows")
    query = q[query_index]
    raw = k @ query  # (n,)
    s = math.sqrt(q.shape[1]) if scale else 1.0
    weights = softmax(raw / s)
    contributions = weights[:, None] * v  # (n, d_v)
    return LookupSteps(tokens, query_index, query, raw, s, raw / s, weights, contributions,
                       contributions.sum(axis=0))


def with_key(k, tokens, token: str, key) -> np.ndarray:
    """A copy of the keys k (n, d_k) in which ``token``'s row is replaced by ``key`` (d_k,)."""
    k, tokens = _matrix("K", k).copy(), list(tokens)
    if token not in tokens:
        raise ValueError(f"no token {token!r}; the tokens are {', '.join(tokens)}")
    key = np.asarray(key, dtype=float)
    if key.shape != (k.shape[1],):
        raise ValueError(f"{token}'s new key needs {k.shape[1]} numbers (d_k), got shape {key.shape}")
    k[tokens.index(token)] = key
    return k


def parse_matrix(text: str, name: str = "matrix") -> np.ndarray:
    """Parse rows separated by newlines or ';' and numbers by spaces or commas: '1 0; 0 1'."""
    rows = [r for r in text.replace(";", "\n").splitlines() if r.strip()]
    if not rows:
        raise ValueError(f"{name} is empty: write one row per line, e.g. '1 0' then '0 1'")
    try:
        values = [[float(t) for t in r.replace(",", " ").split()] for r in rows]
    except ValueError as err:
        raise ValueError(f"{name}: every entry must be a number ({err})") from None
    widths = {len(r) for r in values}
    if len(widths) != 1:
        raise ValueError(f"{name}: all rows need the same number of entries, got {sorted(widths)}")
    return np.array(values)


def _vec(a: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in a) + "]"


def _bar(fraction: float, width_px: int = 80) -> str:
    """A horizontal bar of ``fraction`` of ``width_px``, drawn with CSS only (no scripts)."""
    w = max(0.0, min(1.0, float(fraction))) * width_px
    return (f'<span style="display:inline-block;width:{w:.0f}px;height:0.7em;'
            'background:#4c72b0;vertical-align:middle"></span>')


def steps_html(steps: LookupSteps) -> str:
    """An HTML table of the lookup: one row per key, then the output."""
    who = html.escape(steps.tokens[steps.query_index])
    scale = f"÷ {steps.scale:.3f}" if steps.scale != 1.0 else "(not scaled)"
    rows = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{r:.3f}</td><td>{s:.3f}</td>"
        f"<td><b>{w:.3f}</b> {_bar(w)}</td><td>{_vec(c)}</td></tr>"
        for t, r, s, w, c in zip(steps.tokens, steps.raw_scores, steps.scaled_scores,
                                 steps.weights, steps.contributions)
    )
    return (
        f"<p>Query <b>{who}</b> = {_vec(steps.query)}</p>"
        "<table><thead><tr><th>key</th><th>q · k</th>"
        f"<th>scaled {scale}</th><th>weight</th><th>weight × value</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f"<p>Output = sum of the last column = <b>{_vec(steps.output)}</b></p>"
    )
