# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Common claims, checked
#
# **Promise:** by the end you can tell which of the things people often say about attention are
# true, which are half true and which are wrong — and check most of them yourself in a few lines.
#
# **How it works.** Twelve statements: nine claims that circulate in tutorials and talks, and the
# three questions of a short quiz from a second introduction to attention. For each one:
#
# 1. run the cell that checks it by computation (where code can check it) and read what it prints;
# 2. set the answer — `True` or `False` (without quotes), or one letter such as `"b"`;
# 3. run the check cell below it: it records your answer and then prints the **reason**.
#
# The check does not say whether you were right; the grade comes with the feedback. Read each
# reason before moving on — it is the point of the lesson. At the end, one question is graded by
# hand.
#
# **Time:** about 30 minutes. Everything here was built in lessons 01–09; each claim says where.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from helpers import attention as reference
from helpers.claims import (
    attention_as_convolution,
    causal_attention_peak_bytes,
    check_claim,
    circular_conv1d,
    gradient_by_distance,
    plot_gradient_by_distance,
)
from helpers.cost import crossover_n, layer_macs, score_share
from helpers.quiz import grade_choice
from helpers.scaling import score_std

np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## Recurrence, the formula, the order
#
# ### Claim 1 — "RNNs focus on the end of a sentence because the backpropagation path is long."
#
# Lesson 01 measured it on the sentiment task; here is the same measurement on freshly initialised
# models: how much can each input word change the output at the last position? For a plain (tanh)
# RNN, an LSTM and one self-attention layer, the size of the gradient with respect to each word,
# relative to the last word:

# %%
curves = {name: gradient_by_distance(kind, n_tokens=60, seed=0)
          for name, kind in [("plain RNN", "rnn"), ("LSTM", "lstm"), ("self-attention", "attention")]}
plot_gradient_by_distance(curves)
plt.show()
for name, curve in curves.items():
    print(f"{name:>15}: 10 words back {curve[10]:.1e}, 40 words back {curve[40]:.1e}")

# %% [markdown]
# Lesson 01 also trained the models: on the same task the plain RNN stayed near chance, while the
# LSTM reached 99.9–100% accuracy. Which verdict fits best?
#
# (a) false: an RNN weighs every word the same ·
# (b) true for every recurrent network, LSTMs included — which is why recurrent models could not
# learn the sentiment task ·
# (c) true for plain RNNs, and measurable; gated RNNs such as the LSTM largely fixed the accuracy
# problem ·
# (d) false: the only weakness of RNNs is that they cannot run in parallel

# %% nbgrader={"grade": false, "grade_id": "claim_1", "locked": false, "schema_version": 3, "solution": true}
claim_1 = None
### BEGIN SOLUTION
claim_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_1, "claim_1", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(claim_1, "c", "the vanishing gradient is real and measurable for plain RNNs; LSTMs largely "
             "fixed accuracy; attention adds a constant path length and parallel training")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 2 — "Attention = softmax(QKᵀ/√d_k) Vᵀ."
#
# With tokens as rows, as in this course and in PyTorch. Three queries, five keys, values of
# width 2:

# %%
rng = np.random.default_rng(0)
Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
_, W = reference.attention(Q, K, V)  # W: the (n_q, n_k) weights
print("weights", W.shape, "@ V", V.shape, "->", (W @ V).shape)
try:
    W @ V.T
except ValueError:
    print("weights", W.shape, "@ V.T", V.T.shape, f"-> ValueError: inner sizes {W.shape[1]} and {V.T.shape[0]} differ")

# %% [markdown]
# True or False: with tokens as rows, attention is `softmax(QKᵀ/√d_k) Vᵀ`.

# %% nbgrader={"grade": false, "grade_id": "claim_2", "locked": false, "schema_version": 3, "solution": true}
claim_2 = None
### BEGIN SOLUTION
claim_2 = False
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_2, "claim_2", "tf")
### BEGIN HIDDEN TESTS
grade_choice(claim_2, False, "with tokens as rows the (n_q, n_k) weights multiply V (n_k, d_v): · V, not · Vᵀ")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 3 — "Self-attention is invariant to the order of the tokens."
#
# Lesson 02's NumPy self-attention, no positional information, five tokens, shuffled:

# %%
x = rng.normal(size=(5, 4))
w_q, w_k, w_v = (rng.normal(size=(4, 3)) for _ in range(3))
perm = np.array([2, 0, 4, 1, 3])
out, _ = reference.self_attention(x, w_q, w_k, w_v)
out_shuffled, _ = reference.self_attention(x[perm], w_q, w_k, w_v)
print("output unchanged by the shuffle:         ", np.allclose(out_shuffled, out))
print("output rows shuffled the same way:       ", np.allclose(out_shuffled, out[perm]))
print("mean over the tokens unchanged:          ", np.allclose(out_shuffled.mean(0), out.mean(0)))

