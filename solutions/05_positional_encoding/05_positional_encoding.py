# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Where am I? Positional encoding
#
# **Promise:** by the end you can show by computation that attention alone cannot tell "the food
# was not good" from "not the food was good", and you have built the two position schemes that
# fix it: the sinusoidal encoding of the original Transformer and the rotary embedding of
# today's language models.
#
# **You will**
# - measure that self-attention is permutation-*equivariant* and a pooled or [CLS] readout
#   permutation-*invariant*, on a real sentence;
# - write the sinusoidal encoding (exercise 1) and see why its fast and slow dimensions work like
#   the digits of a counter;
# - compute that `PE(p)·PE(q)` depends only on the offset `q − p`;
# - place the three families of position schemes — fixed, learned, relative — and what is known
#   about them;
# - write the rotary embedding RoPE (exercise 2) and check, by computation, that it keeps lengths
#   and makes scores depend only on the offset.
#
# **Time:** about 55 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from helpers.attention import self_attention as course_self_attention  # lesson 02's, the course's version
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.checks.positional import check_rope, check_sinusoidal_encoding
from helpers.plots import plot_weights
from helpers.positional import (
    diagonal_spread,
    dot_by_offset,
    pair_explorer,
    pair_view,
    plot_counter,
    plot_dimension_curves,
    plot_encoding,
    plot_pair_view,
    plot_position_matrix,
    plot_rows_by_offset,
    shift_matrix,
    view_summary,
)
from helpers.quiz import check_choice, grade_choice

np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## Attention cannot see the order
#
# Give each word of a small vocabulary a random 8-number embedding, and pass two sentences through
# the same self-attention (the course's NumPy version from lesson 02, with random projections):
#
# - A: *the food was not good*
# - B: *not the food was good*
#
# Same five words, different order, different meaning.

# %%
rng = np.random.default_rng(0)
d_model = 8
vocab = ["[CLS]", "the", "food", "was", "not", "good"]
embedding = {word: rng.normal(size=d_model) for word in vocab}  # a random embedding table
w_q, w_k, w_v = (rng.normal(size=(d_model, d_model)) / np.sqrt(d_model) for _ in range(3))


def embed(sentence):
    """The embeddings of a sentence's words, stacked as rows: (n, d_model)."""
    return np.stack([embedding[word] for word in sentence.split()])


sentence_a, sentence_b = "the food was not good", "not the food was good"
out_a, weights_a = course_self_attention(embed(sentence_a), w_q, w_k, w_v)  # (5, 8), (5, 5)
out_b, weights_b = course_self_attention(embed(sentence_b), w_q, w_k, w_v)
order = [sentence_a.split().index(word) for word in sentence_b.split()]  # B's word k is A's word order[k]
print("B's words are A's words in the order", order)
print("B's output rows == A's output rows in that order:", np.allclose(out_b, out_a[order]),
      f"(largest difference {np.abs(out_b - out_a[order]).max():.1e})")

fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
plot_weights(weights_a, sentence_a.split(), sentence_a.split(), ax=axes[0], title="A: attention weights")
plot_weights(weights_b, sentence_b.split(), sentence_b.split(), ax=axes[1], title="B: attention weights")
plt.show()

# %% [markdown]
# Every weight of B is a weight of A, moved to another cell: *good* gives *food* the same weight
# in both sentences. Each word's output depends on which words are present, never on where they
# are. Shuffling the input shuffles the output rows in the same way — self-attention is
# **permutation-equivariant**.
#
# A classifier does not read five rows, though; it reads one vector. Two common choices are the
# mean of the output rows (**pooling**) and the output of an extra **[CLS]** token put in front
# of the sentence (BERT's choice). Both lose the order completely — they are
# **permutation-invariant**:

# %%
pooled_a, pooled_b = out_a.mean(axis=0), out_b.mean(axis=0)
cls_a = course_self_attention(embed("[CLS] " + sentence_a), w_q, w_k, w_v)[0][0]  # output row of [CLS]
cls_b = course_self_attention(embed("[CLS] " + sentence_b), w_q, w_k, w_v)[0][0]
print(f"mean-pooled outputs: largest difference {np.abs(pooled_a - pooled_b).max():.1e}")
print(f"[CLS] outputs:       largest difference {np.abs(cls_a - cls_b).max():.1e}")

