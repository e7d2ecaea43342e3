# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Attention is a differentiable lookup
#
# **Promise:** by the end you can compute `softmax(Q Kᵀ / √d_k) V` by hand, write it in a few
# lines of NumPy, and say what every number in it means.
#
# **You will**
# - explain queries, keys and values as a lookup that returns a blend instead of one entry;
# - write a softmax that survives logits of ±1000 (exercise 1);
# - write scaled dot-product attention and self-attention (exercises 2 and 3);
# - follow one query from its scores to its output with the calculator;
# - check two properties by computation: permutation equivariance, and why it is `· V`, not `· Vᵀ`.
#
# **Time:** about 60 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from helpers.calculator import lookup_steps
from helpers.checks import (
    check_attention,
    check_self_attention,
    check_softmax,
    expect_close,
    fresh_seeds,
    hint,  # after a failing check: hint() for a hint, hint() again for the fix
    quiet,
)
from helpers.plots import plot_lookup, plot_sharpening, plot_weights
from helpers.quiz import check_choice, grade_choice
from helpers.widgets import attention_calculator

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## A lookup you can differentiate
#
# A Python dictionary answers `d["spike"]` by finding the one key that matches exactly and
# handing back its value. Attention does the same job softly:
#
# 1. a **query** `q` says what this position is looking for;
# 2. it is compared with every **key** `k_j` (what position `j` offers) by a dot product — a
#    score of how well they match;
# 3. a softmax turns the scores into **weights** that are positive and sum to 1;
# 4. the answer is the weighted sum of the **values** `v_j` (what position `j` hands over).
#
# Because every step is smooth, gradients flow through the lookup: training can learn what
# counts as a match and what to retrieve. With the queries, keys and values of all `n` tokens
# stacked as rows,
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# | array | shape | one row is |
# |---|---|---|
# | `Q` | `(n_q, d_k)` | a query |
# | `K` | `(n_k, d_k)` | a key |
# | `V` | `(n_k, d_v)` | a value |
# | `Q Kᵀ` and the weights | `(n_q, n_k)` | one query's scores over all keys |
# | output | `(n_q, d_v)` | one query's answer |
#
# The softmax runs over each **row** of `Q Kᵀ`: each query distributes one unit of attention
# over the keys. Lesson 03 explains the `√d_k`.

# %% [markdown]
# ### Step 1 — a softmax that does not overflow
#
# $\mathrm{softmax}(z)_j = e^{z_j} / \sum_i e^{z_i}$. Written literally it breaks on large
# scores: `exp(1000)` does not fit in a float64.

# %%
logits = np.array([1000.0, 999.0, 998.0])
with np.errstate(over="ignore", invalid="ignore"):  # keep NumPy's warnings off the page
    print("exp(logits)          :", np.exp(logits))
    print("literal softmax      :", np.exp(logits) / np.exp(logits).sum())

# %% [markdown]
# The cure is to subtract the largest logit first. That changes nothing mathematically — $e^{z_j - m} / \sum_i e^{z_i - m}$
# cancels the $e^{-m}$ — but the largest exponent becomes $e^0 = 1$, so nothing overflows.
#
# **Exercise 1 (3 points).** Write `softmax(x, axis=-1)` for a NumPy array of any shape,
# normalising along `axis`. It must work for logits of ±1000, give weight exactly 0 to `-inf`
# entries, and leave `x` unchanged. You may assume that every row has at least one finite entry:
# a row that is entirely `-inf` has no softmax (the stable recipe gives NaN there), and lesson 04
# decides what attention does with such a row.

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true}
def softmax(x, axis=-1):
    """Numerically stable softmax of the array x along axis; same shape as x."""
    ### BEGIN SOLUTION
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "softmax_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_softmax(softmax)
### BEGIN HIDDEN TESTS
from helpers import attention as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(softmax, check_softmax, "softmax")
for seed in fresh_seeds(3):
    check_softmax(softmax, seed=seed, shape=(7, 3), verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_x3 = _rng.normal(scale=5.0, size=(2, 5, 4))
_x32 = (_rng.normal(size=(3, 8)) * 100).astype(np.float32)
_z, _c = _rng.normal(size=(4, 6)), _rng.normal(size=(4, 1)) * 50
with quiet():
    expect_close(softmax(_x3, axis=1), reference.softmax(_x3, axis=1),
                 "softmax of a 3-D array along axis=1")
    expect_close(softmax(_x32), reference.softmax(_x32), "softmax of float32 logits up to ±300")
    expect_close(softmax(_z + _c), reference.softmax(_z), "softmax(x + c) for a per-row constant c")
### END HIDDEN TESTS

# %% [markdown]
# Your softmax on the logits that broke the literal formula:

# %%
print("your softmax:", softmax(logits))

# %% [markdown]
# ## A worked example: three tokens
#
# Take three tokens of a monitoring log — *voltage*, *spike*, *alarm* — with `d_k = d_v = 2`.
# The numbers are made up so that everything fits on screen: *voltage* and *spike* have
# orthogonal keys, *alarm*'s key points between them.

# %%
tokens = ["voltage", "spike", "alarm"]
Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])    # (n, d_k)
K = Q.copy()                                           # (n, d_k): here the same as Q
V = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])  # (n, d_v)

