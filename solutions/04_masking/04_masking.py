# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Masking: padding, the future, and the n² bill
#
# **Promise:** by the end you can build the masks a Transformer needs, apply them where they
# belong (on the scores, before the softmax), decode one token at a time with a key/value cache,
# and say what full attention costs as the context grows.
#
# **You will**
# - build a causal mask (exercise 1) and padding masks for a batch of different lengths
#   (exercise 2), and combine them by broadcasting;
# - write attention under any mask (exercise 3), and see what goes wrong when the mask comes
#   *after* the softmax or a query has no allowed key;
# - decode with a key/value cache that grows by one row per step (exercise 4), and time it
#   against one masked pass;
# - count the bytes of the score matrices (exercise 5) against the cache's as the context grows.
#
# **Time:** about 60 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.
#
# **Conventions.** Masks are boolean and `True` means **may attend** (the convention of
# `torch.nn.functional.scaled_dot_product_attention`). Positions are counted from 0, as in code.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import as_array, expect_close, fresh_seeds, quiet
from helpers.checks.masking import (
    check_attention_matrix_bytes,
    check_causal_attention_with_cache,
    check_causal_mask,
    check_masked_attention,
    check_padding_mask,
)
from helpers.masking import (
    decode_trace,
    kv_cache_bytes,
    median_time,
    plot_mask,
    plot_memory_growth,
)
from helpers.plots import plot_weights
from helpers.quiz import check_choice, grade_choice

torch.set_printoptions(precision=3, sci_mode=False)
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## The future must not leak
#
# A language model learns to predict every next token of a text. Training feeds it the whole
# sentence in one pass and asks position `i` to predict token `i + 1`. If attention let
# position `i` read position `i + 1`, the model would copy the answer instead of learning to
# predict it — and at generation time that future token does not exist yet.
#
# The **causal mask** forbids it: query `i` may attend to keys `j ≤ i` only — itself and the
# past. As a matrix (row = query, column = key), which entries are allowed? Sketch it for six words
# before you write it.

# %% [markdown]
# **Exercise 1 (2 points).** Write `causal_mask(n)`: a torch **bool** tensor of shape `(n, n)`
# whose entry `[i, j]` is `True` exactly when query `i` may attend to key `j`.

# %% nbgrader={"grade": false, "grade_id": "causal_mask", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(n):
    """Bool (n, n): True where key j ≤ query i."""
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "causal_mask_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_causal_mask(causal_mask)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(causal_mask, check_causal_mask, "causal_mask")
for seed in fresh_seeds(2):
    check_causal_mask(causal_mask, seed=seed, verbose=False)
_n = int(np.random.default_rng(fresh_seeds(1)[0]).integers(20, 60))
with quiet():
    _m = causal_mask(_n)
assert isinstance(_m, torch.Tensor) and _m.dtype == torch.bool, "causal_mask must return a torch bool tensor"
assert torch.equal(_m, torch.ones(_n, _n).tril().bool()), \
    f"causal_mask({_n}) must be True exactly where key j ≤ query i"
### END HIDDEN TESTS

# %% [markdown]
# Your mask for a six-word sentence — the lower triangle, diagonal included:

# %%
words = ["honestly", "the", "slides", "were", "very", "clear"]
plot_mask(causal_mask(len(words)), query_labels=words, key_labels=words,
          title="causal mask: blue = may attend")
plt.show()

# %% [markdown]
# ### Mask the scores, before the softmax
#
# Back to lesson 02's three tokens *voltage, spike, alarm*. A blocked key must get weight
# exactly 0, and the allowed keys must share all of the weight. Both happen if the blocked
# **scores** are set to `−∞` before the softmax: `e^{−∞} = 0`, and the softmax renormalises over
# what is left. Predict *spike*'s weights under the causal mask before exercise 3 computes them.

# %%
tokens = ["voltage", "spike", "alarm"]
Q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (n, d_k)
K = Q.clone()  # (n, d_k): the same as Q here
V = torch.tensor([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])  # (n, d_v)

