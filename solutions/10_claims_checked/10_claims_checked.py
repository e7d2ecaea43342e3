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
# **How it works.** Thirteen statements: ten claims that circulate in tutorials and talks, and the
# three questions of a short quiz from a second introduction to attention. For each one:
#
# 1. run the cell that checks it by computation (where code can check it) and read what it prints;
# 2. decide, and set the answer — `True` or `False` (without quotes), or one letter such as `"b"`;
# 3. run the check cell below it: it records your answer.
#
# The check does not say whether you were right. The grade comes with the feedback, and with it
# the **reason** behind every verdict: read them there — they are the point of the lesson.
# Working on your own? Answer everything, save the notebook, then run
# `make check LESSON=10_claims_checked` in a terminal: it grades the notebook as an instructor
# would and shows every verdict with its reason. At the end, one question is graded by hand.
#
# **Time:** about 35 minutes. Everything here was built in lessons 01–09; each claim says where.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from helpers import attention as course  # the course's versions of lesson 02's functions
from helpers.claims import (
    attention_as_convolution,
    causal_attention_peak_bytes,
    circular_conv1d,
    gradient_by_distance,
    plot_gradient_by_distance,
)
from helpers.cost import crossover_n, layer_macs, score_share
from helpers.quiz import check_choice, grade_choice
from helpers.scaling import score_std
from helpers.trained import accuracy_ranges, load_results

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
# At initialisation the LSTM's curve falls too: its forget gates start near 0.5, so the cell path
# halves what it carries at every step. Lesson 01 also *trained* the models (its shipped results,
# three seeds, every test set):

# %%
trained = accuracy_ranges(load_results())
for name, label in [("rnn", "plain RNN"), ("lstm", "LSTM"), ("attention", "self-attention")]:
    low, high = min(lo for lo, _ in trained[name].values()), max(hi for _, hi in trained[name].values())
    print(f"{label:>15}: trained, between {low:.1%} and {high:.1%} on every test set and seed")

# %% [markdown]
# Training opened the LSTM's additive path (lesson 01 measured its gradient at distance 40 before
# and after); the plain RNN's stayed shut. Which verdict fits best?
#
# - (a) true for plain RNNs, and measurable; LSTMs largely fixed the accuracy
# - (b) true for every recurrent network, LSTMs included, so none learns the task
# - (c) false: an RNN's gradient reaches the first word as strongly as the last
# - (d) false: the only weakness of RNNs is that they cannot run in parallel

# %% nbgrader={"grade": false, "grade_id": "claim_1", "locked": false, "schema_version": 3, "solution": true}
claim_1 = None
### BEGIN SOLUTION
claim_1 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_1, "abcd", "claim_1")
### BEGIN HIDDEN TESTS
grade_choice(claim_1, "a", "True for plain RNNs, and measurable: a word k steps back reaches the output only "
             "through k multiplications by W_h (and tanh′), so its gradient shrinks roughly "
             "geometrically with k; the measurement above found it many orders of magnitude "
             "weaker 40 steps back. But gated RNNs keep an additive cell path the network can "
             "learn to hold open: at initialisation its gradient fades too, but trained in "
             "lesson 01 the LSTM was right on nearly every review while the plain RNN stayed "
             "near chance. What attention adds for good is a one-step path between any two "
             "positions and training all positions in parallel.")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 2 — "Attention = softmax(QKᵀ/√d_k) Vᵀ."
#
# With tokens as rows, as in this course and in PyTorch. Three queries, five keys, values of
# width 2:

# %%
rng = np.random.default_rng(0)
Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
_, W = course.attention(Q, K, V)  # W: the (n_q, n_k) weights
print("weights:", W.shape, "  V:", V.shape, "  Vᵀ:", V.T.shape)

# %% [markdown]
# With tokens as rows (`Q = X W_Q`), which expression is attention?
#
# - (a) `softmax(QKᵀ/√d_k) Vᵀ`
# - (b) `softmax(QKᵀ/√d_k) V`
# - (c) `softmax(QᵀK/√d_k) V`
# - (d) `V softmax(QKᵀ/√d_k)`