# %% [markdown]
# Before writing any code, work out *voltage*'s row with pen and paper: its raw scores against
# the three keys, the same scores divided by `√d_k = √2`, the softmax of those, and the weighted
# sum of the value rows. Which token gets the least weight, and is it zero? Keep your numbers:
# your function will reproduce them just after the exercise.
#
# **Exercise 2 (4 points).** Write `attention(q, k, v)` for `q (n_q, d_k)`, `k (n_k, d_k)`,
# `v (n_k, d_v)`, returning `(output, weights)` with shapes `(n_q, d_v)` and `(n_q, n_k)`.
# Use your `softmax`. Watch the three widths: `n_q`, `n_k`, `d_k` and `d_v` may all differ.
# Results have the dtype of NumPy's arithmetic on the inputs (float64 for the examples here): you
# may compute in float32, but a float32 result for float64 inputs fails the check.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true}
def attention(q, k, v):
    """Scaled dot-product attention: returns (output (n_q, d_v), weights (n_q, n_k))."""
    ### BEGIN SOLUTION
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)     # (n_q, n_k)
    weights = softmax(scores, axis=-1)  # over the keys
    return weights @ v, weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "attention_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false}
check_attention(attention)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(attention, check_attention, "attention")
import torch  # noqa: E402 -- an independent reference: PyTorch's fused attention