# %% [markdown]
# ## Batches of different lengths: padding masks
#
# Sentences have different lengths, but a batch is one tensor. Shorter sentences are padded with
# a `<pad>` token up to the longest length `T`:

# %%
reviews = [["the", "exercises", "were", "useful"],
           ["honestly", "the", "lecture", "was", "not", "boring"],
           ["slides", "were", "clear"]]
lengths = [len(r) for r in reviews]
T = max(lengths)
for r in reviews:
    print(" ".join(f"{w:>9}" for w in r + ["<pad>"] * (T - len(r))))
print("lengths:", lengths, " T =", T)

# %% [markdown]
# `<pad>` is not a word: no query should attend to it. A **padding mask** of shape `(B, T)` marks
# the real tokens with `True`.
#
# **Exercise 2 (2 points).** Write `padding_mask(lengths, max_len)`: a torch bool tensor of shape
# `(B, max_len)`, `True` at positions `< length` of each sequence. `lengths` may be a list or a
# 1-D integer tensor. Try it without a Python loop over the sequences.

# %% nbgrader={"grade": false, "grade_id": "padding_mask", "locked": false, "schema_version": 3, "solution": true}
def padding_mask(lengths, max_len):
    """Bool (B, max_len): True at positions < length of each sequence."""
    ### BEGIN SOLUTION
    lengths = torch.as_tensor(lengths)  # (B,)
    return torch.arange(max_len)[None, :] < lengths[:, None]  # (1, max_len) < (B, 1) -> (B, max_len)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "padding_mask_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_padding_mask(padding_mask)