# %% nbgrader={"grade": false, "grade_id": "claim_2", "locked": false, "schema_version": 3, "solution": true}
claim_2 = None
### BEGIN SOLUTION
claim_2 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_2, "abcd", "claim_2")
### BEGIN HIDDEN TESTS
grade_choice(claim_2, "b", "With tokens as rows (Q = X W_Q), the weights are (n_q, n_k) and V is (n_k, d_v): "
             "the output is weights @ V, each output row a blend of value rows — so the claim "
             "with Vᵀ is wrong. Vᵀ is (d_v, n_k): it does not even fit unless n_k = d_v, and "
             "then it silently computes something else. QᵀK is (d_k, d_k): it compares "
             "features, not tokens. V times the weights does not fit either: (n_k, d_v) by "
             "(n_q, n_k). (Written with tokens as columns, the same operation reads "
             "V · softmax(…)ᵀ.)")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 3 — "Self-attention is invariant to the order of the tokens."
#
# Lesson 02's NumPy self-attention, no positional information, five tokens, shuffled:

# %%
x = rng.normal(size=(5, 4))
w_q, w_k, w_v = (rng.normal(size=(4, 3)) for _ in range(3))
perm = np.array([2, 0, 4, 1, 3])
out, _ = course.self_attention(x, w_q, w_k, w_v)
out_shuffled, _ = course.self_attention(x[perm], w_q, w_k, w_v)
print("the tokens in their new order:              ", perm)
print("row i of the new output is row … of the old:",
      [int(np.abs(out - row).sum(axis=1).argmin()) for row in out_shuffled])
print(f"largest change of an output row in place:    {np.abs(out_shuffled - out).max():.2f}")
print(f"largest change of the mean over the tokens:  {np.abs(out_shuffled.mean(0) - out.mean(0)).max():.1e}")

# %% [markdown]
# Which verdict fits best?
#
# - (a) true: shuffling the tokens leaves every output row unchanged
# - (b) false: each token attends most to its neighbours, so order matters
# - (c) false: it is equivariant, the output rows move with the tokens
# - (d) true, but only under a causal mask, which fixes the reading order

# %% nbgrader={"grade": false, "grade_id": "claim_3", "locked": false, "schema_version": 3, "solution": true}
claim_3 = None
### BEGIN SOLUTION
claim_3 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_3, "abcd", "claim_3")
### BEGIN HIDDEN TESTS
grade_choice(claim_3, "c", "Self-attention without positions is permutation-equivariant, not invariant: "
             "shuffle the input rows and the output rows come out shuffled the same way (the "
             "computation above). What is invariant is a readout that forgets which row is "
             "which, such as the mean over tokens or a [CLS] token without positions. Without "
             "positions no token has neighbours, and the word order is lost until positions "
             "are added (lesson 05); a causal mask brings an order of its own, and under it "
             "the output depends on the order.")
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
check_choice(claim_4, "tf", "claim_4")
### BEGIN HIDDEN TESTS
grade_choice(claim_4, False, "False. An embedding layer is a learned lookup table: token id → one row of its "
             "weight matrix. The rows have whatever sizes training gives them; nothing is "
             "normalised (the measurement above: different norms, means and spreads). Inside a "
             "Transformer, normalisation comes from LayerNorm, which gives each token's "
             "vector mean 0 and variance 1 over its features before its scale and shift.")
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
check_choice(claim_5, "tf", "claim_5")
### BEGIN HIDDEN TESTS
grade_choice(claim_5, False, "False. Vaswani et al. picked sinusoids in the hope that a model could use positions "
             "beyond the longest sequence it was trained on; they did not test it. Press et al. "
             "(2022) did: with sinusoidal positions, a model's predictions get worse soon after "
             "its training length, which is part of why ALiBi and RoPE were designed. A formula "
             "gives a vector for every position, but the layers above have only ever learned to "
             "read the vectors of the positions they were trained on.")
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
# - (a) yes: each head votes on its own, and `W_O` averages their votes
# - (b) no: heads train together, add up through `W_O`, and many are spare
# - (c) yes: so, as in an ensemble, every head's vote is needed to decide
# - (d) no: trained together, all the heads end up learning one pattern

