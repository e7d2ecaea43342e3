# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · What attention costs, and how to pay less
#
# **Promise:** by the end you can count the work of a Transformer layer term by term, say when
# the famous `n²` matters and when it does not, compute exact attention without ever storing the
# `n × n` matrix, and measure what that buys on your own machine.
#
# **You will**
# - read Vaswani et al.'s comparison of attention, recurrence and convolution;
# - count the multiply-adds of a whole layer (exercise 1) and the share of the `n × n` products
#   (exercise 2), for ViT-Base at 224 and at 1024 pixels;
# - write attention that walks the keys in blocks with a running maximum and a running sum
#   (exercise 3) — the idea inside FlashAttention;
# - measure time and memory of three implementations as `n` grows;
# - choose between attention, recurrence, convolution and local attention for a task.
#
# **Time:** about 50 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.checks.cost import (
    check_layer_macs,
    check_never_builds_scores,
    check_online_softmax_attention,
    check_score_share,
)
from helpers.cost import (
    cost_ratios,
    cost_table,
    crossover_n,
    layer_type_costs,
    measure_methods,
    plot_layer_shares,
    plot_method_costs,
    tensor_memory,
)
from helpers.quiz import check_choice, grade_choice

torch.set_printoptions(precision=4, sci_mode=False)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## Three ways to mix a sequence
#
# A layer that lets `n` items of width `d` exchange information can be recurrent (one step per
# item), convolutional (a kernel of width `k` over neighbours) or self-attention (every pair).
# Vaswani et al. (2017, Table 1) compared the three by the work per layer, by how many steps must
# run one after the other, and by the longest path a signal travels between two positions:
#
# | layer | work per layer | sequential steps | longest path |
# |---|---|---|---|
# | self-attention | `O(n²·d)` | `O(1)` | `O(1)` |
# | recurrent | `O(n·d²)` | `O(n)` | `O(n)` |
# | convolution | `O(k·n·d²)` | `O(1)` | `O(log_k n)` dilated, `O(n/k)` contiguous |
#
# Attention's path is one step between any two positions, and all positions are computed at
# once — the two advantages lesson 01 pointed out (it measured the first, the gradient across
# distance, and argued the second). Its price is the `n²`. Which is larger,
# `n²·d` or `n·d²`, depends on whether `n < d`. The leading terms for a sentence and for a large
# image:

# %%
for n, d, what in [(50, 512, "a 50-word sentence, d = 512"),
                   (4097, 768, "a 1024 × 1024 image in 16 × 16 patches (+ [CLS]), d = 768")]:
    print(f"{what}:")
    print(f"  {'layer':<34}{'leading term':>18}{'sequential':>12}{'longest path':>14}")
    rows = layer_type_costs(n, d, k=3)
    for row in rows:
        print(f"  {row.name:<34}{row.ops:>18,}{row.sequential_steps:>12,}{row.max_path:>14,}")
    print(f"  self-attention / recurrent work: {rows[0].ops / rows[1].ops:.2f}  (= n / d)\n")

# %% [markdown]
# For the sentence, attention's pairwise work is the *smaller* term; for the image it is more than five
# times the recurrent one. But a real layer does more than the pairwise products — next, the
# whole bill.

# %% [markdown]
# ## The whole layer, term by term
#
# One encoder layer on `n` tokens of width `d` with an FFN of inner width `d_ff`. Counting one
# multiply-add (MAC) per term of each matrix product — `(a, b) @ (b, c)` costs `a·b·c` — and
# ignoring biases, softmax and norms:
#
# | part | product(s) |
# |---|---|
# | projections | `x W_Q`, `x W_K`, `x W_V` and the output `W_O`: four `(n, d) @ (d, d)` |
# | scores | `Q Kᵀ`: `(n, d) @ (d, n)` |
# | mix | `weights @ V`: `(n, n) @ (n, d)` |
# | FFN | `(n, d) @ (d, d_ff)`, then `(n, d_ff) @ (d_ff, d)` |
#
# (Splitting into heads does not change the counts: `h` heads of width `d/h` do `h` times less
# work each.) Before writing any code, work out each row's count on paper: which rows grow with
# `n²`, which with `n`?
#
# **Exercise 1 (2 points).** Write `layer_macs(n, d_model, d_ff)` returning a dict with the keys
# `"projections"`, `"scores"`, `"mix"`, `"ffn"`: each part's multiply-adds, as Python ints.