### BEGIN HIDDEN TESTS
from helpers import masking as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(padding_mask, check_padding_mask, "padding_mask")
for seed in fresh_seeds(2):
    check_padding_mask(padding_mask, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_width = int(_rng.integers(8, 20))
_lens = torch.as_tensor(_rng.integers(0, _width + 1, size=int(_rng.integers(5, 9))))  # int64, zeros possible
with quiet():
    _pm = padding_mask(_lens, _width)
    _pm_list = padding_mask([int(x) for x in _lens], _width)
for _got in (_pm, _pm_list):
    assert isinstance(_got, torch.Tensor) and _got.dtype == torch.bool, "padding_mask must return a torch bool tensor"
    assert torch.equal(_got, reference.padding_mask(_lens, _width)), \
        f"padding_mask({_lens.tolist()}, {_width}) must be True exactly at positions < length"
### END HIDDEN TESTS

# %% [markdown]
# ### Combining masks by broadcasting
#
# Attention needs a mask over **scores**, `(…, T_q, T_k)`. Real models also run several attention
# lookups side by side, called **heads** (lesson 06 builds them): each head has its own scores, so
# the scores carry a head axis, `(B, H, T_q, T_k)`. A padding mask says which *keys* are real, the
# same for every head and every query: reshaped to `(B, 1, 1, T)` it broadcasts over heads `H` and
# queries `T_q`. A causal mask `(T, T)` is the same for every sentence. Combined
# with `&`, broadcasting gives one mask per sentence, `(B, 1, T, T)`: key `j` is allowed if it is
# a real token **and** not in the future.
# Your two masks, combined:

# %%
pad = padding_mask(lengths, T)  # (B, T)
keys_real = pad[:, None, None, :]  # (B, 1, 1, T): same for every head and every query
both = keys_real & causal_mask(T)  # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)
print(tuple(keys_real.shape), "&", (T, T), "->", tuple(both.shape))

fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
for b, ax in enumerate(axes):
    labels = reviews[b] + ["<pad>"] * (T - lengths[b])
    plot_mask(both[b, 0], ax=ax, query_labels=labels, key_labels=labels,
              title=f"sentence {b}: padding & causal")
    ax.tick_params(axis="x", labelrotation=60)
plt.show()

# %% [markdown]
# ### A row with no allowed key
#
# In the figure every query row keeps at least one blue cell: the first token is real and in no
# one's future. That is not always so. With *left* padding (pads first, common when generating
# for a batch), a pad at the start has only pads at or before it, all blocked; and some code blocks
# the padded *queries* too (`pad[:, :, None] & pad[:, None, :]`: real query **and** real key). Then a
# query row has no allowed key at all, and its softmax is over `−∞` only — `0 / 0`.
#
# The course's convention: **a query row with no allowed key gets all-zero weights and a zero
# output, never NaN.** Exercise 3 asks for it; just after it, you will see what goes wrong
# without it.

# %% [markdown]
# **Exercise 3 (4 points).** Write `masked_attention(q, k, v, mask=None)` for torch tensors
# `q (…, n_q, d_k)`, `k (…, n_k, d_k)`, `v (…, n_k, d_v)` (any number of leading batch
# dimensions, such as `(B, H)`), returning `(output (…, n_q, d_v), weights (…, n_q, n_k))`:
# - lesson 02's scaled dot-product attention, batched over the leading dimensions;
# - `mask` is bool, broadcastable to `(…, n_q, n_k)`, `True` = may attend; `None` = no mask;
# - a query row with no allowed key gets zero weights and a zero output.

# %% nbgrader={"grade": false, "grade_id": "masked_attention", "locked": false, "schema_version": 3, "solution": true}
def masked_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v under a bool mask (True = may attend): (output, weights)."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # blocked before the softmax
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # no allowed key -> zeros
    return weights @ v, weights  # (..., n_q, d_v), (..., n_q, n_k)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "masked_attention_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false}
check_masked_attention(masked_attention)
### BEGIN HIDDEN TESTS
from helpers import masking as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(masked_attention, check_masked_attention, "masked_attention")
for seed, shape in zip(fresh_seeds(3), [((), 3, 8, 2, 4), ((5,), 1, 4, 6, 6), ((2, 2, 2), 7, 3, 3, 1)]):
    check_masked_attention(masked_attention, seed, *shape, verbose=False)
_g = torch.Generator().manual_seed(fresh_seeds(1)[0])
_q, _k, _v = (torch.randn(2, 4, 9, 16, generator=_g) for _ in range(3))  # (B, H, T, d)
# Against PyTorch's own attention on a random mask, on the rows that have an allowed key
# (on a row without one, sdpa has returned NaN in some versions).
_mask = torch.rand(2, 1, 9, 9, generator=_g) < 0.5
_mask[0, 0, 3] = False
_live = _mask.expand(2, 4, 9, 9).any(-1).numpy()  # (B, H, T)
with quiet():
    _out, _w = masked_attention(_q, _k, _v, _mask)
_out, _w = as_array(_out, "masked_attention output"), as_array(_w, "masked_attention weights")
_want = F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_mask).numpy()
expect_close(_out[_live], _want[_live], "masked_attention (B, H, T, d) against torch's "
             "scaled_dot_product_attention on rows with an allowed key", rtol=1e-3, atol=1e-5)
expect_close(_w[~_live], np.zeros_like(_w[~_live]), "masked_attention weights of a fully masked row "
             "(must be zeros, not NaN)")
expect_close(_out[~_live], np.zeros_like(_out[~_live]), "masked_attention output of a fully masked "
             "row (must be zeros, not NaN)")
# Causality as a property: with a causal mask, changing tokens 6-8 leaves outputs 0-5 unchanged.
_c = reference.causal_mask(9)
_k2, _v2 = _k.clone(), _v.clone()
_k2[..., 6:, :] = torch.randn(2, 4, 3, 16, generator=_g) * 5
_v2[..., 6:, :] = torch.randn(2, 4, 3, 16, generator=_g) * 5
with quiet():
    _o1, _o2 = masked_attention(_q, _k, _v, _c)[0], masked_attention(_q, _k2, _v2, _c)[0]
expect_close(as_array(_o2, "output")[..., :6, :], as_array(_o1, "output")[..., :6, :],
             "masked_attention with a causal mask after changing tokens 6-8: outputs 0-5 must not change")
# Padding (B, 1, 1, T) & causal (T, T), broadcast over the heads.
_both = reference.padding_mask([9, 4], 9)[:, None, None, :] & _c
with quiet():
    _o, _ww = masked_attention(_q, _k, _v, _both)
