# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Several lookups at once: multi-head attention
#
# **Promise:** by the end you can cut attention into heads and glue them back together without
# scrambling a single number, match PyTorch's `nn.MultiheadAttention` to the last digit, and
# measure which heads of a trained model actually matter.
#
# **You will**
# - compute why 8 heads of width 64 cost about as much as one head of width 512;
# - see the classic reshape-without-transpose bug on a tensor whose numbers say where they came
#   from, then write `split_heads` and `merge_heads` (exercises 1 and 2);
# - write `multi_head_attention` (exercise 3) and check it against `nn.MultiheadAttention` by
#   copying its weights and flipping its mask;
# - remove the heads of lesson 01's trained classifier one at a time and measure what is lost.
#
# **Time:** about 50 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from helpers import trained
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.callees import check_names_defined
from helpers.checks.core import as_array, expect_close, fresh_seeds, quiet
from helpers.checks.heads import (
    check_merge_heads,
    check_multi_head_attention,
    check_split_heads,
    to_torch_mha,
)
from helpers.heads import (
    ablation_rows,
    ablation_summary,
    attention_cost,
    classifier_logits,
    head_ablation,
    layers_splitting,
    plot_ablation,
    plot_head_patterns,
    review_patterns,
    strongest_keys,
    tagged_tokens,
    torch_mask,
    weights_from_torch,
)
from helpers.masking import masked_attention as course_masked_attention  # lesson 04's, the course's version
from helpers.quiz import check_choice, grade_choice
from helpers.runtime import threads

torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## One lookup per token is not enough
#
# In *"the food was not good"*, the word *good* needs two things at once: the *not* that flips
# it, and the *food* it describes. One attention pattern gives each query one set of weights —
# one blend. **Multi-head attention** runs `H` attentions side by side, each with its own,
# smaller projections, and glues their answers together:
#
# $$\mathrm{head}_h = \mathrm{Attention}(X W_Q^{(h)},\; X W_K^{(h)},\; X W_V^{(h)}), \qquad
# \mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W_O .$$
#
# In practice nobody stores `H` small matrices. One `(D, D)` matrix `W_Q` holds all of them:
# its columns `h·d_h … (h+1)·d_h − 1` are head `h`'s projection, with `d_h = D / H`. So we
# project once, `Q = X W_Q` of shape `(B, T, D)`, and then **cut each token's `D` features into
# `H` slices of width `d_h`**. Each head attends with its slice, scaled by `√d_h` (the width of
# *its* queries); the `H` outputs are laid side by side again and mixed by `W_O`.
#
# | tensor | shape |
# |---|---|
# | `x`, `Q = x W_Q` | `(B, T, D)` |
# | split into heads | `(B, H, T, d_h)` |
# | weights of every head | `(B, H, T_q, T_kv)` |
# | heads merged, then `@ W_O` | `(B, T, D)` |

# %% [markdown]
# ### What eight heads cost
#
# The original Transformer uses `D = 512` and `H = 8` heads of `d_h = 64`. Count the
# multiply-adds of one attention layer for `n = 100` tokens, and its parameters (no biases):

# %%
n = 100
configs = {"8 heads of 64": (8, 64), "1 head of 512": (1, 512), "8 heads of 512": (8, 512)}
costs = {name: attention_cost(n, 512, h, d) for name, (h, d) in configs.items()}
print(f"{'':<16}{'projections':>13}{'scores':>12}{'mix':>12}{'W_O':>12}{'total':>13}{'parameters':>12}"
      f"{'score entries':>15}")
for name, c in costs.items():
    print(f"{name:<16}{c['projections']:>13,}{c['scores']:>12,}{c['mix']:>12,}{c['output']:>12,}"
          f"{c['total']:>13,}{c['parameters']:>12,}{c['score_entries']:>15,}")

# %% [markdown]
# Eight narrow heads and one wide head do exactly the same multiply-adds and hold the same
# `4·D²` parameters: each head does one eighth of the work. What grows with `H` is the number
# of score entries — `H` matrices of `n × n` — so the softmax and the memory for the weights
# grow; that is why the cost is only *about* the same. Eight heads of full width would cost
# eight times as much.
#
# Does splitting help? Vaswani et al. (2017, Table 3, rows A) kept the computation constant and
# varied `H`: a single head was 0.9 BLEU worse than eight on their English–German development
# set, and quality also dropped with too many heads (32 heads of width 16). Several narrow
# lookups beat one wide one, up to a point.

