# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Why divide by √d_k?
#
# **Promise:** by the end you can show with measurements, not only recite, why attention
# divides its scores by `√d_k`, and what goes wrong when it does not.
#
# **You will**
# - see why a dot product of two random vectors spreads like `√d_k`, and measure it (exercise 1);
# - put a number on "how peaked" a softmax is: its entropy (exercise 2);
# - write the softmax Jacobian and watch it vanish when the weights are nearly one-hot (exercise 3);
# - measure the largest weight, the entropy and the gradient for widths 2 to 512, with and
#   without the scale, and explore them with a slider;
# - say why the argument holds only approximately, at initialisation;
# - train one attention head at `d_k = 128` with and without the scale, and see how fast each
#   learns where to look.
#
# **Time:** about 55 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from helpers.attention import softmax as course_softmax  # lesson 02's stable softmax, the course's version
from helpers.checks import (
    check_entropy,
    check_score_std,
    check_softmax_jacobian,
    expect_close,
    fresh_seeds,
    hint,  # after a failing check: hint() for a hint, hint() again for the fix
    quiet,
)
from helpers.checks.scaling import std_rel_error
from helpers.plots import plot_scaling_sweep, plot_scaling_view, plot_score_std
from helpers.quiz import check_choice, grade_choice
from helpers.scaling import (
    init_spread,
    measure_score_std,
    scaling_sweep,
    scaling_view,
    sweep_table,
    view_summary,
)
from helpers.widgets import scaling_explorer

np.set_printoptions(precision=3, suppress=True)
D_KS = [2**i for i in range(1, 10)]  # the widths measured in this lesson: 2, 4, ..., 512

# %% [markdown]
# ## Where the spread comes from
#
# A score is a dot product, a sum of `d_k` products:
#
# $$q \cdot k = \sum_{m=1}^{d_k} q_m k_m .$$
#
# Suppose, as Vaswani et al. (2017, §3.2.1, in a footnote) do to make the point, that the
# components of `q` and `k` are independent, with mean 0 and variance 1. Then each product
# `q_m k_m` has mean 0 and variance `E[q_m²] E[k_m²] = 1`. Variances of independent terms add,
# so the sum has variance `d_k` and a standard deviation of `√d_k`: the wider the vectors, the
# more spread out the scores. The Transformer's base model uses `d_k = 64` (Vaswani et al.
# 2017, §3.2.2):

# %%
d_k = 64
print(f"d_k = {d_k}: variance of q·k = {d_k}, standard deviation = √{d_k} = {np.sqrt(d_k):g}")

# %% [markdown]
# That is the prediction. Measure it.
#
# **Exercise 1 (2 points).** Write `score_std(d_k, n_pairs=10_000, seed=0)`: draw `n_pairs`
# independent pairs `q, k ~ N(0, I)` of width `d_k` from `np.random.default_rng(seed)`, compute
# one dot product per pair, and return the sample standard deviation of those `n_pairs` numbers
# as a float (`ddof=0` or `ddof=1`: at these sample sizes the difference does not matter). Stack the pairs as rows, `q` and `k` of shape `(n_pairs, d_k)`; `q @ k.T` would
# compare every `q` with every `k` and build an `(n_pairs, n_pairs)` matrix — too big, and not
# what is asked.

# %% nbgrader={"grade": false, "grade_id": "score_std", "locked": false, "schema_version": 3, "solution": true}
def score_std(d_k, n_pairs=10_000, seed=0):
    """Sample standard deviation of q·k over n_pairs random pairs q, k ~ N(0, I) of width d_k."""
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_pairs, d_k))  # (n_pairs, d_k)
    k = rng.standard_normal((n_pairs, d_k))  # (n_pairs, d_k)
    scores = np.sum(q * k, axis=1)  # (n_pairs,) one dot product per pair
    return float(np.std(scores))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "score_std_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_score_std(score_std)
### BEGIN HIDDEN TESTS
from helpers import scaling as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(score_std, check_score_std, "score_std")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for seed in fresh_seeds(2):
    check_score_std(score_std, seed=seed, d_k=int(_rng.integers(8, 129)), verbose=False)
# Against the reference: two independent estimates of the same std agree within sampling error.
for seed in fresh_seeds(2):
    _d, _n = int(_rng.integers(2, 100)), 40_000
    with quiet():
        _got = float(score_std(_d, n_pairs=_n, seed=seed))
    expect_close(_got, reference.score_std(_d, n_pairs=_n, seed=seed),
                 f"score_std({_d}, n_pairs={_n}) against the reference's estimate",
                 rtol=6 * np.sqrt(2) * std_rel_error(_d, _n))