_ro, _rw = reference.masked_attention(_q, _k, _v, _both)
expect_close(_ww, _rw, "masked_attention weights with a padding (B, 1, 1, T) & causal (T, T) mask")
expect_close(_o, _ro, "masked_attention output with a padding (B, 1, 1, T) & causal (T, T) mask")
### END HIDDEN TESTS

# %% [markdown]
# ### Your function on the worked example
#
# It should give the rows `[1, 0, 0]` and `[0.330, 0.670, 0]`:

# %%
scores = Q @ K.T / math.sqrt(K.shape[1])  # (n, n), the scaled scores before masking
allowed = torch.ones(3, 3, dtype=torch.bool).tril()  # (n, n), the causal mask of exercise 1
out_masked, weights = masked_attention(Q, K, V, allowed)  # your function
print("scaled scores:\n", scores)
print("weights:\n", weights)
print("output = weights @ V:\n", out_masked)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
plot_weights(torch.softmax(scores, dim=-1), tokens, tokens, ax=axes[0], title="no mask (lesson 02)")
plot_weights(weights, tokens, tokens, ax=axes[1], title="causal mask")
plt.show()

# %% [markdown]
# *voltage* (row 0) may only see itself: weights `[1, 0, 0]`, so its output is its own value
# `[10, 0]`. *spike* keeps the scores `[0, 0.707]` and gets `[0.330, 0.670, 0]`. *alarm*, the
# last token, sees everything: its row is lesson 02's.
#
# ### …not the weights, after it
#
# A tempting shortcut: the usual softmax, then zero the blocked weights. Compare the row sums,
# then change only *alarm*'s key — a future token for *voltage* — and watch *voltage*'s weights:

# %%
after = torch.softmax(scores, dim=-1) * allowed  # the mistake: mask the weights
before = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # the rule
print("row sums, mask after the softmax: ", after.sum(dim=-1))
print("row sums, mask before the softmax:", before.sum(dim=-1))
K_changed = K.clone()
K_changed[2] = torch.tensor([4.0, 4.0])  # only the last (future) token changes
for name, weigh in [
    ("mask after the softmax ", lambda s: torch.softmax(s, dim=-1) * allowed),
    ("mask before the softmax", lambda s: torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)),
]:
    w_old = weigh(Q @ K.T / math.sqrt(2))[0]
    w_new = weigh(Q @ K_changed.T / math.sqrt(2))[0]
    print(f"{name}: voltage's weights {w_old.numpy()} -> {w_new.numpy()}")

# %% [markdown]
# Masked after the softmax, the rows no longer sum to 1, and *voltage*'s weights depend on a
# token it must not see: the blocked keys still took their share of the normaliser, so a model
# trained that way learns from the future. Renormalising would repair the numbers; the standard
# is simpler — blocked **scores** become `−∞`, before the softmax.
#
# ### What the convention saves you from
#
# Take the padded batch again and block the padded *queries* as well (real query **and** real
# key). A plain softmax gives NaN rows, and "the loss ignores those positions" does not save you:
# zeroing them in the loss multiplies by 0, and `0 · NaN` is still NaN.

# %%
torch.manual_seed(0)
x = torch.randn(len(reviews), T, 4)  # (B, T, d): stand-ins for the token vectors
pad = torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]  # (B, T), the padding mask of exercise 2
pairs = pad[:, :, None] & pad[:, None, :]  # (B, T, T): real query and real key
s = x @ x.transpose(-2, -1) / math.sqrt(4)  # (B, T, T)
w_nan = torch.softmax(s.masked_fill(~pairs, float("-inf")), dim=-1)
print("plain softmax, sentence 2 (3 real tokens), padded queries:\n", w_nan[2, 3:])
real = pad[..., None]  # (B, T, 1): 1 for real tokens, 0 for padding
print("loss over the real tokens only:", ((w_nan @ x) * real).sum())
w_yours_pad = masked_attention(x, x, x, pairs)[1]  # your function on the same rows
print("the same loss with your masked_attention:", ((w_yours_pad @ x) * real).sum())
print("your weights for those padded queries:\n", w_yours_pad[2, 3:])
print("with -1e9 instead of -inf, padded query 3:", torch.softmax(s.masked_fill(~pairs, -1e9), dim=-1)[2, 3])