# %% [markdown]
# ## Cutting the features into heads
#
# Here is the bug almost everyone writes once. Take a tiny batch of 3 tokens with 6 features,
# where the entry for token `t`, feature `f` is the number `10·t + f`: `23` is token 2's
# feature 3. We want 2 heads of width 3 — head 0 gets features 0–2 of every token, head 1
# features 3–5.

# %%
x_tag = tagged_tokens(3, 6)  # (B, T, D) = (1, 3, 6), entry 10·t + f
print("x_tag[0] (one row per token):\n", x_tag[0])
wrong = x_tag.reshape(1, 2, 3, 3)  # straight to (B, H, T, d_h)
for h in range(2):
    print(f"\nhead {h}, reshape only:\n", wrong[0, h])

# %% [markdown]
# Head 0 should hold the rows `0 1 2`, `10 11 12`, `20 21 22`: the first three features of
# tokens 0, 1 and 2. Here its "second token" is `3 4 5` — the *other half of token 0* — and its
# third is token 1. The shape is right, nothing crashes, and the model attends between
# half-tokens. `reshape` only re-reads the numbers in memory order (token by token, feature by
# feature). Which shape can a plain `reshape` reach without mixing tokens, and what must happen
# to its axes afterwards?
#
# **Exercise 1 (2 points).** Write `split_heads(x, n_heads)`: a torch tensor `(B, T, D)` →
# `(B, H, T, D/H)`, head `h` holding features `h·D/H … (h+1)·D/H − 1` of every token. (Raising a
# `ValueError` when `D` is not divisible by `n_heads` is a good habit, not graded.)

# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true}
def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D/H): each token's features cut into n_heads contiguous slices."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    if D % n_heads:
        raise ValueError(f"D = {D} is not divisible by n_heads = {n_heads}")
    return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_h)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "split_heads_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_split_heads(split_heads)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(split_heads, check_split_heads, "split_heads")
for seed in fresh_seeds(3):
    check_split_heads(split_heads, seed=seed, verbose=False)
_g = torch.Generator().manual_seed(fresh_seeds(1)[0])
_x = torch.randn(4, 7, 10, generator=_g)
with quiet():
    _s = as_array(split_heads(_x, 5), "split_heads(x (4, 7, 10), 5)")
for _h in range(5):
    expect_close(_s[:, _h], _x[..., 2 * _h : 2 * _h + 2].numpy(),
                 f"head {_h} of split_heads(x (4, 7, 10), 5) must be features {2 * _h}–{2 * _h + 1}")
### END HIDDEN TESTS

# %% [markdown]
# **Exercise 2 (2 points).** Write `merge_heads(x)`: `(B, H, T, d_h)` → `(B, T, H·d_h)`, the
# heads side by side for every token, head 0 first — the exact inverse of `split_heads`. The
# same trap waits in reverse: move the head axis back behind the tokens *before* reshaping.

# %% nbgrader={"grade": false, "grade_id": "merge_heads", "locked": false, "schema_version": 3, "solution": true}
def merge_heads(x):
    """(B, H, T, d_h) -> (B, T, H·d_h): the heads laid side by side again."""
    ### BEGIN SOLUTION
    B, H, T, d_h = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_h)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "merge_heads_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_merge_heads(merge_heads)
### BEGIN HIDDEN TESTS
from helpers import heads as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(merge_heads, check_merge_heads, "merge_heads")
for seed in fresh_seeds(3):
    check_merge_heads(merge_heads, seed=seed, verbose=False)
_g = torch.Generator().manual_seed(fresh_seeds(1)[0])
_y = torch.randn(3, 5, 2, 7, generator=_g)  # (B, H, T, d_h)
with quiet():
    _m = as_array(merge_heads(_y), "merge_heads(x (3, 5, 2, 7))")
expect_close(_m, reference.merge_heads(_y).numpy(), "merge_heads(x (3, 5, 2, 7))")
_z = torch.randn(2, 6, 12, generator=_g)
with quiet():
    _back = as_array(merge_heads(reference.split_heads(_z, 4)), "merge_heads(split_heads(z, 4))")