# %% nbgrader={"grade": false, "grade_id": "layer_macs", "locked": false, "schema_version": 3, "solution": true}
def layer_macs(n, d_model, d_ff):
    """Multiply-adds of one encoder layer: dict with projections, scores, mix, ffn."""
    ### BEGIN SOLUTION
    return {
        "projections": 4 * n * d_model * d_model,
        "scores": n * n * d_model,
        "mix": n * n * d_model,
        "ffn": 2 * n * d_model * d_ff,
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "layer_macs_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_layer_macs(layer_macs)
### BEGIN HIDDEN TESTS
from helpers import cost as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(layer_macs, check_layer_macs, "layer_macs")
for seed in fresh_seeds(3):
    check_layer_macs(layer_macs, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _args in [(131_072, 8192, 28_672), (1, 1, 1), tuple(int(x) for x in _rng.integers(1, 10_000, size=3))]:
    with quiet():
        _got = layer_macs(*_args)
    assert _got == reference.layer_macs(*_args), \
        f"layer_macs{_args} returned {_got}, expected {reference.layer_macs(*_args)}"
### END HIDDEN TESTS

# %% [markdown]
# **Exercise 2 (1 point).** Write `score_share(n, d_model, d_ff)`: the fraction (between 0 and
# 1) of the layer's multiply-adds spent in the two `n × n` products.

# %% nbgrader={"grade": false, "grade_id": "score_share", "locked": false, "schema_version": 3, "solution": true}
def score_share(n, d_model, d_ff):
    """(scores + mix) / total multiply-adds of one layer, a float in [0, 1]."""
    ### BEGIN SOLUTION
    macs = layer_macs(n, d_model, d_ff)
    return (macs["scores"] + macs["mix"]) / sum(macs.values())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "score_share_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_score_share(score_share)
### BEGIN HIDDEN TESTS
from helpers import cost as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(score_share, check_score_share, "score_share")
# The calls below use the course's layer_macs, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed in fresh_seeds(3):
    check_score_share(score_share, seed=seed, verbose=False)
with quiet(), course_callees(score_share, "layer_macs", verbose=False):
    _shares = [float(score_share(n, 512, 2048)) for n in (10, 100, 1000, 10_000, 10_000_000)]
expect_close(_shares, [reference.score_share(n, 512, 2048) for n in (10, 100, 1000, 10_000, 10_000_000)],
             "score_share for d_model = 512, d_ff = 2048 and n from 10 to 10 million")
assert all(a < b for a, b in zip(_shares, _shares[1:])), "score_share must grow with n"
### END HIDDEN TESTS

# %% [markdown]
# ### ViT-Base: 224 pixels and 1024 pixels
#
# A ViT-Base layer has `d = 768` and `d_ff = 3072`. A 224 × 224 image cut into 16 × 16 patches
# gives 196 patches plus a [CLS] token, `n = 197`; a 1024 × 1024 image gives `n = 4,097`
# (lesson 09 builds these tokens). With your `layer_macs` and `score_share`:

# %%
d_vit, d_ff_vit = 768, 3072
for n in (197, 4097):
    macs = layer_macs(n, d_vit, d_ff_vit)
    total = sum(macs.values())
    parts = ", ".join(f"{name} {count / 1e9:.2f}" for name, count in macs.items())
    print(f"n = {n:5,}: {parts}  (billions of MACs)")
    print(f"{'':11}the two n × n products: {score_share(n, d_vit, d_ff_vit):.1%} of {total / 1e9:.2f} billion")


# %% [markdown]
# At 224 pixels the `n × n` products are about 4% of the layer: the projections and above all
# the FFN dominate, and halving the cost of attention would barely show. At 1024 pixels they are
# almost half. Where do the two halves meet? Setting `2·n²·d = 4·n·d² + 2·n·d·d_ff` and dividing
# by `2·n·d` gives `n = 2·d + d_ff`:

# %%
n_cross = crossover_n(d_vit, d_ff_vit)
print(f"crossover for ViT-Base: n = 2·{d_vit} + {d_ff_vit} = {n_cross:,} tokens; "
      f"share there: {score_share(n_cross, d_vit, d_ff_vit):.3f}")
ns = np.unique(np.geomspace(16, 65_536, 200).astype(int))
plot_layer_shares(ns, d_vit, d_ff_vit, marks=(197, 4097))
plt.show()

# %% [markdown]
# Below a few thousand tokens, a "cheaper attention" saves little compute: the `n`-linear parts
# are the bill. Beyond the crossover the `n²` part takes over, and at long contexts it is nearly
# everything. Memory is a different story: even when the `n × n` products are a small share of
# the work, storing the matrix can be the largest allocation (lesson 04: 32 MiB per head at 4096
# tokens in fp16). That is what we remove next.

# %% [markdown]
# ## Softmax without the whole row
#
# The softmax of a row of scores seems to need the whole row twice: once for its maximum (to
# subtract it, lesson 02) and once for the sum of the exponentials. The **online softmax**
# (Milakov & Gimelshein, 2018) gets both in a single pass over blocks. Keep, for each query,
#
# - `m` — the largest score seen so far,
# - `ℓ` — the sum of `exp(s − m)` over the scores seen so far,
# - `a` — the sum of `exp(s − m) · v` over the keys seen so far (an unnormalised output).
#
# When a new block brings a larger maximum `m′`, everything summed so far was measured against the
# old `m`. Since `exp(s − m′) = exp(s − m) · exp(m − m′)`, multiplying `ℓ` and `a` by
# `c = exp(m − m′)` brings them up to date; then add the new block's terms. After the last block
# the output is `a / ℓ`, exactly the softmax-weighted average. Try it on paper with the scores
# `[1, 3, 2]` and then `[6, 5, 0.5]`: what is `c`, and what goes wrong if you forget it?

# %% [markdown]
# For attention, the blocks are blocks of **keys**: each block gives an `(n_q, block_size)` slice
# of scores, which is used and thrown away. What stays between blocks is `m` and `ℓ` (one number
# per query) and `a` (`(n_q, d_v)`): memory linear in `n`, never `n_q × n_k`. FlashAttention (Dao
# et al., 2022) is this loop, written so that each tile stays in a GPU's fast on-chip memory.
#
# **Exercise 3 (4 points).** Write `online_softmax_attention(q, k, v, block_size=64)` for torch
# tensors `q (…, n_q, d_k)`, `k (…, n_k, d_k)`, `v (…, n_k, d_v)`: exact attention
# `softmax(q kᵀ/√d_k) v`, returning only the output `(…, n_q, d_v)`. Walk the keys in blocks of
# `block_size` (the last block may be shorter) with a running maximum, a running sum and an
# accumulator as above, and divide once at the end. Never build an `(n_q, n_k)` tensor. Useful:
# `torch.full(shape, -math.inf, dtype=q.dtype)`, `x.amax(dim=-1, keepdim=True)`,
# `torch.maximum(a, b)`, and `k[..., start:start + block_size, :]` (slicing past the end is fine).

# %% nbgrader={"grade": false, "grade_id": "online_softmax_attention", "locked": false, "schema_version": 3, "solution": true}
def online_softmax_attention(q, k, v, block_size=64):
    """Exact attention over blocks of keys with a running max and sum: (..., n_q, d_v)."""
    ### BEGIN SOLUTION
    scale = 1.0 / math.sqrt(q.size(-1))
    m = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype)  # (..., n_q, 1)
    ell = torch.zeros_like(m)  # (..., n_q, 1)
    acc = torch.zeros((*q.shape[:-1], v.size(-1)), dtype=q.dtype)  # (..., n_q, d_v)
    for start in range(0, k.size(-2), block_size):
        scores = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale  # (..., n_q, b)
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
        c = torch.exp(m - m_new)  # rescales what was summed under the old maximum
        p = torch.exp(scores - m_new)  # (..., n_q, b)
        ell = ell * c + p.sum(dim=-1, keepdim=True)
        acc = acc * c + p @ v[..., start:start + block_size, :]
        m = m_new
    return acc / ell
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "online_softmax_attention_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false}
check_online_softmax_attention(online_softmax_attention)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(online_softmax_attention, check_online_softmax_attention, "online_softmax_attention")
_seeds = fresh_seeds(4)
for _seed, _shape in zip(_seeds, [((), 3, 29, 16, 2), ((4,), 11, 64, 4, 9), ((2, 2), 1, 45, 6, 6)]):
    check_online_softmax_attention(online_softmax_attention, _seed, *_shape, verbose=False)
check_never_builds_scores(online_softmax_attention, block_size=16, n_q=128, n_k=200, seed=_seeds[3])
_g = torch.Generator().manual_seed(_seeds[3])
_q, _k, _v = (torch.randn(2, 4, 150, 32, generator=_g) for _ in range(3))  # (B, H, T, d), float32
with quiet():
    _out = online_softmax_attention(_q, _k, _v)  # the default block_size, 150 = 2·64 + 22
expect_close(_out, F.scaled_dot_product_attention(_q, _k, _v),
             "online_softmax_attention with the default block_size on (B, H, T, d) float32 inputs, "
             "against torch's scaled_dot_product_attention", atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# The update on six scores in two blocks of three — compare with your pen-and-paper numbers:

# %%
s = torch.tensor([1.0, 3.0, 2.0, 6.0, 5.0, 0.5], dtype=torch.float64)
first, second = s[:3], s[3:]
m = first.max()
ell = torch.exp(first - m).sum()
print(f"after block 1: m = {m:.1f}, ℓ = {ell:.4f}")
m_new = torch.maximum(m, second.max())
c = torch.exp(m - m_new)
ell_new = ell * c + torch.exp(second - m_new).sum()
print(f"after block 2: m = {m_new:.1f}, c = exp({m:.1f} − {m_new:.1f}) = {c:.4f}, ℓ = {ell:.4f}·c + ... = {ell_new:.4f}")
print(f"whole row at once: ℓ = sum(exp(s − max)) = {torch.exp(s - s.max()).sum():.4f}")
print(f"forgetting c:      ℓ = {ell + torch.exp(second - m_new).sum():.4f}  (the first block counted "
      f"{1 / c:.0f} times too much)")

# %% [markdown]
# ### Measured on this machine
#
# Three implementations of the same self-attention of `n` random tokens with `d = 64`, float32:
#
# - **naive** — `softmax(q kᵀ/√d) v`, the full `n × n` matrix in memory;
# - **online** — your `online_softmax_attention` with `block_size = 64` (the course's version if
#   yours is not finished yet);
# - **sdpa** — PyTorch's `torch.nn.functional.scaled_dot_product_attention`, a fused C++ kernel.
#
# **Time** is the median of 3 runs on one thread. **Memory** is counted by `helpers.cost.TensorMeter`:
# it watches every PyTorch operation during one call and adds up the bytes of the tensors they
# create that are alive at the same time; the table shows the peak. It cannot see scratch memory a
# fused kernel allocates inside C++ — PyTorch's CPU kernel uses tiles of a fixed size per thread,
# which do not grow with `n` — so for sdpa it shows the output only. Times vary from run to run;
# the memory counts do not.

# %%
try:
    online_softmax_attention(torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(3, 4))
    yours, whose = {"online": online_softmax_attention}, "yours"
except NotImplementedError:
    yours, whose = {}, "the course's (yours is not finished yet)"  # measure_methods' own default
print(f"online = {whose}")
points = measure_methods([256, 512, 1024, 2048], d=64, repeats=3, block_size=64, **yours)
print(cost_table(points))
print()
print(cost_ratios(points))
plot_method_costs(points)
plt.show()

# %% [markdown]
# Read the memory columns first. Naive attention's peak is about two `n × n` float32 matrices (the
# scores and the weights are alive together) and is multiplied by 4 with each doubling of `n`. The
# online version's peak doubles: it holds a few `(n, 64)` slices and the `(n, d)` accumulator. For
# the fused kernel the meter sees only the output (its fixed-size scratch tiles are hidden in C++),
# so its green memory line is a floor, not a measurement, and no memory ratio is printed for it.
#
# Time tells a different story. All three compute the same `n²` scores, and their times grow at
# a similar pace, roughly like `n²` (the dotted guide), noisily at small `n`. The online version
# pays a fixed Python cost for every block and is often the slowest at small `n`; at larger `n` the
# naive version's big matrices start to cost time of their own (`python -m experiments.cost_benchmark`
# goes to `n = 4096`). On a GPU, FlashAttention is faster than naive attention too, because there
# moving the `n × n` matrix to and from memory costs more than the arithmetic (Dao et al., 2022).
# Saving memory is not saving work.
#
# One practical trap: on a CPU, the PyTorch installed here uses its fused kernel only for inputs
# with four dimensions `(B, H, T, d)` (and equal widths of `q`, `k` and `v`); given two-dimensional
# `(T, d)` tensors it falls back to a plain implementation that builds the matrix:

# %%
x4 = torch.randn(1, 1, 2048, 64)  # (B, H, T, d)
peak_4d = tensor_memory(F.scaled_dot_product_attention, x4, x4, x4).peak_bytes
peak_2d = tensor_memory(F.scaled_dot_product_attention, x4[0, 0], x4[0, 0], x4[0, 0]).peak_bytes
print(f"sdpa at n = 2048, (1, 1, T, d) input: {peak_4d / 2**20:6.2f} MiB;  (T, d) input: {peak_2d / 2**20:6.2f} MiB")

# %% [markdown]
# ## Choosing a method
#
# Blocked attention removes the memory, not the `n²` work. When `n²` itself is too much, change
# the model, not the kernel. The usual choices, by the structure of the dependencies:
#
# | method | fits | gains | pays |
# |---|---|---|---|
# | full self-attention | short or medium sequences whose long-range links are unpredictable | one step between any two positions; fully parallel | `n²` work (and memory, unless computed in blocks) |
# | RNN / LSTM | streams processed one item at a time; control loops | a state of fixed size, whatever the length | steps in sequence; everything must pass through the fixed state |
# | 1-D convolution | local patterns; high-rate signals | parallel, `O(k·n·d²)` for kernel width `k` | distant positions meet only after many layers, dilation or pooling |
# | local / sparse attention | long sequences with known structure (windows, strides) | content-based lookup over far fewer pairs | misses any link its pattern leaves out |
#
# Mixtures are common: convolutions or patches to shorten a long signal, then attention over the
# shorter sequence (lesson 09 does this for images); windows of attention shifted between layers
# (Swin); a recurrent state for streaming.

# %% [markdown]
# **Think (2 points, graded by hand).** You must classify 30-second heart recordings sampled at
# 500 Hz — 15,000 numbers each. The diagnosis depends on the shape of each heartbeat (about 0.1 s)
# and on the rhythm across the 30 to 40 beats of a recording. How many attention scores would full
# self-attention over the raw samples compute per head and per layer? Which design would you try
# instead, and why? Three or four sentences.

# %% [markdown] nbgrader={"grade": true, "grade_id": "ecg_design", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# 1 point — the cost: 15,000² = 225 million scores per head and layer (about 900 MB in float32 if
# stored; blocks remove the memory but not the 225 M × d multiply-adds).
# 1 point — a design that matches the two scales with a reason: local beat shapes suit a 1-D
# convolution (or local attention / patches of ~0.1 s), which can also shorten the sequence; the
# rhythm across beats then needs only a few dozen to a few hundred tokens, where full attention is
# cheap (or an RNN/LSTM over the beats). An LSTM over all 15,000 raw samples is acceptable if the
# answer notes the 15,000 sequential steps and the long path.
# === END MARK SCHEME ===

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=08_cost_of_attention` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** Compared with naive attention on `n` tokens, `online_softmax_attention` gives…
#
# - (a) an approximation of the output, in time linear in `n`
# - (b) the same output, with memory linear in `n` but `n²` work
# - (c) the same output, in time and memory linear in `n`
# - (d) the same output and memory, with fewer multiply-adds

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "b", "the running max and sum make the result exact and keep only (n, block) slices of "
             "scores in memory, but every query is still compared with every key: n² scores, "
             "n²·d multiply-adds")
### END HIDDEN TESTS

# %% [markdown]
# **2.** The original Transformer's layer (`d = 512`, `d_ff = 2048`) reads a 4,096-token document.
# Which part costs the most multiply-adds?
#
# - (a) the two `n × n` products
# - (b) the four projections `W_Q, W_K, W_V, W_O`
# - (c) the feed-forward network
# - (d) the softmax over the scores

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "a", "4,096 tokens is past the crossover n = 2·d + d_ff = 3,072: the two n × n "
             "products cost 2·n²·d ≈ 17.2 billion, the FFN 2·n·d·d_ff ≈ 8.6 billion, the "
             "projections 4·n·d² ≈ 4.3 billion; the softmax is one exponential per score, not "
             "d multiply-adds")
### END HIDDEN TESTS

# %% [markdown]
# **3.** You run `online_softmax_attention` on `n = 4096` tokens with `block_size = 128` instead
# of 64. What changes?
#
# - (a) the output: with larger blocks it gets closer to exact attention
# - (b) the work: half as many blocks means half the multiply-adds
# - (c) the score slice held at once doubles; the loop runs half as often
# - (d) nothing: the same `n²` scores are computed, so memory and time stay

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "c", "the running max and sum make the output exact for any block size, and every "
             "query still meets every key (n²·d multiply-adds either way). The block size sets "
             "the width of the (n, block) slice of scores held at a time — it doubles — and the "
             "number of trips through the loop, each with its fixed Python cost, which halves. "
             "The rest of the peak (q, k, v and the (n, d) accumulator) does not change")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Vaswani et al.: self-attention does `O(n²·d)` work with `O(1)` sequential steps and path length;
#   recurrence `O(n·d²)` with `O(n)` of both; convolution sits in between.
# - A whole layer adds projections `4·n·d²` and an FFN `2·n·d·d_ff`. For ViT-Base the `n × n`
#   products are about 4% of the work at 224 px and about 47% at 1024 px; they equal the rest at
#   `n = 2·d + d_ff`.
# - The online softmax keeps a running maximum, a running sum and an unnormalised output; when the
#   maximum grows, both are multiplied by `exp(m − m′)`; one division at the end gives exact attention.
# - Computing attention in blocks makes memory linear in `n`; the work stays `n²`. PyTorch's fused
#   kernel does the same in C++ (on CPU, for `(B, H, T, d)` inputs).
# - When `n²` work is too much, choose another structure: recurrence for streams, convolution for
#   local patterns, local or sparse attention for long structured sequences.
#
# **Next:** lesson 09 turns images into tokens.