# %% [markdown]
# Your `masked_attention` gives such rows zero weights, so nothing leaks into the loss. Libraries
# disagree here: older PyTorch releases returned NaN from `scaled_dot_product_attention` for such
# rows, recent ones return zeros, and a plain `torch.softmax` still gives NaN — check your version
# before you rely on it. The last line shows why `−1e9` in place of `−∞` is no cure: the NaN is
# gone, but a row with no allowed key spreads **equal** weights over keys it may not see.

# %% [markdown]
# ## Training in parallel, decoding one token at a time
#
# In **training** the whole target text is known, so one pass computes every position at once
# under the causal mask. Because position `i` depends only on positions `≤ i`, its output is
# exactly what it would be if the text stopped at `i`.
#
# In **generation** token `t + 1` does not exist until token `t` has been produced, so decoding
# runs one position at a time. At step `t` the new token brings one query, one key and one value.
# The keys and values of earlier tokens never change — under a causal mask nothing earlier looks
# at later tokens — so they are kept in a **key/value cache** that grows by one row per step, and
# the new query is compared with all of it. The worked example, decoded step by step:

# %%
for step in decode_trace(Q, K, V):
    print(f"step {step.position}: cache holds {step.cache_length} key(s) -> weights "
          f"{step.weights.numpy()}, output {step.output.numpy()}")

# %% [markdown]
# The weights are the rows of the causal weight matrix above, without the zeros: step by step or
# in one masked pass, the numbers are the same.
#
# **Exercise 4 (3 points).** Write `causal_attention_with_cache(q, k, v)` for `q, k (…, n, d_k)`
# and `v (…, n, d_v)`, returning `(…, n, d_v)`: causal attention computed the way a decoder
# generates — position after position, each query against a key cache and a value cache that
# grow by one row per step — so that no `(n, n)` score matrix is ever built and no mask is
# needed. The result must equal `masked_attention` with `causal_mask(n)`.

# %% nbgrader={"grade": false, "grade_id": "causal_attention_with_cache", "locked": false, "schema_version": 3, "solution": true}
def causal_attention_with_cache(q, k, v):
    """Causal attention, one query at a time against a growing key/value cache: (..., n, d_v)."""
    ### BEGIN SOLUTION
    cache_k, cache_v = k[..., :0, :], v[..., :0, :]  # empty caches (..., 0, d)
    rows = []
    for t in range(q.size(-2)):
        cache_k = torch.cat([cache_k, k[..., t : t + 1, :]], dim=-2)  # (..., t + 1, d_k)
        cache_v = torch.cat([cache_v, v[..., t : t + 1, :]], dim=-2)  # (..., t + 1, d_v)
        scores = q[..., t : t + 1, :] @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., 1, t + 1)
        rows.append(torch.softmax(scores, dim=-1) @ cache_v)  # (..., 1, d_v)
    return torch.cat(rows, dim=-2)  # (..., n, d_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "causal_attention_with_cache_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_causal_attention_with_cache(causal_attention_with_cache)
### BEGIN HIDDEN TESTS
from helpers import masking as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(causal_attention_with_cache, check_causal_attention_with_cache, "causal_attention_with_cache")
# The calls below use the course's masked_attention and causal_mask, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed, shape in zip(fresh_seeds(2), [((3,), 1, 2, 2), ((2, 2), 10, 8, 3)]):
    check_causal_attention_with_cache(causal_attention_with_cache, seed, *shape, verbose=False)
_g = torch.Generator().manual_seed(fresh_seeds(1)[0])
_q, _k, _v = (torch.randn(2, 3, 8, 4, generator=_g, dtype=torch.float64) for _ in range(3))  # (B, H, T, d)
_k2, _v2 = _k.clone(), _v.clone()
_k2[..., 5:, :] = torch.randn(2, 3, 3, 4, generator=_g, dtype=torch.float64) * 5
_v2[..., 5:, :] = torch.randn(2, 3, 3, 4, generator=_g, dtype=torch.float64) * 5
with quiet(), course_callees(causal_attention_with_cache, "masked_attention", "causal_mask", verbose=False):
    _o1 = causal_attention_with_cache(_q, _k, _v)
    _o2 = causal_attention_with_cache(_q, _k2, _v2)