expect_close(_back, _z.numpy(), "merge_heads(split_heads(z, 4)) must give z back")
### END HIDDEN TESTS

# %% [markdown]
# Your `split_heads` on the tagged tokens: head 0 must hold `0 1 2`, `10 11 12`, `20 21 22`.

# %%
for h, head in enumerate(split_heads(x_tag, 2)[0]):
    print(f"head {h}:\n", head)

# %% [markdown]
# Check by eye with the tagged tokens: splitting and merging must give back every token exactly.

# %%
print(merge_heads(split_heads(x_tag, 2))[0])

# %% [markdown]
# ## Multi-head attention
#
# **Exercise 3 (5 points).** Write `multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads,
# mask=None)`:
#
# - `x_q (B, T_q, D)` gives the queries, `x_kv (B, T_kv, D)` the keys and values (the same
#   tensor for self-attention; a different one for cross-attention in lesson 07);
# - the four weights are `(D, D)` and applied as `x @ w`: `w_q`, `w_k`, `w_v` project into all
#   heads at once, `w_o` mixes what the heads found;
# - each of the `n_heads` heads is lesson 04's masked attention on its own slice of width
#   `d_h = D / n_heads` (so its scores are scaled by `√d_h`), under `mask` (bool, broadcastable to
#   `(B, H, T_q, T_kv)`, True = may attend; a query with no allowed key gets zeros);
# - return `(output (B, T_q, D), weights (B, H, T_q, T_kv))`.
#
# Use your `split_heads` and `merge_heads`. Lesson 04's `masked_attention` is the per-head step:
# this notebook has the course's version as `course_masked_attention` (the setup cell imports it),
# or paste your own `masked_attention` from lesson 04 into this cell. Torch's `@` works on
# `(B, H, …)` tensors all at once — no loop over heads needed. Results are float tensors of the
# inputs' dtype.

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention", "locked": false, "schema_version": 3, "solution": true}
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention: (output (B, T_q, D), weights (B, H, T_q, T_kv)); mask True = may attend."""
    ### BEGIN SOLUTION
    q = split_heads(x_q @ w_q, n_heads)  # (B, H, T_q, d_h)
    k = split_heads(x_kv @ w_k, n_heads)  # (B, H, T_kv, d_h)
    v = split_heads(x_kv @ w_v, n_heads)  # (B, H, T_kv, d_h)
    heads, weights = course_masked_attention(q, k, v, mask)  # every head at once: (B, H, T_q, d_h)
    return merge_heads(heads) @ w_o, weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "multi_head_attention_tests", "locked": true, "points": 5, "schema_version": 3, "solution": false}
check_names_defined(multi_head_attention)
check_multi_head_attention(multi_head_attention)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(multi_head_attention, check_multi_head_attention, "multi_head_attention")
# The calls below use the course's split_heads and merge_heads, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed, shape in zip(fresh_seeds(3), [(1, 4, 7, 8, 2), (3, 6, 2, 12, 4), (2, 5, 5, 6, 6)]):
    check_multi_head_attention(multi_head_attention, seed, *shape, verbose=False)
# Against nn.MultiheadAttention in its own dtype (float32), with and without a mask, T_q ≠ T_kv.
_g = torch.Generator().manual_seed(fresh_seeds(1)[0])
_D, _H = 16, 4
_xq, _xkv = torch.randn(3, 5, _D, generator=_g), torch.randn(3, 9, _D, generator=_g)
_ws = tuple(torch.randn(_D, _D, generator=_g) / 4 for _ in range(4))
_mha = to_torch_mha(_ws, _H)
_mask = torch.rand(5, 9, generator=_g) < 0.5
_mask[:, 4] = True  # every query has a key: nn.MultiheadAttention gives NaN otherwise
for _m in (None, _mask):
    with (torch.no_grad(), quiet(),
          course_callees(multi_head_attention, "split_heads", "merge_heads", verbose=False)):
        _want_o, _want_w = _mha(_xq, _xkv, _xkv, attn_mask=None if _m is None else ~_m,
                                need_weights=True, average_attn_weights=False)
        _o, _w = multi_head_attention(_xq, _xkv, *_ws, _H, mask=_m)
    _label = "without a mask" if _m is None else "with a (T_q, T_kv) mask"
    expect_close(_o, _want_o.numpy(), f"output against nn.MultiheadAttention {_label}", rtol=1e-4, atol=1e-5)
    expect_close(_w, _want_w.numpy(), f"weights against nn.MultiheadAttention {_label}", rtol=1e-4, atol=1e-5)
# Self-attention with a causal mask: changing the last token leaves the other outputs alone.
_x = torch.randn(2, 6, _D, generator=_g)
_x2 = _x.clone()
_x2[:, -1] = torch.randn(2, _D, generator=_g)
_causal = torch.ones(6, 6, dtype=torch.bool).tril()
with quiet(), course_callees(multi_head_attention, "split_heads", "merge_heads", verbose=False):
    _a = as_array(multi_head_attention(_x, _x, *_ws, _H, mask=_causal)[0], "output")
    _b = as_array(multi_head_attention(_x2, _x2, *_ws, _H, mask=_causal)[0], "output")
expect_close(_b[:, :-1], _a[:, :-1], "causal self-attention: changing the last token must not change "
             "the earlier outputs", rtol=1e-4, atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# ### The same numbers as `nn.MultiheadAttention`
#
# PyTorch's `nn.MultiheadAttention` computes the same thing, with two conventions to translate:
#
# 1. **weights**: it stores `in_proj_weight` of shape `(3D, D)` — `W_Q`, `W_K`, `W_V` stacked —
#    and `out_proj.weight` `(D, D)`, all for `x @ Wᵀ` (like `nn.Linear`). The course's `x @ w`
#    matrices are their transposes;
# 2. **masks**: a boolean `attn_mask` there means `True` = **not allowed**, the opposite of this
#    course (lesson 04). Pass it `~mask`.
#
# Copy the weights out of a randomly initialised module and compare, with your `multi_head_attention`:

# %%
torch.manual_seed(0)
mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, bias=False, batch_first=True)
x_q, x_kv = torch.randn(2, 3, 8), torch.randn(2, 5, 8)  # T_q = 3 queries, T_kv = 5 keys
mask = torch.ones(3, 5, dtype=torch.bool).tril(2)  # True = may attend (course)
w_q, w_k, w_v, w_o = weights_from_torch(mha)  # transposed copies, each (D, D)
print("in_proj_weight:", tuple(mha.in_proj_weight.shape), "-> w_q, w_k, w_v:", tuple(w_q.shape))

with torch.no_grad():
    torch_out, torch_w = mha(x_q, x_kv, x_kv, attn_mask=torch_mask(mask),  # ~mask
                             need_weights=True, average_attn_weights=False)
ours_out, ours_w = multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, 2, mask)  # yours
print("outputs equal:", torch.allclose(ours_out, torch_out, atol=1e-6),
      f"(largest difference {(ours_out - torch_out).abs().max():.1e})")
print("per-head weights equal:", torch.allclose(ours_w, torch_w, atol=1e-6))
with torch.no_grad():
    _, w_unflipped = mha(x_q, x_kv, x_kv, attn_mask=mask, average_attn_weights=False)
print("the course mask passed unchanged gives different weights:", not torch.allclose(ours_w, w_unflipped))

# %% [markdown]
# Two details matter for an exact match: `average_attn_weights=False` returns every head's
# weights `(B, H, T_q, T_kv)` instead of their mean, and `bias=False` leaves out the biases that
# the module otherwise adds to each projection. Now your function on the same module (this cell
# needs exercise 3):

# %%
yours_out, yours_w = multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, 2, mask)
print("your output equals nn.MultiheadAttention's:", torch.allclose(yours_out, torch_out, atol=1e-5))

# %% [markdown]
# ## What do the heads of a trained model do?
#
# Lesson 01's attention classifier has 2 pre-norm encoder layers of 4 heads, each of width 8,
# and reads its answer at the `[CLS]` position. Give it the review from the top of this lesson,
# *"the food was not good"*, and look at every head of the model trained with seed 0. Each panel
# is one head of the first layer: row *i* shows how query *i* shares its attention among the keys
# (each row sums to 1; weights below 0.1 are left blank).

# %%
seeds = (0, 1, 2)
models = {seed: trained.load_model("attention", seed) for seed in seeds}
sentence = "the food was not good".split()
tokens, patterns = review_patterns(models[0], sentence)  # patterns: (L, H, T, T)
plot_head_patterns(tokens, patterns[0], "seed 0, layer 1: the four heads on one review")
plt.show()

# %% [markdown]
# The classifier reads only the first row, the one of `[CLS]`. Where does each head put most of
# `[CLS]`'s attention, in each layer, for the three models trained with different seeds?

# %%
for seed, model in models.items():
    tokens, patterns = review_patterns(model, sentence)
    keys = strongest_keys(tokens, patterns, query=0)  # [CLS]'s row, per layer and head
    for layer, row in enumerate(keys):
        print(f"seed {seed}, layer {layer + 1}:  " + "  ".join(f"head {h} → {word} {weight:.2f}"
                                                          for h, (word, weight) in enumerate(row)))
    both = [layer + 1 for layer in layers_splitting(keys, ("not", "good"))]
    print(f"   layers with one head on 'not' and another on 'good': {both or 'none'}\n")

# %% [markdown]
# This is the situation the lesson opened with, inside a trained model. In seed 0's first layer
# `[CLS]` does not blend *not* and *good* into one average: head 0 takes *not*, heads 2 and 3 take
# *good*, each with nearly all of its weight, and the layers after it can combine the two readings.
# The other seeds share out the work differently, but each has a layer where one head reads *not*
# while another reads *good*.
#
# Two things this example does not show. The *food*: here the label depends only on the adjective
# and its negation, so no head has to bring the subject to *good* — the row of *good* in the figure
# looks mostly at *was*. The subject matters only to tell the review's own clause from a distractor
# about something else, and in seed 2 one second-layer head at `[CLS]` does read *food* most.
# And head 1 of seed 0's first layer puts all of `[CLS]`'s weight on *the*, the first word: a head
# with nothing to look for can park its weight on a fixed position. Does such a head matter?
#
# Large trained models show both things at scale: specialists, and much slack. Voita et al. (2019)
# opened up translation Transformers and found a handful of heads with a recognisable speciality —
# one keeps an eye on the neighbouring token, one links words that belong together grammatically,
# one is drawn to the least frequent words of the sentence — and pruned most of the others with
# little loss. Michel et al. (2019, *Are Sixteen Heads Really Better than One?*) deleted heads of
# trained models at test time and often lost little, in some layers even when a single head was
# left.
#
# Test that on our model. To **remove** head `h` we zero its slice of the merged heads, just
# before `W_O` — as if the head had answered 0. The model's own code does not offer that, so
# `helpers.heads.classifier_logits` writes its forward pass out with the model's parameters. First
# make sure it computes exactly what the model computes:

# %%
test_sets = trained.test_data(add_cls=True)  # four sets of 1,000 reviews, [CLS] in front
with threads(1):  # products this small run faster on one thread
    for name, data in test_sets.items():
        ours = classifier_logits(models[0], data.ids, data.lengths)  # (N,)
        print(f"{name:<11} logits identical to the model's: {torch.equal(ours, models[0](data.ids, data.lengths))}")

# %% [markdown]
# Now every head removed in turn (the other seven kept), accuracy in % on each test set, for the
# model trained with seed 0. Layers are numbered 1 and 2, heads 0 to 3 (their index in the tensors):

# %%
ablations = [head_ablation(models[s], test_sets) for s in seeds]
print("\n".join(ablation_rows(ablations[0], "removed")))

# %% [markdown]
# The figure shows the same for the three training seeds as **accuracy lost** (percentage
# points; white = nothing lost), one row per layer and test set:

# %%
plot_ablation(ablations, seeds, "removed")
plt.show()
summaries = [ablation_summary(result, cost=1.0) for result in ablations]
for seed, summary in zip(seeds, summaries):
    layer, head, points = summary["costliest"]
    print(f"seed {seed}: {summary['free']} of {summary['heads']} heads can each be removed at a cost of "
          f"< 1 point on every test set; removing layer {layer + 1} head {head} costs up to {points:.1f} points")

# %% [markdown]
# Put the removal costs of seed 0 beside what each head read at `[CLS]` in *"the food was not
# good"*:

# %%
tokens, patterns = review_patterns(models[0], sentence)
keys = strongest_keys(tokens, patterns, query=0)  # [CLS]'s strongest key per layer and head
costs = summaries[0]["removal_cost"]  # (L, H): points lost on the worst test set
for layer, head in np.ndindex(costs.shape):
    word, weight = keys[layer][head]
    print(f"seed 0, layer {layer + 1}, head {head}: [CLS] reads {word!r} ({weight:.2f}); "
          f"removing the head costs {costs[layer, head]:.1f} points")

# %% [markdown]
# The head parked on *the* costs almost nothing. The two heads that both read *good* do not cost
# the same: one of them is by far the most expensive head of the model. A pattern says where a head
# reads; what it carries from there, and who uses it, is in its value vectors and in the layers
# after it.
#
# Now the opposite question: keep **only one** head in a layer (the other three removed, the other
# layer intact). Is a single head enough there?

# %%
plot_ablation(ablations, seeds, "alone")
plt.show()
for seed, summary, result in zip(seeds, summaries, ablations):
    for layer, (head, kept) in enumerate(summary["best_alone"]):
        print(f"seed {seed}, layer {layer + 1}: the best single head ({head}) keeps {kept:.1f}% or more on "
              f"every test set (all heads: {100 * result.full.min():.1f}%)")
free = trained.span([s["free"] for s in summaries], ".0f")
costliest = trained.span([s["costliest"][2] for s in summaries])
alone = trained.span([kept for s in summaries for _, kept in s["best_alone"]])
print(f"\nOver the {len(seeds)} seeds, measured after training, one change at a time: {free} of "
      f"{summaries[0]['heads']} heads can each be removed at < 1 point, the costliest head costs {costliest} "
      f"points, and the best head of a layer, kept alone, holds {alone}% on its worst test set.")
print("The costliest head sits in layer " + ", ".join(
    f"{s['costliest'][0] + 1} (seed {seed})" for seed, s in zip(seeds, summaries)) + ".")

# %% [markdown]
# **Think (2 points, graded by hand).** A classmate concludes from the figures: "most heads are
# useless, so we should have trained with one head from the start; multi-head attention is just
# an ensemble of votes." Say in three or four sentences what is right and what is wrong in this.

# %% [markdown] nbgrader={"grade": true, "grade_id": "heads_think", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# Full marks for two of these points (one point each):
# - Right: after training, most single heads cost under a point when removed (the figures), so a
#   trained model can be pruned; studies of large models found the same (Michel et al. 2019;
#   Voita et al. 2019).
# - Wrong about training: removing a head from a trained network says what that network needs at
#   test time, not what a network needs in order to learn — only training a one-head model
#   answers that. (Below, on this easy task, one head per layer comes close in most runs but
#   falls well short in some; on translation
#   Vaswani et al. found one head 0.9 BLEU worse than eight at the same cost.) And which head is
#   the costly one is only known once the model is trained.
# - Wrong about the ensemble: the heads learn together and each writes through its own rows of
#   W_O into one sum — no head votes on its own; and one head costs far more than the rest, which
#   a set of interchangeable voters would not.
# === END MARK SCHEME ===

# %% [markdown]
# So the redundancy is real but partial: in each of the three models most heads can go one at a
# time at almost no cost, and one costs far more than any other. Its number within the layer means
# nothing: the heads of a layer are interchangeable, and training hands out their numbers at random,
# so between seeds only the layer of the costliest head can be compared (the last line above).
# Keep in mind what removal measures: what the *trained* network loses at test time, one head at a
# time. It says nothing about removing two heads together, and
# nothing about a network *trained* with fewer heads.
#
# That last question can be asked directly. Train the same classifier — the same width 32, the same
# 22,689 parameters, lesson 01's recipe and seeds — with **one head of width 32** in each layer
# instead of four of width 8 (`python -m experiments.head_count`, results shipped in `data/heads/`).
# Accuracy on each test set, the range over the three seeds:

# %%
from experiments import head_count

print("\n".join(head_count.comparison(head_count.load_results(), trained.load_results())))
print()
print(head_count.spread_reading(head_count.load_spread()))
print()
for seed in seeds:
    tokens, patterns = review_patterns(head_count.load_model(seed), sentence)
    keys = strongest_keys(tokens, patterns, query=0)  # one head per layer
    print(f"one head, seed {seed}: [CLS] reads " + ", then ".join(
        f"{row[0][0]!r} ({row[0][1]:.2f}) in layer {layer + 1}" for layer, row in enumerate(keys)))

# %% [markdown]
# On this task one head per layer does much of the job, but not reliably. The three shipped
# one-head models come close to the four-head ones; trained again from more seeds, and with the
# floats rounded another way (`python -m experiments.head_count --spread`, the line after the
# table), most runs do, but some stop well short — the same seed can land either way. The
# four-head classifier was right on nearly every review in every run of lesson 01's spread. The
# shipped one-head models do not blend
# *not* and *good* into one average either: in each layer the single head at `[CLS]` puts most of
# its weight on one word, *not* in one layer and another word in the other (the lines above). What
# the other word's state already holds by then — what layer 1 wrote into it — this lesson does
# not measure.
#
# The task is easy, though: two words decide it. On translation, a much harder task, Vaswani et al.
# found one head clearly worse than eight at the same cost (0.9 BLEU, quoted at the top of this
# lesson). The ablation and this experiment answer different questions: which heads a trained model
# can spare, and what a model needs in order to be trained.

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=06_multi_head` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** With `D = 512` and 8 heads, each head's queries and keys have width…
#
# - (a) 64
# - (b) 512
# - (c) 8
# - (d) 4096

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "a", "each token's 512 features are cut into 8 slices of d_h = 512 / 8 = 64, and each "
             "head's scores are divided by √64 = 8; 512 would be eight full-width heads at "
             "eight times the cost, and 4096 is their concatenation")
### END HIDDEN TESTS

# %% [markdown]
# **2.** You go from 1 head of width `D` to 8 heads of width `D/8`. What grows?
#
# - (a) the parameters of `W_Q, W_K, W_V`: one set per head
# - (b) the multiply-adds of the four projections
# - (c) nothing: 8 heads of `D/8` cost what 1 head of `D` does
# - (d) the number of attention weights: 8 matrices of `n × n`

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "d", "the four matrices stay (D, D): 4·D² parameters and the same multiply-adds either "
             "way; what grows with the number of heads is the number of n × n weight "
             "matrices, one per head, and with it the softmax work and the memory for the "
             "weights")
### END HIDDEN TESTS

# %% [markdown]
# **3.** `x` has shape `(B, T, D)` with `T = 8` and `D = 16`. You split it into 4 heads with
# `x.reshape(B, 4, 8, 4)`, without a transpose. What does head 0 hold?
#
# - (a) features 0–3 of all 8 tokens, as it should
# - (b) nothing: `reshape` raises an error for these sizes
# - (c) all 16 features of tokens 0 and 1, in 8 rows of 4
# - (d) features 0, 4, 8 and 12 of all 8 tokens

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "c", "reshape re-reads the numbers in memory order, token by token: head 0 gets the "
             "first 8 · 4 = 32 numbers, tokens 0 and 1 whole, cut into 8 rows of 4. The shape "
             "is right and nothing fails; reshape(B, T, 4, 4).transpose(1, 2) gives head 0 "
             "features 0–3 of every token")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Multi-head attention runs `H` lookups of width `d_h = D/H` side by side, then mixes them with
#   `W_O`; it costs about one lookup of width `D` and has the same `4·D²` parameters.
# - Split with `reshape(B, T, H, d_h).transpose(1, 2)`; merge with `transpose(1, 2).reshape(B, T, D)`.
#   Reshaping without the transpose runs without error and silently mixes tokens.
# - Each head scales by `√d_h`, not `√D`.
# - `nn.MultiheadAttention` stores the transposes of the course's `x @ w` matrices and blocks where
#   its bool mask is `True`: transpose the weights and pass `~mask`, and the numbers agree.
# - Heads of one layer can read different words at once: in the trained classifier, `[CLS]` reads
#   *not* with one head and *good* with another.
# - After training, most single heads can be removed at small cost and a few cannot (Michel et al.
#   2019; Voita et al. 2019); in each of our classifiers one head costs far more than the rest.
#   Removal tests the trained network, not one trained with fewer heads: trained with one head per
#   layer, our classifier came close to four heads in most runs and fell well short in some.
#
# **Next:** lesson 07 puts multi-head attention into the full Transformer block.