# %% [markdown]
# The differences are rounding errors (`1e-16` is the size of float64's last digit): whatever a
# classifier on top learns, it gives both sentences the same answer. Stacking more layers does not
# help: attention is equivariant and the parts around it (feed-forward, normalisation) act on each
# token alone, so the whole stack is equivariant.
#
# One thing does break the symmetry: lesson 04's causal mask. With it, the first token sees one
# token and the last sees all of them, so a token can tell roughly how far along it is — decoder
# language models trained without any positional encoding still pick up position this way (Haviv
# et al., 2022). An encoder that reads the whole sentence at once, like the classifier here, has
# no mask to lean on: for it, the order has to be put into the input.

# %% [markdown]
# ## Give every token its position
#
# The fix of the original Transformer (Vaswani et al., 2017, §3.5): add to each token's embedding
# a vector that depends only on its position, `x_p ← x_p + PE[p]`, before the first layer. Their
# vectors are fixed sinusoids. For a model of width `d` and each pair of dimensions
# `(2i, 2i+1)`, `i = 0 … d/2 − 1`:
#
# $$\mathrm{PE}[p, 2i] = \sin(p\,\omega_i), \qquad \mathrm{PE}[p, 2i+1] = \cos(p\,\omega_i),
# \qquad \omega_i = \frac{1}{\text{base}^{2i/d}}, \quad \text{base} = 10000 .$$
#
# Each pair turns at its own speed `ω_i` (radians per position). Pair 0 turns at 1 radian per
# position, a full turn every `2π ≈ 6.3` positions; the speeds then fall geometrically, down to
# about `1/base` for the last pair, so the wavelengths run from `2π` to almost `2π · 10000`.
#
# **Exercise 1 (3 points).** Write `sinusoidal_encoding(n_positions, d_model, base=10000.0)`
# returning a torch float tensor of shape `(n_positions, d_model)` for positions `0 … n − 1`
# (`d_model` is even). Sines go in the even columns, cosines in the odd ones — interleaved, not
# one half after the other. Hints: `torch.arange(0, d_model, 2)` gives the `2i` of every pair, and
# `pe[:, 0::2] = …` fills every other column.

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_encoding", "locked": false, "schema_version": 3, "solution": true}
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    """The sinusoidal position encoding: (n_positions, d_model), sin in even, cos in odd columns."""
    ### BEGIN SOLUTION
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    positions = torch.arange(n_positions, dtype=torch.float32)[:, None]  # (n, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d/2,): 0, 2, 4, ...
    omega = base ** (-two_i / d_model)  # (d/2,) radians per position
    angles = positions * omega  # (n, d/2)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "sinusoidal_encoding_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_sinusoidal_encoding(sinusoidal_encoding)
### BEGIN HIDDEN TESTS
from helpers import positional as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(sinusoidal_encoding, check_sinusoidal_encoding, "sinusoidal_encoding")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for seed in fresh_seeds(3):
    check_sinusoidal_encoding(sinusoidal_encoding, seed=seed, n_positions=int(_rng.integers(1, 120)),
                              d_model=2 * int(_rng.integers(1, 40)), verbose=False)
_n, _d, _base = int(_rng.integers(30, 200)), 2 * int(_rng.integers(4, 64)), float(_rng.uniform(50, 5e4))
with quiet():
    _pe = sinusoidal_encoding(_n, _d, _base)
    _pe_default = sinusoidal_encoding(_n, _d)
expect_close(_pe, reference.sinusoidal_encoding(_n, _d, _base).double(),
             f"sinusoidal_encoding({_n}, {_d}, base={_base:.1f})", rtol=1e-4, atol=2e-4)
expect_close(_pe_default, reference.sinusoidal_encoding(_n, _d).double(),
             f"sinusoidal_encoding({_n}, {_d}) with the default base", rtol=1e-4, atol=2e-4)