# %% [markdown]
# Which verdict fits best?
#
# (a) true: shuffling the tokens leaves the output unchanged ·
# (b) it is *equivariant*: shuffling the tokens shuffles the output rows the same way; a mean over
# the tokens is invariant ·
# (c) false: self-attention knows the position of every token ·
# (d) true, but only under a causal mask

# %% nbgrader={"grade": false, "grade_id": "claim_3", "locked": false, "schema_version": 3, "solution": true}
claim_3 = None
### BEGIN SOLUTION
claim_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_3, "claim_3", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(claim_3, "b", "self-attention is permutation-equivariant; a pooled or [CLS] readout without "
             "positions is invariant")
### END HIDDEN TESTS

# %% [markdown]
# ## The parts of a Transformer
#
# ### Claim 4 — "An embedding layer normalises the input."
#
# An `nn.Embedding` with 10 tokens of width 6, three token ids, and — for comparison — the same
# vectors after an `nn.LayerNorm`:

# %%
torch.manual_seed(0)
embedding = torch.nn.Embedding(num_embeddings=10, embedding_dim=6)
ids = torch.tensor([3, 7, 1])
vectors = embedding(ids)  # (3, 6)
print("embedding(ids) == rows of its weight matrix:", torch.equal(vectors, embedding.weight[ids]))
print("norms:", vectors.norm(dim=-1).detach())
print("means:", vectors.mean(dim=-1).detach(), " stds:", vectors.std(dim=-1, unbiased=False).detach())
normed = torch.nn.LayerNorm(6)(vectors)
print("after LayerNorm — means:", normed.mean(dim=-1).detach(), " stds:",
      normed.std(dim=-1, unbiased=False).detach())

# %% [markdown]
# True or False: an embedding layer normalises its input.

# %% nbgrader={"grade": false, "grade_id": "claim_4", "locked": false, "schema_version": 3, "solution": true}
claim_4 = None
### BEGIN SOLUTION
claim_4 = False
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_4_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_4, "claim_4", "tf")
### BEGIN HIDDEN TESTS
grade_choice(claim_4, False, "an embedding is a learned lookup table; normalisation comes from LayerNorm")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 5 — "Sinusoidal encodings generalise to longer sequences than seen in training."
#
# No cell can check this one in a few seconds: it needs models trained on short sequences and
# tested on longer ones. Lesson 05 discussed what the original paper hoped and what was measured
# later. True or False?

# %% nbgrader={"grade": false, "grade_id": "claim_5", "locked": false, "schema_version": 3, "solution": true}
claim_5 = None
### BEGIN SOLUTION
claim_5 = False
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_5_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_5, "claim_5", "tf")
### BEGIN HIDDEN TESTS
grade_choice(claim_5, False, "a hope of the original paper; measured later, sinusoidal models degrade "
             "quickly beyond the training length (Press et al., 2022)")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 6 — "Multi-head attention is a within-model ensemble."
#
# How the heads are combined: three heads of width 4 for five tokens, concatenated and multiplied
# by `W_O` — the same as passing each head through its own block of rows of `W_O` and adding:

# %%
g = torch.Generator().manual_seed(0)
heads = [torch.randn(5, 4, generator=g) for _ in range(3)]  # (T, d_head) each
w_o = torch.randn(12, 12, generator=g)  # (H·d_head, D)
combined = torch.cat(heads, dim=-1) @ w_o  # (T, D)
by_blocks = sum(head @ w_o[4 * h:4 * (h + 1)] for h, head in enumerate(heads))
print("concat(heads) @ W_O == Σ_h head_h @ W_O[block h]:", torch.allclose(combined, by_blocks, atol=1e-5))
print(f"an average of the heads would have shape {tuple(torch.stack(heads).mean(0).shape)}; W_O mixes all "
      f"{3 * 4} head outputs into each of the {w_o.shape[1]} output features")

# %% [markdown]
# Lesson 06 also removed heads of a trained model one at a time. Which verdict fits best?
#
# (a) yes: each head votes independently and the votes are averaged ·
# (b) no: all heads always learn the same pattern ·
# (c) yes, and removing any single head ruins the model ·
# (d) only loosely: the heads are trained jointly and mixed by the learned `W_O`, and many can be
# removed after training with little loss

# %% nbgrader={"grade": false, "grade_id": "claim_6", "locked": false, "schema_version": 3, "solution": true}
claim_6 = None
### BEGIN SOLUTION
claim_6 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_6_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_6, "claim_6", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(claim_6, "d", "heads are trained jointly and mixed by W_O, not averaged as votes; many are "
             "redundant (Michel et al., 2019)")