### END HIDDEN TESTS

# %% [markdown]
# Now the measurement for every width from 2 to 512, made with your `score_std`, against the
# prediction `√d_k` (note the logarithmic axes). The blue squares are the same scores divided by
# `√d_k`.

# %%
measured = measure_score_std(D_KS, score_std=score_std)  # (9,) one std per width
plot_score_std(D_KS, measured)
plt.show()
for d, s in zip(D_KS, measured):
    print(f"d_k = {d:>3}: measured std {s:6.3f}   √d_k = {np.sqrt(d):6.3f}   ratio {s / np.sqrt(d):.3f}")

# %% [markdown]
# The measured spread sits on the `√d_k` line at every width — at `d_k = 64` it is close to
# the predicted 8 — and after dividing by `√d_k` it sits near 1 whatever the width. That is what
# the scale is for: it makes the spread of the scores independent of `d_k`.

# %% [markdown]
# ## What the softmax does with a spread of 8
#
# The softmax exponentiates differences of scores: two scores that differ by `Δ` get weights in
# the ratio `e^Δ`. A difference of one standard deviation means something very different at the
# two spreads:

# %%
for spread in (1.0, np.sqrt(64)):
    print(f"scores one std ({spread:g}) apart: weight ratio e^{spread:g} = {np.exp(spread):,.1f}")

# %% [markdown]
# Below, 500 random queries at `d_k = 64`, each against its own 16 random keys. Left: all their
# scores, on the same axis in both rows; right: the weights of a typical query (the median one,
# ranked by its largest weight without the scale). Top row without the scale, bottom row with
# it — the same queries and keys.

# %%
fig, axes = plt.subplots(2, 2, figsize=(9, 5.6), layout="constrained")
for row, scale in zip(axes, (False, True)):
    view = scaling_view(64, scale)
    plot_scaling_view(view, row)
    print(view_summary(view))
plt.show()

# %% [markdown]
# Without the scale, most queries pile nearly all their weight onto one key: attention stops
# blending and becomes a hard choice made by the luck of the initial weights. With it, the same
# scores give a blend. To compare many queries and many widths, "nearly one-hot" needs a number.

# %% [markdown]
# ## How peaked? The entropy of the weights
#
# The **entropy** of a probability vector `p` is
#
# $$H(p) = -\sum_i p_i \log p_i \quad\text{(in nats, with the natural log).}$$
#
# It is 0 for a one-hot vector (no uncertainty at all), `log n` for the uniform vector over `n`
# entries (the most uncertain), and in between otherwise. A weight of exactly 0 contributes
# nothing: `0 · log 0` counts as 0, the limit of `x log x` as `x → 0`.
#
# **Exercise 2 (2 points).** Write `entropy(p, axis=-1)`: the entropy in nats of the
# probability vectors along `axis` of an array `p` of any shape (for a 2-D `p` and `axis=-1`, one
# entropy per row). Zeros in `p` must give 0, not NaN — and without a warning: any `np.log(0)`
# evaluated along the way prints one, even when the result is thrown away afterwards (by
# `np.nansum` or a mask), and an entropy that warns fails the check. Which value
# could stand in for a zero entry so that its term `p · log p` comes out as 0 by itself? Leave `p`
# itself unchanged; the result is float64.

# %% nbgrader={"grade": false, "grade_id": "entropy", "locked": false, "schema_version": 3, "solution": true}
def entropy(p, axis=-1):
    """Shannon entropy −Σ p log p in nats along axis; entries with p = 0 contribute 0."""
    ### BEGIN SOLUTION
    p = np.asarray(p, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))  # log 1 = 0, so zero entries add nothing
    return -np.sum(p * logs, axis=axis)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "entropy_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_entropy(entropy)