assert torch.is_tensor(_pe) and _pe.is_floating_point(), "sinusoidal_encoding must return a float torch tensor"
# Property: every row's pair (2i, 2i+1) lies on the unit circle.
expect_close((torch.as_tensor(_pe).double()[:, 0::2] ** 2 + torch.as_tensor(_pe).double()[:, 1::2] ** 2),
             np.ones((_n, _d // 2)), "sin² + cos² of each pair", atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# ### Fast dimensions, slow dimensions
#
# Your encoding for 100 positions and `d_model = 64`, next to a binary counter of the same
# positions. In both, the left columns flip fast and tell neighbours apart; the right columns
# change slowly and say roughly *where* in the sequence you are. The encoding is a smooth counter:
# its "digits" are angles instead of bits, and each turns `base^(2/d)` times slower than the one
# before (a bit flips twice as slowly as the one before it).

# %%
pe = sinusoidal_encoding(100, 64)  # (100, 64)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", gridspec_kw={"width_ratios": [2, 1]})
plot_encoding(pe, ax=axes[0], title="your sinusoidal encoding, d_model = 64")
plot_counter(100, 7, ax=axes[1])
plt.show()

shown = [0, 8, 16, 30]
plot_dimension_curves(pe, shown)
plt.show()
for dim in shown:
    omega = 10000.0 ** (-(dim - dim % 2) / 64)
    print(f"dim {dim:>2}: ω = {omega:.4f} rad per position, one turn every {2 * np.pi / omega:6.1f} positions")
print(f"dim 0 at positions 0 and 44 (seven turns apart): {pe[0, 0]:.3f} and {pe[44, 0]:.3f}")

# %% [markdown]
# Dimension 0 comes back almost to the same value every 6.3 positions — positions 0 and 44 nearly
# coincide — so on its own it cannot say where you are. Dimension 30 turns once every few hundred
# positions: within 100 positions it never repeats, but it barely moves between neighbours. Together, fast and slow, they give every position a distinct vector.

# %% [markdown]
# ### Positions break the tie
#
# Back to the two sentences, now with `x + PE` as input: the [CLS] token at position 0, the words
# at positions 1 to 5. Same embeddings, same projections, your encoding added.

# %%
pe_small = sinusoidal_encoding(6, d_model).numpy()  # (6, 8): positions 0..5
x_a = embed("[CLS] " + sentence_a) + pe_small
x_b = embed("[CLS] " + sentence_b) + pe_small
out_pos_a, _ = course_self_attention(x_a, w_q, w_k, w_v)
out_pos_b, _ = course_self_attention(x_b, w_q, w_k, w_v)
for name, u, v in [("[CLS] outputs", out_pos_a[0], out_pos_b[0]),
                   ("mean-pooled outputs", out_pos_a.mean(0), out_pos_b.mean(0))]:
    print(f"{name:>20}: largest difference {np.abs(u - v).max():.3f}, "
          f"relative size of the difference {np.linalg.norm(u - v) / np.linalg.norm(u):.1%}")

# %% [markdown]
# The readouts now differ: a classifier on top *can* give the two sentences different labels. How
# much they differ depends on the weights — here random; training is what makes a model use the
# positions.

# %% [markdown]
# ## `PE(p)·PE(q)` depends only on the offset
#
# Why sines and cosines? Take one pair: `sin a sin b + cos a cos b = cos(a − b)`. So the dot
# product of two positions' encodings is a sum over the pairs,
#
# $$\mathrm{PE}(p)\cdot\mathrm{PE}(q) = \sum_{i} \cos\big((q - p)\,\omega_i\big),$$
#
# which contains `q − p` and nothing else. The matrix of all these dot products should be the
# same along every diagonal (a *Toeplitz* matrix). Compute it:

# %%
pe = sinusoidal_encoding(64, 64)  # (64, 64)
gram = (pe @ pe.T).numpy()  # (64, 64): gram[p, q] = PE(p)·PE(q)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plot_position_matrix(gram, ax=axes[0], title="PE(p)·PE(q)", label="dot product")
plot_rows_by_offset(gram, [10, 32, 50], ax=axes[1], label="PE(p)·PE(p + Δ)")
axes[1].set_title("rows of the matrix, against the offset")
plt.show()
print(f"entries range from {gram.min():.2f} to {gram.max():.2f}")
print(f"largest spread along any diagonal: {diagonal_spread(gram):.1e} (float32 rounding)")
print(f"largest gap to Σ cos(Δ ω_i): {np.abs(gram[0] - dot_by_offset(np.arange(64), 64)).max():.1e}")
print(f"PE(10)·PE(13) = {gram[10, 13]:.3f},  PE(13)·PE(10) = {gram[13, 10]:.3f}")

# %% [markdown]
# Along every diagonal the entries agree to the last digits float32 keeps, and the rows for three
# different `p`, plotted against the offset, lie on one curve. The peak `d/2 = 32` sits at offset
# 0 (every cosine is 1). Notice the last line: since `cos` is even, the dot product cannot tell
# three positions *before* from three positions *after*.
#
# ### A shift is a rotation
#
# There is more: for each pair, moving `k` positions turns the point `(sin pω_i, cos pω_i)` by the
# angle `k ω_i`, whatever `p` is. So one fixed matrix `M_k` — a 2 × 2 rotation per pair — maps
# every `PE(p)` to `PE(p + k)`. This is the property Vaswani et al. (2017, §3.5) had in mind: a
# relative offset is a *linear* function of the encoding, which they hoped would make it easy for
# the model to attend by relative position.

# %%
pe = sinusoidal_encoding(64, 64).double()  # (64, 64)
k = 5
m_k = shift_matrix(k, 64)  # (64, 64) float64, from helpers
moved = pe[:-k] @ m_k  # every PE(p) times the same matrix
print(f"largest |PE(p) @ M_{k} − PE(p + {k})| over all p: {(moved - pe[k:]).abs().max():.1e}")
print(f"M_{k} is a rotation: largest |M Mᵀ − I| = "
      f"{(m_k @ m_k.T - torch.eye(64, dtype=torch.float64)).abs().max():.1e}")

# %% [markdown]
# Follow one pair on its circle: below, pair 2 (dims 4 and 5), positions 5 and 8. Each position is
# a point on the unit circle; an offset of 3 is always the same turn, wherever it starts.

# %%
view = pair_view(pair=2, offset=3, start=5)
plot_pair_view(view)
plt.show()
print(view_summary(view))

# %% [markdown]
# In the widget, slide the pair, the offset Δ and the start `p`: the angle between `p` and
# `p + Δ` never depends on `p`, and neither does `PE(p)·PE(p + Δ)`. It opens on a slow pair, 20:
# an offset of 3 barely moves its hand — slow pairs cannot tell neighbours apart, fast pairs
# cannot tell far-apart positions apart. (Where widgets do not run, you see its first picture.)

# %% tags=["hide-in-slides"]
display(pair_explorer(pair=20, offset=3))

# %% [markdown]
# ## Three families of position schemes
#
# | family | how | used in |
# |---|---|---|
# | fixed sinusoidal | the formula above, added to the embeddings once | the original Transformer (Vaswani et al., 2017) |
# | learned absolute | a trainable table with one vector per position, added once | BERT (Devlin et al., 2019), GPT-2 (Radford et al., 2019), ViT (Dosovitskiy et al., 2021) |
# | relative | a term that depends on `j − i`, inside every attention layer | Shaw et al. (2018); Swin's relative position bias (Liu et al., 2021); RoPE (Su et al., 2021) |
#
# - **Fixed vs learned.** Vaswani et al. (2017, §3.5 and Table 3, row E) also trained learned
#   position embeddings and found the two versions gave nearly identical results. They kept the
#   sinusoids because these *may* let a model extrapolate to sequences longer than any seen in
#   training. A learned table cannot even try: it has no row beyond its last trained position
#   (512 positions in BERT, a 1024-token context in GPT-2).
# - **The hope did not hold up.** Press et al. (2022) trained language models on inputs of a fixed
#   length and evaluated them on longer ones: with sinusoidal positions, and also with rotary
#   embeddings and T5's relative bias, perplexity got worse as the inputs grew past the training
#   length (their Figure 1). Their remedy, ALiBi, adds to each score a fixed penalty proportional
#   to the distance `|i − j|`, and kept its perplexity on longer inputs.
# - **Relative schemes** put position where it is used, in the comparison of a query with a key.
#   Shaw et al. (2018) add a learned vector for each (clipped) offset `j − i` to the keys; Swin
#   adds a learned bias, one number per offset and head inside its windows, to the scores; RoPE rotates
#   queries and keys so that their dot product depends on the offset only. Many later language
#   models use RoPE, LLaMA among them (Touvron et al., 2023).

# %% [markdown]
# ## A learned table, opened up
#
# Lesson 01's attention classifier learned its positions: a table of 81 rows of width 32, random
# at the start, trained with the rest of the model (three seeds, `data/sentiment/`). Its reviews
# need order — which adjective belongs to the course's clause and which negation to which
# adjective depend on where the words stand. Predict before you run the cell: after training,
# are neighbouring rows of the table alike, as neighbouring rows of the sinusoidal table are?
#
# The cell compares the cosine similarity of the rows with that of a sinusoidal table of the
# same width, for the positions a training review can reach. Then it changes the table of each
# trained model and counts the right answers on 2,000 of lesson 01's test reviews. It keeps the
# trained table, puts back the random table training started from, shuffles its rows, or sets
# every row to zero.

# %%
from helpers.positional import (
    learned_positions,
    learned_positions_reading,
    learned_positions_table,
    plot_learned_positions,
)

learned = learned_positions(seeds=(0, 1, 2))
plot_learned_positions(learned)
plt.show()
print(learned_positions_table(learned))
print()
print(learned_positions_reading(learned))

# %% [markdown]
# The trained table has no geometry: a row is no more like its neighbour than like a row far
# away, and training left it close to the random vectors it started from. Yet the model cannot
# do without it. Random vectors in 32 dimensions are almost orthogonal to one another, so each
# row is a distinct name tag, and that is all the layers need. Their projections learned which
# tags to connect, and they were learning them against the random start all along, which is why
# that start still does much of the job. Shuffled rows put every tag at the wrong position,
# which is why they do as badly as no positions at all. What a table like this cannot give is
# any notion of distance or of positions beyond its last trained row. Those are exactly what
# the sinusoidal encoding and RoPE build in.

# %% [markdown]
# **Think (2 points, graded by hand).** With an added encoding, the first layer's score between
# tokens `i` and `j` is `(x_i + p_i) W_Q W_Kᵀ (x_j + p_j)ᵀ` (before the `√d_k`). Expand it into
# four terms. Which terms carry position, and do they depend on the offset `j − i` only? Answer in
# three or four sentences; the next section shows how RoPE changes this.

# %% [markdown] nbgrader={"grade": true, "grade_id": "score_terms", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# With A = W_Q W_Kᵀ: x_i A x_jᵀ (content with content, no position), x_i A p_jᵀ and p_i A x_jᵀ
# (content with the *absolute* position of the other token), and p_i A p_jᵀ (position with
# position). 1 point for the four terms and saying which carry position. 1 point for: the two mixed
# terms depend on absolute positions, not on j − i; even p_i A p_jᵀ depends on j − i only for
# special A (e.g. A = I, or A built from the same per-pair rotations/scalings) — a learned A
# generally breaks the Toeplitz property shown above. So relative position is available only if
# training finds it. (RoPE rotates q and k after the projections, so the score depends on position
# through j − i alone, in every layer.)
# === END MARK SCHEME ===

# %% [markdown]
# ## RoPE: rotate queries and keys instead of adding
#
# RoPE (Su et al., 2021) adds nothing to the embeddings. Inside every attention layer, after the
# projections, it turns each pair of dimensions `(2i, 2i+1)` of a query or key at position `p` by
# the angle `θ = p ω_i`, with the same frequencies `ω_i = base^(−2i/d)` as before:
#
# $$\begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix} \;\longmapsto\;
# \begin{pmatrix} x_{2i}\cos\theta - x_{2i+1}\sin\theta \\ x_{2i}\sin\theta + x_{2i+1}\cos\theta \end{pmatrix}.$$
#
# Why it works: write `R_a` for the rotation of every pair by its angle at position `a`. Rotating
# both vectors and taking the dot product is the same as rotating only the key, by the difference:
# `(R_i q)·(R_j k) = q·(R_{j−i} k)`. So a query at position `i` and a key at position `j` score
# `q·R_{j−i} k` — the content of both tokens and their offset, never the absolute positions. Unlike the
# `PE(p)·PE(q)` above, `R_{+3}` and `R_{−3}` differ, so RoPE *can* tell before from after.
#
# **Exercise 2 (4 points).** Write `rope(x, positions=None, base=10000.0)` for a torch tensor
# `x (..., n, d)` — any number of leading batch dimensions, for example `(B, H, n, d)`. Token `k`
# (along the second-to-last axis) sits at position `positions[k]`; `positions` is a 1-D tensor of
# length `n` and defaults to `0 … n − 1`. Rotate every pair `(2i, 2i+1)` as above, in that
# direction, with neighbouring dimensions paired. Return a new tensor of the shape of `x`; do not
# change `x`.
#
# Careful: some libraries (GPT-NeoX, Hugging Face's Llama) pair dimension `i` with `i + d/2`
# instead ("rotate half"). It is the same idea with the dimensions numbered differently; it keeps
# norms and offsets just as well, but it is not this contract, and the check will say so.

# %% nbgrader={"grade": false, "grade_id": "rope", "locked": false, "schema_version": 3, "solution": true}
def rope(x, positions=None, base=10000.0):
    """Rotary embedding of x (..., n, d): pair (2i, 2i+1) at position p turned by p·base^(−2i/d)."""
    ### BEGIN SOLUTION
    n, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(n)
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    theta = torch.as_tensor(positions, dtype=torch.float64)[:, None] * omega  # (n, d/2)
    cos, sin = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each
    rotated = torch.stack([x_even * cos - x_odd * sin, x_even * sin + x_odd * cos], dim=-1)  # (..., n, d/2, 2)
    return rotated.flatten(-2)  # (..., n, d): pairs back in place
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rope_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false}
check_rope(rope)
### BEGIN HIDDEN TESTS
from helpers import positional as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(rope, check_rope, "rope")
# The calls below use the course's sinusoidal_encoding, as the check does: one mistake, one charge.
from helpers.checks import course_callees

_rng = np.random.default_rng(fresh_seeds(1)[0])
for seed in fresh_seeds(3):
    check_rope(rope, seed=seed, n=int(_rng.integers(2, 12)), d=2 * int(_rng.integers(1, 17)), verbose=False)
# (B, H, n, d) with explicit, unordered positions and a non-default base, against the reference.
_g = torch.Generator().manual_seed(int(_rng.integers(2**31)))
_B, _H, _n, _d = 2, 4, int(_rng.integers(3, 10)), 2 * int(_rng.integers(2, 12))
_x = torch.randn(_B, _H, _n, _d, generator=_g)
_pos = torch.as_tensor(_rng.choice(500, size=_n, replace=False))
_base = float(_rng.uniform(30.0, 3000.0))
with quiet(), course_callees(rope, "sinusoidal_encoding", verbose=False):
    _got = rope(_x.clone(), positions=_pos, base=_base)
    _got_float_pos = rope(_x.double(), positions=_pos.double(), base=_base)
# The exercise states no dtype: angles computed in float32 (as LLaMA's code does) are off by
# up to ~5e-5 rad at positions below 500, also for a float64 x. Every mistake is far larger.
expect_close(_got, reference.rope(_x.double(), _pos, _base),
             f"rope of a (B, H, n, d) = {tuple(_x.shape)} tensor, positions {_pos.tolist()}, base {_base:.1f}",
             rtol=1e-4, atol=2e-4)
expect_close(_got_float_pos, reference.rope(_x.double(), _pos, _base),
             "rope of a float64 tensor with float positions", rtol=1e-4, atol=2e-4)
# Properties: norms kept; the score of a query at p and a key at p + Δ does not depend on p.
expect_close(torch.as_tensor(_got).norm(dim=-1), _x.norm(dim=-1), "the norm of every rotated vector",
             rtol=1e-4, atol=1e-5)
_q, _k = torch.randn(1, _d, generator=_g, dtype=torch.float64), torch.randn(1, _d, generator=_g, dtype=torch.float64)
_delta = int(_rng.integers(-20, 21))
with quiet(), course_callees(rope, "sinusoidal_encoding", verbose=False):
    _scores = [float(rope(_q, torch.tensor([p]), _base)[0] @ rope(_k, torch.tensor([p + _delta]), _base)[0])
               for p in _rng.choice(np.arange(20, 1000), size=5, replace=False).tolist()]  # p + Δ ≥ 0
# float32 angles near position 1000 move each score by up to ~1e-5 · |q| |k|; a rope that
# breaks the offset property moves it by about |q| |k|.
expect_close(_scores, np.full(5, _scores[0]), f"rope(q at p)·rope(k at p + {_delta}) for five different p",
             rtol=1e-4, atol=1e-4 * float(_q.norm() * _k.norm()))
### END HIDDEN TESTS

# %% [markdown]
# ### Rotations keep lengths; scores see only the offset
#
# Three computations with your `rope`. First, a rotation never changes a vector's length: queries
# and keys keep their size, so the `√d_k` scale of lesson 03 still fits.

# %%
torch.manual_seed(0)
x = torch.randn(2, 4, 10, 64)  # (B, H, n, d)
rotated = rope(x)
print("shape kept:", tuple(rotated.shape))
print(f"largest change of a vector's norm: {(rotated.norm(dim=-1) - x.norm(dim=-1)).abs().max():.1e}")
print(f"but the vectors did move: largest change of an entry {(rotated - x).abs().max():.2f}")

# %% [markdown]
# Second, the offset. Put the *same* query vector at every position 0 … 63 and the same key
# vector at every position, rotate both, and take all the scores `rope(q)·rope(k)`:

# %%
q_vec, k_vec = torch.randn(64), torch.randn(64)
n = 64
queries, keys = rope(q_vec.expand(n, 64)), rope(k_vec.expand(n, 64))  # (n, d): one copy per position
scores = (queries @ keys.T).numpy()  # (n, n): scores[p, q] = query at p against key at q
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plot_position_matrix(scores, ax=axes[0], title="query at p, key at q: rope(q)·rope(k)", label="score")
plot_rows_by_offset(scores, [10, 32, 50], ax=axes[1], label="score at offset Δ")
axes[1].set_title("rows of the matrix, against the offset")
plt.show()
print(f"largest spread along any diagonal: {diagonal_spread(scores):.1e} (scores range "
      f"{scores.min():.1f} … {scores.max():.1f})")
print(f"query at 10, key at 13: {scores[10, 13]:.3f};  query at 13, key at 10: {scores[13, 10]:.3f}")

# %% [markdown]
# Constant along the diagonals again — now for arbitrary content vectors, not just for the
# encodings themselves — and no longer symmetric: "three ahead" and "three behind" score
# differently.
#
# Third, why `positions` is an argument. When a model generates text one token at a time with a
# key/value cache (lesson 04), the new token's query is a sequence of length 1, but it sits at
# position `t`, not 0. Rotating it with its true position gives exactly what rotating the whole
# sequence would have given:

# %%
t = 9
whole = rope(x)  # (B, H, 10, d): the sequence rotated at once
one_step = rope(x[..., t:t + 1, :], positions=torch.tensor([t]))  # (B, H, 1, d): only the last token
print("rope of the last token alone, at position 9 == row 9 of rope of the whole sequence:",
      torch.allclose(one_step, whole[..., t:t + 1, :], atol=1e-6))

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=05_positional_encoding` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** A classifier runs two self-attention layers with **no positional information**, then
# averages the output rows and reads the average. Can it learn to tell "dog bites man" from
# "man bites dog"?
#
# - (a) yes: attention compares every pair of words, order included
# - (b) no: both orders give the same average, whatever the weights
# - (c) yes: the second layer reads what the first one mixed, in order
# - (d) no, but only because two layers are too few to learn order

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "b", "without positions each layer is equivariant — reordering the words reorders "
             "its output rows and changes nothing else — so after any number of layers the two "
             "sentences give the same rows in a different order, and their average is the "
             "same vector. Comparing every pair does not help: a pair of words scores the same "
             "wherever the two stand. Only positions break the tie")
### END HIDDEN TESTS

# %% [markdown]
# **2.** In the sinusoidal encoding with `d_model = 512`, which pair of dimensions turns less than
# one full turn over the first 5,000 positions?
#
# - (a) dims 0 and 1
# - (b) dims 256 and 257
# - (c) dims 510 and 511
# - (d) none: each pair turns at least once

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "c", "pair i turns ω_i = base^(−2i/d) radians per position: dims 0 and 1 turn every "
             "6.3 positions, dims 256 and 257 every 628, and dims 510 and 511 only every "
             "60,600 or so — under a tenth of a turn over 5,000 positions, like the highest "
             "digit of a counter")
### END HIDDEN TESTS

# %% [markdown]
# **3.** With RoPE, for `q` and `k` of shape `(1, d)`, the score `rope(q, torch.tensor([5])) @
# rope(k, torch.tensor([9])).T` equals…
#
# - (a) `rope(q, torch.tensor([4])) @ rope(k, torch.tensor([0])).T`
# - (b) `rope(q, torch.tensor([9])) @ rope(k, torch.tensor([5])).T`
# - (c) `rope(q, torch.tensor([0])) @ rope(k, torch.tensor([0])).T`
# - (d) `rope(q, torch.tensor([0])) @ rope(k, torch.tensor([4])).T`

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "d", "the score depends only on the offset, key position minus query position: 9 − 5 = "
             "4 = 4 − 0. Options (a) and (b) have offset −4, which RoPE tells apart from +4; "
             "(c) is offset 0, the score without any rotation")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - Without positions, self-attention is permutation-equivariant and a pooled or [CLS] readout is
#   invariant: "the food was not good" and "not the food was good" get the same answer.
# - The sinusoidal encoding `PE[p, 2i] = sin(p ω_i)`, `PE[p, 2i+1] = cos(p ω_i)`,
#   `ω_i = base^(−2i/d)`, is a smooth counter: fast pairs tell neighbours apart, slow pairs give
#   the coarse position.
# - `PE(p)·PE(q) = Σ cos((q − p) ω_i)` depends on the offset only (a Toeplitz matrix), and a
#   shift by `k` is one fixed rotation of the encoding.
# - Fixed and learned absolute encodings performed nearly the same in the original paper;
#   sinusoids did not turn out to extrapolate well (Press et al., 2022). Lesson 01's learned table
#   kept no notion of distance, yet the model could not do without it: a distinct tag per
#   position was enough.
# - RoPE rotates each pair of query and key dimensions by `p ω_i`: lengths are kept and scores
#   depend on the content and the offset `j − i` alone, with before and after distinguished.
#
# **Next:** lesson 06 runs several attention lookups side by side — multi-head attention.
#
# **References.**
# Devlin, J., Chang, M.-W., Lee, K., & Toutanova, K. (2019). BERT: Pre-training of deep
# bidirectional Transformers for language understanding. NAACL. ·
# Dosovitskiy, A., et al. (2021). An image is worth 16x16 words: Transformers for image recognition
# at scale. ICLR. ·
# Haviv, A., Ram, O., Press, O., Izsak, P., & Levy, O. (2022). Transformer language models without
# positional encodings still learn positional information. Findings of EMNLP. ·
# Liu, Z., et al. (2021). Swin Transformer: Hierarchical vision Transformer using shifted windows.
# ICCV. ·
# Press, O., Smith, N. A., & Lewis, M. (2022). Train short, test long: Attention with linear biases
# enables input length extrapolation. ICLR. ·
# Radford, A., Wu, J., Child, R., Luan, D., Amodei, D., & Sutskever, I. (2019). Language models are
# unsupervised multitask learners. OpenAI report. ·
# Shaw, P., Uszkoreit, J., & Vaswani, A. (2018). Self-attention with relative position
# representations. NAACL. ·
# Su, J., Lu, Y., Pan, S., Murtadha, A., Wen, B., & Liu, Y. (2021). RoFormer: Enhanced Transformer
# with rotary position embedding. arXiv:2104.09864. ·
# Touvron, H., et al. (2023). LLaMA: Open and efficient foundation language models.
# arXiv:2302.13971. ·
# Vaswani, A., Shazeer, N., Parmar, N., Uszkoreit, J., Jones, L., Gomez, A. N., Kaiser, Ł., &
# Polosukhin, I. (2017). Attention is all you need. NeurIPS.