# %% nbgrader={"grade": false, "grade_id": "claim_6", "locked": false, "schema_version": 3, "solution": true}
claim_6 = None
### BEGIN SOLUTION
claim_6 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_6_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_6, "abcd", "claim_6")
### BEGIN HIDDEN TESTS
grade_choice(claim_6, "b", "No, not in the sense of an ensemble, whose members are trained apart and whose "
             "answers are averaged. The heads of a layer learn together, and each writes through "
             "its own rows of W_O into a sum (the computation above); nothing is voted on. What "
             "does look like an ensemble is the spare capacity: in lesson 06 most heads of each "
             "trained model could be removed one at a time for less than a point, and pruning "
             "studies of large models found the same (Michel et al., 2019; Voita et al., 2019). "
             "Nor did the heads all learn one pattern: in lesson 06 they did not all read the "
             "same word.")
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
# - (a) true, so widening `d` costs little next to lengthening `n`
# - (b) false: `QKᵀ` costs `n·d²`, quadratic in `d` like the projections
# - (c) false for the scores: the `n × n` products cost `n²`, whatever `d` is
# - (d) true of the `n × n` products; the projections cost `n·d²`

# %% nbgrader={"grade": false, "grade_id": "claim_7", "locked": false, "schema_version": 3, "solution": true}
claim_7 = None
### BEGIN SOLUTION
claim_7 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_7_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_7, "abcd", "claim_7")
### BEGIN HIDDEN TESTS
grade_choice(claim_7, "d", "True of the pairwise part only. The two n × n products cost 2·n²·d, linear in "
             "d (not n·d², and not free of d); but the projections cost 4·n·d², quadratic in d, and the FFN "
             "2·n·d·d_ff. For ViT-Base at 224 px (n = 197, d = 768, d_ff = 3072) the n × n "
             "part is about 4% of the layer, and for a 50-word sentence with d = 512 even "
             "less; it reaches half only at n = 2d + d_ff. For short sequences a wider d is "
             "the expensive direction: 'attention is quadratic' describes the pairwise part, "
             "not the whole bill.")
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
      torch.allclose(course.scaled_dot_product_attention(x_seq[shuffled], x_seq[shuffled], x_seq[shuffled])[0],
                     course.scaled_dot_product_attention(x_seq, x_seq, x_seq)[0][shuffled]))

# %% [markdown]
# Which verdict fits best?
#
# - (a) yes, given relative positions and enough heads: any convolution
# - (b) yes, given relative positions: one head can hold any kernel
# - (c) yes, even without positions, since its weights come from the data
# - (d) no: a convolution's weights are fixed and attention's computed

# %% nbgrader={"grade": false, "grade_id": "claim_8", "locked": false, "schema_version": 3, "solution": true}
claim_8 = None
### BEGIN SOLUTION
claim_8 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_8_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_8, "abcd", "claim_8")
### BEGIN HIDDEN TESTS
grade_choice(claim_8, "a", "Yes, once it knows relative positions and has a head per tap of the kernel: the "
             "cell above builds a 3-tap convolution from 3 heads, each copying one neighbour, "
             "and Cordonnier et al. (2020) proved the general case (9 heads for a 3 × 3 kernel) "
             "and saw trained vision layers settle on local patterns. One head gives each "
             "position one blend of its neighbours, not three separately weighted taps. And "
             "without positions the last line above shows the limit: shuffling the inputs only "
             "shuffles the outputs, so no left tap can differ from a right one.")
### END HIDDEN TESTS