# The calls below use the course's softmax, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed, shape in zip(fresh_seeds(3), [(1, 7, 3, 5), (6, 2, 9, 4), (40, 60, 64, 16)]):
    check_attention(attention, seed, *shape, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_q, _k, _v = _rng.normal(size=(5, 8)), _rng.normal(size=(11, 8)), _rng.normal(size=(11, 3))
with quiet(), course_callees(attention, "softmax", verbose=False):
    _out, _w = attention(_q, _k, _v)
_want = torch.nn.functional.scaled_dot_product_attention(
    *(torch.from_numpy(a)[None] for a in (_q, _k, _v)))[0].numpy()
expect_close(_out, _want, "attention output against torch's scaled_dot_product_attention")
assert np.all(_out <= _v.max(axis=0) + 1e-5) and np.all(_out >= _v.min(axis=0) - 1e-5), \
    "each output row must be a weighted average of the value rows"
### END HIDDEN TESTS

# %% [markdown]
# ### Your function on the worked example
#
# Compare with your pen-and-paper numbers for *voltage* (the first row):

# %%
output, weights = attention(Q, K, V)  # your attention
print("raw scores of 'voltage':   ", Q[0] @ K.T)
print("scaled by 1/√2:            ", Q[0] @ K.T / np.sqrt(2))
print("weights of 'voltage':      ", weights[0], " sum =", weights[0].sum())
print("output of 'voltage':       ", output[0])

# %% [markdown]
# Read the first row: *voltage*'s query matches its own key and *alarm*'s equally well (raw
# score 1 each), and *spike*'s not at all (0). After scaling and the softmax, *voltage* gives
# weight 0.401 to itself, 0.198 to *spike* and 0.401 to *alarm*, so its output is
# `0.401·[10, 0] + 0.198·[0, 10] + 0.401·[5, 5] ≈ [6.017, 3.983]`: mostly its own value,
# pulled towards *alarm*'s. Even a zero score keeps a fifth of the weight — softmax never
# switches a key fully off. If your numbers differ, the check above names the likely mistake.

# %% [markdown]
# ## Follow one query: the calculator
#
# The figure follows *voltage* through the three steps. Below it, the calculator lets you pick
# another query, switch the `√d_k` scaling off, or edit `Q`, `K` and `V` (one row per line) and
# watch every number change. Try: make *spike*'s key `[3, 0]` — whom does *voltage* attend to
# now? (Where widgets do not run, a picture of that experiment stands in for the calculator.)

# %%
plot_lookup(lookup_steps(Q, K, V, query_index=0, tokens=tokens))
plt.show()

# %% tags=["hide-in-slides"]
display(attention_calculator(Q, K, V, tokens, experiment=("spike", [3.0, 0.0])))

# %% [markdown]
# ## Soft selection or a blend?
#
# When one score stands far above the others, the softmax is nearly one-hot and attention
# simply **copies** that key's value: a hard lookup. When the scores are close, the output is
# a **blend**. Learned projections can move between the two by scaling queries and keys. Below,
# one query's scores against the three keys, multiplied by a growing factor:

# %%
q_new = np.array([2.0, 0.5])
new_scores = K @ q_new / np.sqrt(2)
ax = plot_sharpening(new_scores, np.logspace(-1, 1.5, 60), tokens)
ax.set_title(f"scores {np.round(new_scores, 2)} × factor")
plt.show()
with quiet():
    for factor in (0.1, 1.0, 30.0):
        print(f"factor {factor:>4}: weights {softmax(factor * new_scores)}")

# %% [markdown]
# **Exercise 3 (3 points).** In self-attention a sequence looks itself up: its queries, keys and
# values all come from the same token embeddings `x (n, d_model)`, each through a learned weight
# matrix of its own — `w_q, w_k (d_model, d_k)` and `w_v (d_model, d_v)`, applied from the right
# as `x @ w` (PyTorch's `nn.Linear` stores the transpose — later lessons come back to that).
# Write `self_attention(x, w_q, w_k, w_v)` returning `(output (n, d_v), weights (n, n))`; reuse
# what you have already written.

# %% nbgrader={"grade": false, "grade_id": "self_attention", "locked": false, "schema_version": 3, "solution": true}
def self_attention(x, w_q, w_k, w_v):
    """Self-attention of x (n, d_model): returns (output (n, d_v), weights (n, n))."""
    ### BEGIN SOLUTION
    return attention(x @ w_q, x @ w_k, x @ w_v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "self_attention_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_self_attention(self_attention)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(self_attention, check_self_attention, "self_attention")
# The calls below use the course's attention and softmax, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed, shape in zip(fresh_seeds(2), [(7, 5, 2, 3), (3, 16, 8, 4)]):
    check_self_attention(self_attention, seed, *shape, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_x = _rng.normal(size=(6, 4))
_ws = [_rng.normal(size=(4, 3)), _rng.normal(size=(4, 3)), _rng.normal(size=(4, 2))]
_perm = _rng.permutation(6)
with quiet(), course_callees(self_attention, "attention", "softmax", verbose=False):
    _out, _ = self_attention(_x, *_ws)
    _out_perm, _ = self_attention(_x[_perm], *_ws)
expect_close(_out_perm, np.asarray(_out)[_perm],
             "self_attention of shuffled tokens (it must shuffle the output rows the same way)")
### END HIDDEN TESTS

# %% [markdown]
# ## A filter computed from the data
#
# A 1-D convolution also mixes neighbouring tokens, but with **fixed** weights: the same band
# for every input. Attention computes its mixing weights from the input itself. Two "sentences"
# of five random embeddings, passed through the same projections (drawn with variance
# `1/d_model`, as initialisations do, so that the scores spread about as much as lesson 03 wants):

# %%
rng = np.random.default_rng(0)
d_model, n = 4, 5
w_q, w_k, w_v = (rng.normal(size=(d_model, 3)) / np.sqrt(d_model) for _ in range(3))
conv = 0.5 * np.eye(n) + 0.25 * np.eye(n, k=1) + 0.25 * np.eye(n, k=-1)  # kernel [¼, ½, ¼]
positions = [str(i) for i in range(n)]
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), layout="constrained")
plot_weights(conv, positions, positions, ax=axes[0], title="convolution: same for every input")
for ax, name in zip(axes[1:], ["sentence A", "sentence B"]):
    _, w = self_attention(rng.normal(size=(n, d_model)), w_q, w_k, w_v)
    plot_weights(w, positions, positions, ax=ax, title=f"attention on {name}")
plt.show()

# %% [markdown]
# ### Why three projections, not one?
#
# The worked example used `K = Q`: one set of vectors both asks and answers. Then the score of
# `i` with `j` always equals the score of `j` with `i`: an adjective cannot score its noun highly
# without the noun scoring the adjective just as highly, and a token's score with itself,
# `‖q_i‖²`, can never be negative. (The *weights* need not be symmetric: each row's softmax shares
# out its own total among different rivals, so `i → j` and `j → i` can still get different
# shares.) Separate projections let *what a token looks for* (`W_Q`)
# differ from *what it offers to be found by* (`W_K`): a verb can look for its subject without
# the subject looking for the verb. `W_V` then separates both from *what it passes on* once
# found. On 200 random tokens:

# %%
x_many = np.random.default_rng(1).normal(size=(200, d_model))
q_many, k_many = x_many @ w_q, x_many @ w_k
for label, scores in (("K = Q (one projection)", q_many @ q_many.T), ("separate W_Q and W_K", q_many @ k_many.T)):
    print(f"{label:<24} scores symmetric: {np.allclose(scores, scores.T)!s:<5}  "
          f"tokens scoring themselves below 0: {np.mean(np.diag(scores) < 0):.0%}")

# %% [markdown]
# ## Shuffle the tokens, shuffle the output
#
# Nothing in self-attention looks at *where* a token sits: permute the rows of `x` and the output
# rows are permuted in exactly the same way. This is **permutation equivariance**, and it is why
# lesson 05 has to add positions.

# %%
x = rng.normal(size=(n, d_model))
perm = np.array([3, 0, 4, 1, 2])
out, _ = self_attention(x, w_q, w_k, w_v)
out_shuffled, _ = self_attention(x[perm], w_q, w_k, w_v)
print("shuffle, then attend == attend, then shuffle:", np.allclose(out_shuffled, out[perm]))
print("largest difference:", np.abs(out_shuffled - out[perm]).max())

# %% [markdown]
# ## `· V`, not `· Vᵀ`: check it with shapes
#
# The formula is sometimes printed as `softmax(QKᵀ/√d_k) Vᵀ`. With tokens as rows — the
# convention of this course, of PyTorch and of the paper — the weights are `(n_q, n_k)` and `V`
# is `(n_k, d_v)`, so only `weights @ V` fits:

# %%
_, w_example = attention(Q, K, V)  # the worked example's weights, from your attention
print("weights:", w_example.shape, " V:", V.shape, " weights @ V:", (w_example @ V).shape)
try:
    w_example @ V.T
except ValueError as err:
    print("weights @ V.T fails:", err)

# %% [markdown]
# When `n_k` happens to equal `d_v`, `weights @ V.T` runs — and silently computes something else.
# Shapes catch the mistake only when the sizes differ, which is why the checks use
# non-square examples.

# %%
V_square = np.arange(9.0).reshape(3, 3)  # n_k = d_v = 3
w_example = attention(Q, K, V)[1]  # the worked example's weights again
print("same result?", np.allclose(w_example @ V_square, w_example @ V_square.T))

# %% [markdown]
# **Think (2 points, graded by hand).** The softmax in attention runs over each row of `Q Kᵀ`
# (over the keys), not over each column. Explain in two or three sentences what would go wrong
# if it ran over the columns, in terms of what one query receives.

# %% [markdown] nbgrader={"grade": true, "grade_id": "why_rows", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# Full marks: each query must get a weighted *average* of the values — its weights over the keys
# should be positive and sum to 1. Over columns, each key's weights would sum to 1 across the
# queries, so one query's weights could sum to anything: its output is no longer an average and
# grows or shrinks with how many queries compete for the same keys; adding a query changes the
# others' outputs.
# === END MARK SCHEME ===

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=02_attention_lookup` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** You double every value vector `v_j` and leave the queries and keys as they are. One
# query's attention output…
#
# - (a) doubles: the weights depend on the query and the keys only
# - (b) stays the same: the weights sum to 1, so the scale cancels
# - (c) grows, but less than twice: the softmax damps large values
# - (d) changes by an amount that depends on the query's scores

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "a", "the output is Σ_j w_j v_j with the weights w = softmax(q·k_j / √d_k): the values "
             "never enter the weights, so doubling every v_j doubles the output. Weights that "
             "sum to 1 make the output an average of the values — and the average of doubled "
             "values is doubled; the softmax acts on the scores, not on the values")
### END HIDDEN TESTS

# %% [markdown]
# **2.** You multiply every query and every key by 2 (same `d_k`). The weights become…
#
# - (a) unchanged: a softmax ignores a common factor
# - (b) sharper, closer to one-hot
# - (c) flatter, closer to uniform
# - (d) twice as large, in the same order

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "b", "every score q·k is multiplied by 4, which spreads the scores apart; a softmax "
             "ignores a constant added to every score, not a factor, and its weights still sum "
             "to 1: spread-out scores give weights closer to one-hot")
### END HIDDEN TESTS

# %% [markdown]
# **3.** `Q` is `(10, 64)`, `K` is `(12, 64)`, `V` is `(12, 32)`. The output of attention has
# shape…
#
# - (a) `(10, 32)`
# - (b) `(12, 32)`
# - (c) `(10, 12)`
# - (d) `(10, 64)`

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "a", "weights are (n_q, n_k) = (10, 12), times V (12, 32) gives (10, 32): one output "
             "row per query, d_v columns; (10, 12) is the weights themselves")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Attention is a soft lookup: scores `q·k_j`, a softmax over the keys, a weighted sum of values.
# - `Q Kᵀ` is `(n_q, n_k)`; the softmax runs over each row; the output is `weights @ V`.
# - A stable softmax subtracts the row maximum; `-inf` scores get weight exactly 0.
# - Sharp scores copy one value, flat scores blend; the weights are computed from the data.
# - Self-attention is permutation-equivariant: it does not know the order of its tokens.
#
# **Next:** lesson 03 measures why the scores are divided by `√d_k`.