### END HIDDEN TESTS

# %% [markdown]
# ## Cost and reach
#
# ### Claim 7 — "Attention itself only scales linearly with the feature dimension d."
#
# Lesson 08's count of one layer (course reference): the two `n × n` products cost `2·n²·d`, the
# projections `4·n·d²`, the FFN `2·n·d·d_ff`. Doubling `d`, and the share of the `n × n` products
# for a sentence and for ViT-Base:

# %%
for n, d, d_ff, what in [(50, 512, 2048, "50-word sentence"), (197, 768, 3072, "ViT-Base, 224 px")]:
    small, large = layer_macs(n, d, d_ff), layer_macs(n, 2 * d, 2 * d_ff)
    print(f"{what:>17} (n = {n}, d = {d}): n × n part {score_share(n, d, d_ff):5.1%} of the layer; "
          f"doubling d multiplies scores by {large['scores'] / small['scores']:.0f}, "
          f"projections by {large['projections'] / small['projections']:.0f}")
print(f"the n × n part reaches half of ViT-Base's layer at n = {crossover_n(768, 3072):,}")

# %% [markdown]
# Which verdict fits best?
#
# (a) true for the products `QKᵀ` and `weights @ V` (`n²·d`), but the projections cost `n·d²` and,
# with the FFN, dominate for short sequences ·
# (b) false: `QKᵀ` costs `n·d²` ·
# (c) true, so `d` can be raised at almost no cost ·
# (d) false: attention's cost does not depend on `d` at all

# %% nbgrader={"grade": false, "grade_id": "claim_7", "locked": false, "schema_version": 3, "solution": true}
claim_7 = None
### BEGIN SOLUTION
claim_7 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_7_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_7, "claim_7", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(claim_7, "a", "the n × n products are n²·d, but projections (n·d²) and the FFN dominate "
             "short sequences: about 4% for ViT-Base at 224 px")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 8 — "Self-attention can be seen as a data-dependent convolution."
#
# A 1-D convolution with a kernel of width 3, computed twice: by `conv1d`, and by three attention
# heads whose scores depend only on the offset between key and query — each head looks exactly
# one position left, at itself, or one position right — followed by `W_O`:

# %%
x_seq = torch.randn(12, 4, generator=g, dtype=torch.float64)  # (n, c_in)
kernel = torch.randn(6, 4, 3, generator=g, dtype=torch.float64)  # (c_out, c_in, K)
by_conv = circular_conv1d(x_seq, kernel)
by_attention = attention_as_convolution(x_seq, kernel)
print("convolution:", tuple(by_conv.shape), " attention with 3 relative-position heads:", tuple(by_attention.shape))
print(f"largest difference: {(by_conv - by_attention).abs().max():.1e}")
shuffled = torch.randperm(12, generator=g)
print("without positions, a shuffle only shuffles the rows:",
      torch.allclose(reference.scaled_dot_product_attention(x_seq[shuffled], x_seq[shuffled], x_seq[shuffled])[0],
                     reference.scaled_dot_product_attention(x_seq, x_seq, x_seq)[0][shuffled]))

# %% [markdown]
# Which verdict fits best?
#
# (a) no: attention and convolution have nothing in common ·
# (b) with relative positional encodings and enough heads, multi-head attention can express any
# convolution; without positions it is a weighted average over an unordered set ·
# (c) yes, always, even without any positional information ·
# (d) only for images, never for sequences

# %% nbgrader={"grade": false, "grade_id": "claim_8", "locked": false, "schema_version": 3, "solution": true}
claim_8 = None
### BEGIN SOLUTION
claim_8 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_8_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_8, "claim_8", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(claim_8, "b", "with relative positions and enough heads attention can express any "
             "convolution (Cordonnier et al., 2020); without positions it sees an unordered set")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 9 — "Masking the future does not shrink the score matrix."
#
# Lesson 04's masked attention, which materialises the scores, with and without a causal mask.
# Memory is counted as in lesson 08: the peak bytes of the tensors alive at once during the call
# (the mask itself is built beforehand):

# %%
for n in (256, 512, 1024):
    with_mask, without = causal_attention_peak_bytes(n), causal_attention_peak_bytes(n, causal=False)
    print(f"n = {n:5d}: causal mask {with_mask / 2**20:6.2f} MiB, no mask {without / 2**20:6.2f} MiB, "
          f"one n × n float32 matrix {n * n * 4 / 2**20:5.2f} MiB")

# %% [markdown]
# True or False: with a causal mask, attention that materialises its scores still needs memory that
# grows like `n²`.