expect_close(_o1, reference.masked_attention(_q, _k, _v, reference.causal_mask(8))[0],
             "causal_attention_with_cache (B, H, T, d) against causal masked attention")
expect_close(as_array(_o2, "output")[..., :5, :], as_array(_o1, "output")[..., :5, :],
             "causal_attention_with_cache after changing tokens 5-7: outputs 0-4 must not change")
### END HIDDEN TESTS

# %% [markdown]
# ### One pass or `n` steps?
#
# Same numbers, different schedules. The parallel pass computes all `n²` scores in one go and
# throws the blocked half away. Decoding computes only the allowed ones, `1 + 2 + … + n =
# n(n+1)/2`, but in `n` steps that must run one after the other — and step `t` compares its query
# with all `t + 1` cached keys, so each new token costs more than the one before. Measured with
# your functions (the median of 5 runs on one thread), next to the same pass with no mask at all:

# %%
g = torch.Generator().manual_seed(0)
n_demo = 256
q_demo, k_demo, v_demo = (torch.randn(1, n_demo, 64, generator=g) for _ in range(3))  # (B, T, d)
parallel = masked_attention(q_demo, k_demo, v_demo, causal_mask(n_demo))[0]
stepwise = causal_attention_with_cache(q_demo, k_demo, v_demo)
t_plain = median_time(masked_attention, q_demo, k_demo, v_demo)
t_parallel = median_time(masked_attention, q_demo, k_demo, v_demo, causal_mask(n_demo))
t_stepwise = median_time(causal_attention_with_cache, q_demo, k_demo, v_demo)
print(f"largest difference between the two: {(parallel - stepwise).abs().max():.1e}")
print(f"one pass, no mask:     {n_demo**2:7,} scores, {t_plain * 1e3:6.2f} ms")
print(f"one masked pass:       {n_demo**2:7,} scores, {t_parallel * 1e3:6.2f} ms")
print(f"{n_demo} decoding steps:   {n_demo * (n_demo + 1) // 2:7,} scores, {t_stepwise * 1e3:6.2f} ms")
quick, slow = sorted([(t_parallel, "the masked pass"), (t_stepwise, "the decoding steps")])
print(f"{quick[1]} took {slow[0] / quick[0]:.1f} times less time than {slow[1]}")
ratio = t_parallel / t_plain
print(f"masked / unmasked pass: {ratio:.2f}, "
      + ("near" if abs(ratio - 0.5) < 0.15 else "far from") + " the 0.5 that skipping the blocked half would give")

# %% [markdown]
# The single pass computes about twice as many scores, but as one large matrix product, which
# keeps the processor busy; the `n` decoding steps are small products that must run one after the
# other. And a cache grown with `torch.cat` is copied whole at every step — `cat` builds a new
# tensor — so step `t` also moves `t` cached rows; real decoders allocate the cache once at its
# full length and write each new row into place. Training uses the masked pass; generation has no
# choice but to go step by step.
#
# And the mask cannot halve the time: the masked pass still computes every blocked score, then
# throws it away, and building and applying the mask is one more pass over the `n × n` matrix.
# Lesson 08 measures time and memory across `n` and shows how to avoid storing the matrix at all.

# %% [markdown]
# ## The n² bill
#
# For `n` tokens, `Q Kᵀ` holds `n²` scores per head. Compute grows like `n² · d_k`; memory, if the
# matrix is materialised, like `n²`. In a real model that is per head, per layer.
#
# **Exercise 5 (2 points).** Write `attention_matrix_bytes(n_tokens, n_heads=1,
# bytes_per_element=2)`: the number of bytes (an `int`) of `n_heads` materialised
# `n_tokens × n_tokens` score matrices, each number taking `bytes_per_element` bytes (2 for
# fp16, 4 for fp32).