# %% [markdown]
# ### Claim 9 — "A causal mask makes the memory of attention linear in n."
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
# Which verdict fits, for attention that materialises its scores?
#
# - (a) true: the blocked scores are skipped, so only half the matrix is stored
# - (b) false: the `n × n` scores are still built, and half thrown away
# - (c) true: storing half of `n²` at each doubling adds up to linear growth
# - (d) false: memory grows faster than `n²`, since the mask is one more matrix

# %% nbgrader={"grade": false, "grade_id": "claim_9", "locked": false, "schema_version": 3, "solution": true}
claim_9 = None
### BEGIN SOLUTION
claim_9 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_9_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_9, "abcd", "claim_9")
### BEGIN HIDDEN TESTS
grade_choice(claim_9, "b", "False. A causal mask sets half of the scores to −∞, but an implementation that "
             "materialises the scores still builds the whole n × n matrix and throws the "
             "blocked half away: the measurement above found the peak growing about 4 times "
             "per doubling of n, with and without the mask. Memory linear in n comes from "
             "computing in blocks (FlashAttention, lesson 08) or from decoding with a "
             "key/value cache, not from the mask. The n² comparisons remain either way.")
### END HIDDEN TESTS

# %% [markdown]
# ## Reading a trained model
#
# ### Claim 10 — "An attention map explains the prediction."
#
# Heat maps of attention weights are often shown as the reason for a model's answer. Test that on
# lesson 01's trained attention classifier (seeds 0–2, `data/sentiment/`; 2 layers of 4 heads).
# For each of 100 `fillers_4` test reviews and each head, take the word `[CLS]` attends to most.
# Then delete the words of the review one at a time and find the word whose removal moves the
# logit most — an intervention, like lesson 06's removal of heads, applied to words. Printed: how
# often the two are the same word, per head.

# %%
from helpers import sentiment
from helpers.claims import attention_vs_removal
from helpers.trained import load_model

reviews_10 = sentiment.test_sets(n=100)["fillers_4"]
by_seed = {seed: attention_vs_removal(load_model("attention", seed), reviews_10) for seed in (0, 1, 2)}
for seed, shares in by_seed.items():  # shares: (layer, head)
    for layer, row in enumerate(shares, start=1):
        print(f"seed {seed}, layer {layer}: " + "  ".join(f"head {h} {share:4.0%}" for h, share in enumerate(row)))
every_head = torch.cat([shares.flatten() for shares in by_seed.values()])
mean_words = np.mean([len(words) for words in reviews_10.sentences])
print(f"\nbest head {every_head.max():.0%}, median head {every_head.median():.0%}; "
      f"{(every_head < 0.5).sum()} of {len(every_head)} heads agree in fewer than half of the reviews. "
      f"A word picked at random: about {1 / mean_words:.0%} (reviews of {mean_words:.0f} words on average)")

# %% [markdown]
# Which verdict fits these measurements?
#
# - (a) true: the word a head attends to most is the one the answer depends on most
# - (b) true for the last layer: `[CLS]` reads its output, so its map gives the reason
# - (c) false: most heads' top word is usually not the word whose removal matters most
# - (d) false: trained heads attend almost uniformly, so their maps show nothing at all

# %% nbgrader={"grade": false, "grade_id": "claim_10", "locked": false, "schema_version": 3, "solution": true}
claim_10 = None
### BEGIN SOLUTION
claim_10 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "claim_10_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(claim_10, "abcd", "claim_10")
### BEGIN HIDDEN TESTS
grade_choice(claim_10, "c", "False, as a general rule. Over 100 reviews and three seeds, even the best head's "
             "favourite word was the word whose deletion moves the logit most in only about half "
             "of the reviews, and most heads agreed far less often; the last layer of seed 0 "
             "almost never did, so reading the last layer is no way out. A weight says where a "
             "head reads from; what the read adds depends on the values, W_O, the residual path "
             "and the layers after it, and two words can carry the same information (a negation "
             "and its adjective). Nor are the maps noise: lesson 03 found many heads of these "
             "models to be sharp lookups. To learn what an answer depends on, intervene — delete "
             "a word, remove a head (lesson 06) — and measure.")