# %% nbgrader={"grade": false, "grade_id": "claim_9", "locked": false, "schema_version": 3, "solution": true}
claim_9 = None
### BEGIN SOLUTION
claim_9 = True
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_9_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(claim_9, "claim_9", "tf")
### BEGIN HIDDEN TESTS
grade_choice(claim_9, True, "the mask blocks half of the scores but the whole n × n matrix is still built; "
             "blocks (FlashAttention) or a KV cache, not the mask, make memory linear")
### END HIDDEN TESTS

# %% [markdown]
# ## A quick check from another introduction
#
# Three questions from a second introduction to attention, which used the same three-token example
# as lesson 02.
#
# ### Quick check 1
#
# In the worked example (*voltage*, *spike*, *alarm*), the first query's weights are computed as:

# %%
Q3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V3 = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
out3, weights3 = reference.attention(Q3, Q3, V3)  # here K = Q
print("weights of the first query:", weights3[0], " output:", out3[0])

# %% [markdown]
# What does `0.198` represent?
# (a) which query vector is produced · (b) the attention weight the first query gives to the middle
# value · (c) the sequence length · (d) the key projection width

# %% nbgrader={"grade": false, "grade_id": "quick_1", "locked": false, "schema_version": 3, "solution": true}
quick_1 = None
### BEGIN SOLUTION
quick_1 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(quick_1, "quick_1", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(quick_1, "b", "0.198 is the weight the first query (voltage) gives to the middle token (spike)")
### END HIDDEN TESTS

# %% [markdown]
# ### Quick check 2
#
# The spread of `q·k` for random unit-variance queries and keys, as lesson 03 measured it:

# %%
for d_k in (4, 64, 512):
    std = score_std(d_k)
    print(f"d_k = {d_k:3d}: std of q·k {std:6.2f}, of q·k / √d_k {std / math.sqrt(d_k):5.2f}")

# %% [markdown]
# Why are the scores divided by `√d_k`?
# (a) to make every value vector have unit length · (b) to reduce the number of tokens being
# compared · (c) because the variance of the dot product grows roughly with `d_k`, which can
# saturate the softmax · (d) because causal masks require normalised keys

# %% nbgrader={"grade": false, "grade_id": "quick_2", "locked": false, "schema_version": 3, "solution": true}
quick_2 = None
### BEGIN SOLUTION
quick_2 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(quick_2, "quick_2", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(quick_2, "c", "the variance of q·k grows like d_k; large scores saturate the softmax and its "
             "gradient vanishes")
### END HIDDEN TESTS

# %% [markdown]
# ### Quick check 3
#
# You must model a very long sequence whose dependencies are local, or follow a fixed pattern.
# What fits best?
# (a) full self-attention, because attention is always more expressive ·
# (b) an RNN or a local convolution, because a fixed or local dependency pattern avoids comparing
# every pair · (c) causal masking alone, because it turns quadratic memory into linear memory ·
# (d) remove the value projections, because the keys contain all the information needed

# %% nbgrader={"grade": false, "grade_id": "quick_3", "locked": false, "schema_version": 3, "solution": true}
quick_3 = None
### BEGIN SOLUTION
quick_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_claim(quick_3, "quick_3", "abcd")
### BEGIN HIDDEN TESTS
grade_choice(quick_3, "b", "a local or fixed pattern needs no all-pairs comparison: a recurrent network or "
             "a local convolution covers it")
### END HIDDEN TESTS

# %% [markdown]
# ## Your turn
#
# **Think (2 points, graded by hand).** A blog post says: "Transformers used to be quadratic;
# FlashAttention made them linear." Correct it in two or three sentences, using what lessons 04 and
# 08 computed and measured.

# %% [markdown] nbgrader={"grade": true, "grade_id": "flash_claim", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# 1 point — what FlashAttention changes: it computes exactly the same output in tiles with a
# running maximum and sum, so the memory for scores grows linearly with n instead of n² (lesson 08's
# online softmax; the measured peak doubled instead of quadrupling).
# 1 point — what it does not change: every query is still compared with every key, n²·d
# multiply-adds; it is faster in practice because it moves far less data, not because the work
# shrank. Mentioning that for short sequences the n² part is a small share of the layer anyway
# (ViT-Base 224 px: about 4%) or that truly sub-quadratic work needs another structure (local/sparse
# attention, recurrence) is a plus.
# === END MARK SCHEME ===

# %% [markdown]
# ## Summary
#
# - Most claims about attention are a true statement about one case stretched to all of them: check
#   which case the evidence covers.
# - Many can be checked in a few lines: shapes for formulas, a shuffle for symmetries, a gradient
#   for what a model can learn from, a count for costs, a meter for memory.
# - Others need training runs or the literature: say which, and cite it.
#
# **Next:** the course ends here; the next course takes attention to images at scale.