### BEGIN HIDDEN TESTS
from helpers import scaling as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(entropy, check_entropy, "entropy")
for seed, shape in zip(fresh_seeds(2), [(3, 7), (6, 4)]):
    check_entropy(entropy, seed=seed, shape=shape, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_p3 = course_softmax(_rng.normal(scale=3.0, size=(2, 5, 4)), axis=1)
_zeros = _rng.random(_p3.shape) < 0.3  # zeros scattered anywhere...
_zeros[:, 0, :] = False  # ...but never a whole distribution
_p3[_zeros] = 0.0
_p3 /= _p3.sum(axis=1, keepdims=True)
with quiet():
    _h3 = entropy(_p3, axis=1)
    _perm = entropy(_p3[:, _rng.permutation(5)], axis=1)
expect_close(_h3, reference.entropy(_p3, axis=1), "entropy of a 3-D array with zeros, axis=1")
expect_close(_perm, _h3, "entropy after shuffling the entries (it must not change)")
assert np.all(np.asarray(_h3) <= np.log(5) + 1e-6), "no entropy can exceed log n, the uniform one"
### END HIDDEN TESTS

# %% [markdown]
# Your `entropy` on the 500 queries of the figure, without and with the scale, against the
# largest possible value `log 16`:

# %%
for scale in (False, True):
    h = entropy(scaling_view(64, scale).weights)  # (500,) one entropy per query
    print(f"d_k = 64, {'÷√d_k    ' if scale else 'not scaled'}: mean entropy {h.mean():.3f} nats, "
          f"median {np.median(h):.3f}   (uniform: log 16 = {np.log(16):.3f})")

# %% [markdown]
# ## How much gradient gets through? The softmax Jacobian
#
# Training moves the scores `z` by the gradient that reaches them *through* the softmax, so what
# matters is how the weights `p = softmax(z)` react to a change of the scores. With
# `p_i = e^{z_i} / Σ_m e^{z_m}`, the quotient rule gives
#
# $$\frac{\partial p_i}{\partial z_j} = p_i(\delta_{ij} - p_j) =
# \begin{cases} p_i(1 - p_i) & i = j \\ -p_i p_j & i \ne j \end{cases}$$
#
# where `δ_ij` is 1 if `i = j` and 0 otherwise. Every entry has a factor `p_i`, and the diagonal
# `p_i(1 − p_i)` is zero both at `p_i = 0` and at `p_i = 1`. So when the weights are nearly
# one-hot, *every* entry is nearly zero: whatever the loss asks for, the scores hardly move. By
# the chain rule, the gradient with respect to the scores is `Jᵀ` times the gradient with respect
# to the weights, so a small Jacobian `J` means a small gradient.
#
# **Exercise 3 (3 points).** Write `softmax_jacobian(p)`: for a probability vector `p` of shape
# `(n,)`, return the `(n, n)` matrix whose entry `[i, j]` is `∂p_i/∂z_j = p_i(δ_ij − p_j)` — row
# `i` for the output `p_i`, column `j` for the input `z_j`.

# %% nbgrader={"grade": false, "grade_id": "softmax_jacobian", "locked": false, "schema_version": 3, "solution": true}
def softmax_jacobian(p):
    """The (n, n) Jacobian ∂p_i/∂z_j = p_i(δ_ij − p_j) of p = softmax(z), given p (n,)."""
    ### BEGIN SOLUTION
    p = np.asarray(p, dtype=float)
    return np.diag(p) - np.outer(p, p)  # (n, n)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "softmax_jacobian_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_softmax_jacobian(softmax_jacobian)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(softmax_jacobian, check_softmax_jacobian, "softmax_jacobian")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for seed in fresh_seeds(2):
    check_softmax_jacobian(softmax_jacobian, seed=seed, n=int(_rng.integers(2, 12)), verbose=False)
# Against finite differences of the softmax itself, on fresh logits.
_z = _rng.normal(scale=2.0, size=int(_rng.integers(3, 10)))
_h = 1e-5
_numeric = np.column_stack([(course_softmax(_z + _h * _e) - course_softmax(_z - _h * _e)) / (2 * _h)
                            for _e in np.eye(len(_z))])  # column j = ∂p/∂z_j
with quiet():
    _jac = softmax_jacobian(course_softmax(_z))
# atol: a float32 Jacobian is off by up to ~1e-7 on the diagonal, where p − p² cancels near p = 1.
expect_close(_jac, _numeric, "softmax_jacobian against finite differences of softmax",
             rtol=1e-5, atol=5e-7)
expect_close(np.asarray(_jac).sum(axis=0), np.zeros(len(_z)),
             "column sums of softmax_jacobian (the weights always sum to 1, so they must be 0)")
### END HIDDEN TESTS

# %% [markdown]
# Check your Jacobian the way the definition reads: nudge one score `z_j` up and down a little
# and see how the weights move.

# %%
z = np.array([1.0, -0.5, 2.0, 0.3])
step = 1e-6
numeric = np.column_stack([(course_softmax(z + step * e) - course_softmax(z - step * e)) / (2 * step)
                           for e in np.eye(len(z))])  # (n, n) column j = ∂p/∂z_j
print("largest difference from finite differences:", np.abs(softmax_jacobian(course_softmax(z)) - numeric).max())

# %% [markdown]
# Now the typical query of the figure above, at `d_k = 64`: how large is its Jacobian (the
# Frobenius norm, the square root of the sum of all squared entries) without and with the scale?

# %%
view = scaling_view(64, False)
raw = view.scores[view.shown]  # (16,) the typical query's raw scores q·k
for label, z in (("q·k      ", raw), ("q·k / √64", raw / np.sqrt(64))):
    p = course_softmax(z)
    print(f"{label}: largest weight {p.max():.4f}, "
          f"‖∂p/∂z‖ = {np.linalg.norm(softmax_jacobian(p)):.2e}")

# %% [markdown]
# ## Measured across widths
#
# One query proves little. Below, for every width from 2 to 512: 500 random queries, each with
# its own 16 random keys, measured with *your* `entropy` and `softmax_jacobian` — the average
# largest weight, the average entropy, and the median size of the Jacobian (the band spans the
# middle half of the queries). A query counts as *stalled* when its Jacobian norm is below 0.01.

# %%
from helpers.scaling import sweep_reading  # the sentences below the table, computed from it

sweep = scaling_sweep(D_KS, entropy=entropy, softmax_jacobian=softmax_jacobian)
plot_scaling_sweep(sweep)
plt.show()
print(sweep_table(sweep))
print()
print(sweep_reading(sweep))

# %% [markdown]
# Read the figure from left to right. Without the scale (red), the largest weight climbs
# towards 1 and the entropy falls towards 0 as `d_k` grows. The Jacobian does not simply shrink:
# the sentences printed under the table say where the unscaled softmax is the *more* sensitive
# one, where it falls behind and where it stalls. With the scale (blue) all three curves are
# flat: the softmax behaves the same whatever `d_k` is. That is the real job of `√d_k` — not to
# make the scores small, but to make their spread independent of the width, so that the softmax
# sits in the same sensitive range at every width.

# %% [markdown]
# ## Try it: slide `d_k`, switch the scale
#
# Move the slider and flip the switch: the histogram shows the scores of all 500 queries, the
# bars the weights of a typical query, the line below the numbers. It opens at `d_k = 512`, the widest
# width of the sweep, without the scale — the figures above showed 64. (Where widgets do not run,
# you see that first picture.)

# %% tags=["hide-in-slides"]
display(scaling_explorer(d_k=512))

# %% [markdown]
# ## An argument about initialisation
#
# The variance argument needs components that are independent, with mean 0 and variance 1.
# That is an assumption about the *start* of training, and even there it holds only roughly.
# Below, tokens with unit-variance features (`d_model = 512`, as in the base model: Vaswani et
# al. 2017, §3.1) pass through
# two freshly created `nn.Linear(512, 64)` layers. PyTorch initialises their weights uniformly
# between `±1/√d_model` (PyTorch documentation of `nn.Linear`), not for unit-variance outputs:

# %%
spread = init_spread(d_model=512, d_k=64)
print(f"std of one component of q:  {spread.component_std:.3f}   (the argument assumes 1)")
print(f"std of q·k:                 {spread.score_std:.3f}   (√64 = {np.sqrt(64):g} if it were 1)")
print(f"std of q·k / √64:           {spread.scaled_score_std:.3f}")

# %% [markdown]
# The components start with a standard deviation below 1, so the scores start smaller than the
# argument predicts — harmless, and still independent of `d_k` after the division: for
# components of standard deviation `σ`, the spread of `q·k / √d_k` is `σ²` at every width.
#
# Once training starts, the projections are learned. Queries are pushed towards the keys they
# should match, so `q` and `k` are no longer independent, and their size is whatever the task
# needs — lesson 02 showed that larger queries and keys make the weights sharper. So `√d_k` is a
# fixed constant that makes the *start* well behaved at any width, not a normalisation that
# holds during training. Vaswani et al. (2017, §3.2.1) offer the variance argument as an
# illustration, not a proof: they note that without the scale, dot-product attention fell behind
# additive attention for larger `d_k` (citing Britz et al. 2017; *additive* attention, Bahdanau et
# al.'s, scores a query against a key with a small network, `vᵀ tanh(W q + U k)`, instead of a dot
# product), and *suspect* the reason —
# large dot products push the softmax into regions where its gradients are extremely small, the
# effect measured above.

# %% [markdown]
# ## What training does to the spread
#
# Lesson 01 trained a small attention classifier on its reviews: width 32, two layers of four
# heads with `d_head = 8`, three seeds (`data/sentiment/`). (A *head* is one attention of its own,
# with its own `W_Q`, `W_K`, `W_V`; a layer runs four side by side, each on queries and keys of
# width `d_head = 32 / 4 = 8` — lesson 06 builds them.) Its weights show what happens after
# the start. Below, every head of the three trained models reads 1,000 of lesson 01's test
# reviews, and so does each model as it was initialised from the same seed, before any training.
# Per head: the spread of its scaled scores `q·k/√d_head`, the entropy of a query's weights as a
# share of `log n` (1 means uniform over the review's `n` tokens), the average largest weight,
# and the share of queries whose Jacobian norm is below 0.01.
#
# Predict first. Each layer first rescales every token's vector to mean 0 and variance 1 (a
# *LayerNorm*, lesson 07), and PyTorch draws the query and key projections at random with the
# variance Glorot and Bengio (2010) proposed, *Xavier initialisation*, which keeps the size of a
# vector about the same through a layer; together these give each component of `q` and `k`
# variance ½. What spread
# does the variance argument then give `q·k/√d_head` at initialisation?

# %%
from helpers.plots import plot_trained_spread
from helpers.scaling import init_prediction, trained_spread, trained_spread_reading, trained_spread_table
from helpers.trained import load_model

predicted = init_prediction(load_model("attention", seed=0))  # σ² for this model's initialisation
spreads = trained_spread(seeds=(0, 1, 2))
plot_trained_spread(spreads, predicted)
plt.show()
print(trained_spread_table(spreads))
print()
print(trained_spread_reading(spreads, predicted))

# %% [markdown]
# At the start the argument holds: every head's spread sits near the predicted `σ²`, and the
# weights are close to uniform, so every softmax starts in its sensitive range. Training then
# gives each head the spread its job needs. Some heads stay broad and average over the review;
# others turn into sharp lookups, with scores spread wider than unscaled scores at `d_k = 64`.
# Many of their queries are stalled, and that is no defect at the end of training: such a query
# has settled where it looks. The danger the scale is meant to remove is a softmax that is
# saturated *before* the model has learned where to look, when every gradient it needs passes
# through it. The next section trains a model both ways and measures that danger.

# %% [markdown]
# ## Scaled against unscaled, in training
#
# A task this model can solve only through its attention, at a width where the scale matters: 16 pairs (key,
# value), with all keys different, and a query that names one of the keys; the answer is the
# value stored under it. One attention head with `d_k = 128` must learn to put its weight on the
# pair whose key matches the query, and a linear layer reads the value from what the head hands
# over. The two variants differ only in the scores, `q·k / √128` or `q·k`. Everything else is
# the same: the initial weights (drawn so that every component of `q` and `k` starts with
# variance about 1, the argument's assumption), the batches of 64 fresh lookups, Adam at the
# same learning rate, 400 steps, three seeds. The command `python -m experiments.scaled_lookup`
# trains the six runs (half a minute of CPU) and stores them in `data/scaled_lookup/`; this
# lesson loads them. Left: the training loss (line: median over the seeds; band: lowest to
# highest). Right: the average weight a query puts on the right pair, measured on 256 fixed
# lookups every 10 steps.

# %%
from IPython.display import Markdown

from experiments import scaled_lookup

lookup_runs = scaled_lookup.load_results()
scaled_lookup.plot_scaled_lookup(lookup_runs)
plt.show()
display(Markdown(scaled_lookup.summary_markdown(lookup_runs)))
display(Markdown(scaled_lookup.reading(lookup_runs)))

# %% [markdown]
# Three seeds are three draws, and training is sensitive: the same run on another CPU rounds its
# floats differently and can end elsewhere. The command `python -m experiments.scaled_lookup
# --spread` trains seeds 0–5 of both variants again under four of PyTorch's kernel paths (the
# same code, the floats rounded differently) and stores them in `data/scaled_lookup/spread.json`:

# %%
display(Markdown(scaled_lookup.spread_reading(scaled_lookup.load_spread())))

# %% [markdown]
# The sentences above are computed from the stored runs, so they say what these runs show and
# no more: one head, one task, one width, one optimiser. Adam divides every step by the recent
# size of its gradients, which may make up for part of the small gradients of a saturated
# softmax; every run here uses Adam, so they measure what is left of the danger with the
# optimiser the course trains with, not how much Adam hides.

# %% [markdown]
# **Think (2 points, graded by hand).** A colleague divides the scores by `d_k` instead of
# `√d_k`, "to be safe". Using the variance argument, say in two or three sentences what the
# spread of the scores becomes as `d_k` grows, and what that does to the attention weights at
# the start of training.

# %% [markdown] nbgrader={"grade": true, "grade_id": "divide_by_d_k", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# Full marks: q·k has standard deviation √d_k, so q·k / d_k has standard deviation
# √d_k / d_k = 1/√d_k, which shrinks towards 0 as d_k grows (1 point). Scores that are all close
# to 0 give nearly uniform weights (entropy near log n): every query blends all values and cannot
# single out a key, the opposite failure of no scaling; training would have to grow W_Q and W_K
# to make attention selective again (1 point). Saying only "the scores get smaller" earns half.
# === END MARK SCHEME ===

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=03_scaling` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** `q` and `k` have `d_k = 256` independent components of mean 0 and variance 1. The
# standard deviation of `q·k` is about…
#
# - (a) 0
# - (b) 1
# - (c) 16
# - (d) 256

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "c", "the variance of a sum of 256 independent unit-variance products is 256, so the "
             "standard deviation is √256 = 16; 0 is the mean of q·k, 256 its variance, and 1 "
             "the spread after dividing by √d_k")
### END HIDDEN TESTS

# %% [markdown]
# **2.** One query's weights are `p ≈ (0.998, 0.001, 0.001)`. The softmax Jacobian `∂p/∂z` at this
# point is…
#
# - (a) close to the identity matrix
# - (b) close to `diag(p)`: 0.998 in its first entry
# - (c) close to ¼ on its diagonal
# - (d) close to zero in every entry

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "d", "every entry p_i(δ_ij − p_j) has the factor p_i, and the diagonal p_i(1 − p_i) is "
             "near 0 both for p_i ≈ 1 and for p_i ≈ 0: a nearly one-hot softmax passes almost "
             "no gradient to its scores. diag(p) leaves out the −p_i p_j term, and ¼ is the "
             "largest p(1 − p) can be, at p = ½")
### END HIDDEN TESTS

# %% [markdown]
# **3.** Why does the `√d_k` argument hold only approximately in a trained model?
#
# - (a) the components of `q` and `k` are not Gaussian, as the argument needs
# - (b) learned projections make `q` and `k` correlated and change their spread
# - (c) the `d_k` products average out only for `d_k` above about a thousand
# - (d) the softmax saturates in training, which changes the variance of `q·k`

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "b", "the argument needs only independent components of mean 0 and variance 1 — any "
             "distribution, any d_k — which holds roughly at initialisation; learned "
             "projections align queries with the keys they should match and scale them as the "
             "task needs. The softmax comes after the scores and does not change their "
             "variance")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - For independent components of mean 0 and variance 1, `q·k` has variance `d_k`: its spread
#   grows like `√d_k` — measured here from 2 to 512.
# - Softmax turns a score difference `Δ` into a weight ratio `e^Δ`: widely spread scores give
#   nearly one-hot weights (low entropy).
# - The softmax Jacobian `p_i(δ_ij − p_j)` vanishes for nearly one-hot weights, so the scores get
#   almost no gradient; without the scale, more and more queries stall as `d_k` grows.
# - Dividing by `√d_k` keeps the spread of the scores near 1 at every width, so the softmax
#   starts out the same whatever `d_k` is.
# - The argument is about initialisation: trained queries and keys are neither independent nor
#   of unit variance. In lesson 01's trained model the spread starts where the argument predicts,
#   and training moves it as far as each head needs.
# - In training, too: one head at `d_k = 128` without the scale starts nearly one-hot on a pair
#   chosen by chance and learns where to look later than the scaled head, on every seed and
#   kernel path tried — slower, not never; yet half or more of the unscaled runs have not
#   reached a loss of 0.1 after 400 steps, which every scaled run reaches within 70.
#
# **Next:** lesson 04 masks scores — padding, the future — and counts what the `n × n` score
# matrix costs.