### END HIDDEN TESTS

# %% [markdown]
# ## A quick check from another introduction
#
# Three questions from a second introduction to attention, which used the same three-token example
# as lesson 02.
#
# ### Quick check 1
#
# The worked example (*voltage*, *spike*, *alarm*): its weights, one row per query, and its outputs:

# %%
Q3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V3 = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
out3, weights3 = course.attention(Q3, Q3, V3)  # here K = Q
print("weights:\n", weights3)
print("outputs:\n", out3)

# %% [markdown]
# What does the `0.198` in row 0, column 1 of the weights represent?
#
# - (a) the weight the second token (spike) gives to the first (voltage)
# - (b) the scaled score of voltage's query against spike's key
# - (c) the weight the first token (voltage) gives to the second (spike)
# - (d) the similarity of voltage's and spike's keys, as a cosine

# %% nbgrader={"grade": false, "grade_id": "quick_1", "locked": false, "schema_version": 3, "solution": true}
quick_1 = None
### BEGIN SOLUTION
quick_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quick_1, "abcd", "quick_1")
### BEGIN HIDDEN TESTS
grade_choice(quick_1, "c", "Row i of the weights is query i's softmax over the keys, and column j "
             "belongs to key j: row 0, column 1 is the weight the first token, voltage, gives "
             "to the second, spike, so spike's value [0, 10] makes up 0.198 of voltage's "
             "output [6.017, 3.983]. The same number in row 1, column 0 is spike's weight on "
             "voltage. It is a weight after the softmax, not a score (voltage's scaled score "
             "against spike is 0), and not a similarity of keys (their keys are orthogonal: "
             "cosine 0).")
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
#
# - (a) so that every score lies between −1 and 1, like a cosine
# - (b) so that the weights of each query sum to 1
# - (c) to average the `d_k` products instead of adding them
# - (d) the spread of `q·k` grows with `d_k` and would saturate the softmax

# %% nbgrader={"grade": false, "grade_id": "quick_2", "locked": false, "schema_version": 3, "solution": true}
quick_2 = None
### BEGIN SOLUTION
quick_2 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quick_2, "abcd", "quick_2")
### BEGIN HIDDEN TESTS
grade_choice(quick_2, "d", "For independent components of variance 1, q·k is a sum of d_k products, so its "
             "variance is d_k and its standard deviation √d_k (8 at d_k = 64, as measured "
             "above). Scores that spread out push the softmax towards one-hot, where its "
             "gradient nearly vanishes; dividing by √d_k brings the spread back near 1. The "
             "scaled scores are not bounded like cosines, the softmax alone makes the weights "
             "sum to 1, and averaging (dividing by d_k) would shrink the spread to 1/√d_k.")
### END HIDDEN TESTS

# %% [markdown]
# ### Quick check 3
#
# A sensor sends 100,000 readings, and each reading depends only on the few just before it. Which
# model fits best?
#
# - (a) full self-attention: it can learn any dependency, local ones included
# - (b) an RNN or a convolution with a small window: nothing needs all pairs
# - (c) full attention with a causal mask: hiding the future makes it linear
# - (d) full attention with the online softmax: it never stores the n × n grid

# %% nbgrader={"grade": false, "grade_id": "quick_3", "locked": false, "schema_version": 3, "solution": true}
quick_3 = None
### BEGIN SOLUTION
quick_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quick_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quick_3, "abcd", "quick_3")
### BEGIN HIDDEN TESTS
grade_choice(quick_3, "b", "When each reading depends on a few before it, a recurrent network (a fixed-size "
             "state, fed one reading at a time) or a convolution with a small window computes "
             "exactly the links that exist; attention restricted to a window would too. Full "
             "attention scores 10¹⁰ pairs to use a few per reading. A causal mask skips about "
             "half of them — still n² (lesson 04 timed the masked pass); the online softmax "
             "(lesson 08) saves the memory of the grid, not the work of computing it.")
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