# %% nbgrader={"grade": false, "grade_id": "attention_matrix_bytes", "locked": false, "schema_version": 3, "solution": true}
def attention_matrix_bytes(n_tokens, n_heads=1, bytes_per_element=2):
    """Bytes of n_heads materialised n_tokens × n_tokens score matrices."""
    ### BEGIN SOLUTION
    return n_tokens * n_tokens * n_heads * bytes_per_element
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "attention_matrix_bytes_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_attention_matrix_bytes(attention_matrix_bytes)
### BEGIN HIDDEN TESTS
from helpers import masking as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(attention_matrix_bytes, check_attention_matrix_bytes, "attention_matrix_bytes")
for seed in fresh_seeds(2):
    check_attention_matrix_bytes(attention_matrix_bytes, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _n, _h, _b in [(131_072, 64, 2), (int(_rng.integers(1, 50_000)), int(_rng.integers(1, 97)), 4), (1, 1, 1)]:
    with quiet():
        _got = attention_matrix_bytes(_n, _h, _b)
    assert _got == reference.attention_matrix_bytes(_n, _h, _b), \
        f"attention_matrix_bytes({_n}, {_h}, {_b}) returned {_got}, not n² · n_heads · bytes_per_element"
### END HIDDEN TESTS

# %% [markdown]
# A context of 4096 tokens, in fp16, with your `attention_matrix_bytes`:

# %%
n_ctx = 4096
print(f"{n_ctx} × {n_ctx} = {n_ctx * n_ctx:,} scores")
print(f"one head, fp16:  {attention_matrix_bytes(n_ctx) / 2**20:g} MiB")
print(f"32 heads, fp16:  {attention_matrix_bytes(n_ctx, 32) / 2**30:g} GiB")

# %% [markdown]
# One GiB for the scores of a single layer, before anything else; training keeps them for the
# backward pass, which builds gradients of the same size.
#
# ### Tiles instead of the matrix; a cache that grows linearly
#
# **FlashAttention** (Dao et al., 2022) computes exactly the same output without storing the
# `n × n` matrix: it walks over the keys in tiles with a running softmax (lesson 08 has you write
# it), so memory grows linearly with `n` — but every query is still compared with every key.
#
# The **key/value cache** of decoding holds, per layer, one key and one value of width `d_head`
# per head and per token: `2 · n · H · d_head` numbers, linear in `n`. For an illustrative layer of
# 32 heads of width 128 in fp16:

# %%
n_heads, d_head = 32, 128
for n_ctx in (256, 4096, 32768):
    scores_mib = attention_matrix_bytes(n_ctx, n_heads) / 2**20
    cache_mib = kv_cache_bytes(n_ctx, n_heads, d_head) / 2**20
    print(f"n = {n_ctx:6d}: score matrices {scores_mib:10,.0f} MiB   KV cache {cache_mib:6,.0f} MiB")
plot_memory_growth([2**i for i in range(7, 16)], n_heads=n_heads, d_head=d_head)
plt.show()

# %% [markdown]
# Per head, a full score matrix holds `n²` numbers and the cache `2 · n · d_head`: they are equal
# at `n = 2 · d_head = 256`, and beyond that a full matrix is the larger. But the two are not
# needed at the same moment. Full `n × n` matrices exist when a whole sequence is processed at
# once — in training, or when the model reads the prompt — and tiling (FlashAttention) avoids
# even those. While a model *generates*, one token per step, each step builds a single `1 × n`
# row of scores per head, while the cache must keep every past token's keys and values for every
# layer: during generation the cache, not the scores, is the memory that grows with the context.

# %% [markdown]
# **Think (2 points, graded by hand).** A teammate says: "With a causal mask half of the scores are
# `−∞`, and with a key/value cache each decoding step computes one new row. So a decoder's
# attention costs time linear in the context length." In three or four sentences, say what is
# right and what is wrong, using what you computed and measured in this lesson.

# %% [markdown] nbgrader={"grade": true, "grade_id": "linear_claim", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# Full marks need both halves.
# Right (1 point): the cache avoids recomputing the keys and values of past tokens, each step
# builds only a (1, t + 1) row of scores, and the cache's memory grows linearly with the context.
# Wrong (1 point): step t still compares the new query with all t + 1 cached keys, so each token
# costs more than the last and n tokens cost n(n+1)/2 comparisons — quadratic; a plain masked pass
# computes all n² scores and throws the blocked half away (the measured masked pass was not
# faster), and even a kernel that skips the blocked half saves a factor 2, not the n².
# Mentioning that tiling (FlashAttention) removes the n × n memory but not the n² work is a plus.
# === END MARK SCHEME ===

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=04_masking` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** A colleague applies the causal mask *after* the softmax: they multiply the weights by the
# mask, then divide each row by its new sum. Compared with `−∞` scores before the softmax, their
# weights are…
#
# - (a) different: the blocked scores still sit in the softmax's denominator
# - (b) different: the rows no longer sum to 1 after the division
# - (c) the same: dividing by the new row sum cancels the blocked keys' share
# - (d) the same, but only where the blocked scores are below the allowed ones

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "c", "the softmax gives key j the weight e^(s_j) / Σ_all e^(s); zeroing the blocked "
             "ones and dividing by what is left gives e^(s_j) / Σ_allowed e^(s) — exactly what "
             "−∞ scores before the softmax give, because the common denominator cancels. "
             "Without the division the rows would not sum to 1 (the demonstration in this "
             "lesson). In floating point it can still differ: when the blocked scores are far "
             "larger, the allowed weights underflow to 0 before the division, and 0 / 0 is NaN "
             "— one reason frameworks mask the scores")
### END HIDDEN TESTS

# %% [markdown]
# **2.** `pad = padding_mask(lengths, T)` has shape `(B, T)`. The scores of a batch have shape
# `(B, T_q, T_k)`, and padded **keys** must get weight 0. Which mask do you pass to
# `masked_attention`?
#
# - (a) `pad[:, None, :]`: every query row of a sentence blocks the same keys
# - (b) `pad[:, :, None]`: the same keys, held as a column instead of a row
# - (c) `pad` as it is: broadcasting adds the missing query axis by itself
# - (d) `~pad[:, None, :]`: `True` marks each padded key that must be blocked

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "a", "pad[:, None, :] is (B, 1, T_k): it broadcasts over the queries and blocks "
             "each sentence's padded keys. pad[:, :, None] is (B, T_q, 1): it blocks the rows of "
             "padded queries and lets real queries read the padding; pad as it is broadcasts as "
             "(1, B, T), lining the batch axis up with the queries; and the course's masks are "
             "True = may attend, so ~pad lets only the padding through")
### END HIDDEN TESTS

# %% [markdown]
# **3.** The context grows from 4096 to 8192 tokens. The bytes of one layer's score matrices and
# of one layer's key/value cache are multiplied by…
#
# - (a) 2 and 2
# - (b) 4 and 4
# - (c) 2 and 4
# - (d) 4 and 2

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "d", "the score matrices hold n² numbers per head (× 4 when n doubles); the cache "
             "holds one key and one value per token (× 2)")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - A causal mask lets query `i` attend to keys `j ≤ i`. Blocked **scores** become `−∞` before the
#   softmax; masking the weights afterwards breaks the row sums and leaks the future.
# - A padding mask `(B, T)` marks real tokens; reshaped to `(B, 1, 1, T)` it combines with a causal
#   `(T, T)` mask by broadcasting.
# - A query with no allowed key would get `0/0 = NaN`, and NaN survives multiplication by 0: give
#   such rows zero weights and a zero output. `−1e9` instead of `−∞` gives them equal weights instead.
# - Masks here are `True` = may attend, like `scaled_dot_product_attention`;
#   `nn.MultiheadAttention` reads boolean masks the other way round (lesson 06 translates).
# - Training computes all positions in one masked pass; decoding goes one token at a time with a
#   key/value cache that grows by one row per step, and each new query still compares with all of it.
# - The bill: `n²` scores per head — 32 MiB for 4096 tokens in fp16, 1 GiB for 32 heads. Tiling
#   (FlashAttention) removes the memory, not the `n²` work; the KV cache grows linearly.
#
# **Next:** lesson 05 gives the tokens their positions.
