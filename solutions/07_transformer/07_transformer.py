# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · The Transformer block, and what trained models look at
#
# **Promise:** by the end you have built one Transformer encoder layer from LayerNorm, a
# feed-forward network and residuals, matched PyTorch's to the last digit, measured why
# modern models put the LayerNorm first, and looked inside lesson 01's trained sentiment models.
#
# **You will**
# - write LayerNorm (exercise 1) and see why it normalises each token, not the batch;
# - write the position-wise feed-forward network (exercise 2);
# - assemble an encoder layer, pre-norm and post-norm, equal to `nn.TransformerEncoderLayer`
#   (exercise 3);
# - compare post-norm and pre-norm stacks of 12 layers trained with and without a learning-rate
#   warm-up (three seeds each);
# - see how a decoder layer adds masked self-attention and cross-attention, and watch a tiny
#   encoder–decoder reverse digit strings one token at a time with a key/value cache;
# - measure where the [CLS] token of three trained attention models looks, head by head, and
#   watch the LSTM and the plain RNN change their minds as they read.
#
# **Time:** about 75 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from torch import nn

from experiments import decoding, norm_warmup
from helpers import cls_reading, inspect_models, sentiment
from helpers.attention import scaled_dot_product_attention
from helpers.block import decoder_block, decoder_params, encoder_params, transformer_parameters
from helpers.block_diagram import plot_block_diagrams
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.block import check_encoder_block, check_feed_forward, check_layer_norm, run_layer
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.quiz import check_choice, grade_choice
from helpers.runtime import threads

torch.set_printoptions(precision=3, sci_mode=False)
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## One layer, four ideas
#
# Attention (lessons 02–06) lets every token read from every other token. A Transformer layer
# wraps it with three more ideas, and stacks the result:
#
# | piece | what it does | shape |
# |---|---|---|
# | multi-head self-attention | mixes information **between** tokens | `(B, T, D) → (B, T, D)` |
# | feed-forward network (FFN) | processes **each token on its own** | `(B, T, D) → (B, T, D)` |
# | residual `x + sublayer(…)` | keeps an identity path through every layer | unchanged |
# | LayerNorm | rescales **each token's** vector to mean 0, variance 1 | unchanged |
#
# The original Transformer (Vaswani et al., 2017) writes each sub-layer as
# `LayerNorm(x + Sublayer(x))` — **post-norm**. GPT-2 and ViT use `x + Sublayer(LayerNorm(x))`
# — **pre-norm**. Here is one layer drawn both ways, from the input `x` at the bottom to the
# output at the top. Follow the line on the left, the **residual path**: in post-norm it passes
# through a LayerNorm after every addition; in pre-norm it runs from `x` to the output touching
# nothing but additions, and the LayerNorms sit on the side branches.

# %%
plot_block_diagrams()
plt.show()

# %% [markdown]
# Both are built below, and you will measure where the difference matters.

# %% [markdown]
# ## LayerNorm: per token, over the features
#
# For one token `x` of width `D`: `μ = mean(x)`, `σ² = mean((x − μ)²)` (the **biased** variance,
# dividing by `D`), then
#
# $$\mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta$$
#
# with a learned scale `γ` and shift `β` of width `D` (Ba et al., 2016). BatchNorm computes the
# same statistics over the **batch** instead: per feature, over every token of every sequence in
# the batch.
#
# **Think (2 points, graded by hand).** A colleague replaces LayerNorm with a normalisation over
# the batch (BatchNorm-style statistics) in a model that reads padded reviews of different lengths
# in batches of 64. Give two concrete consequences, one during training and one when the model
# is used on a single review.

# %% [markdown] nbgrader={"grade": true, "grade_id": "batch_statistics", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# One point each (any two of these, concretely stated):
# - training: a token's output depends on the other reviews in its batch (and on how much padding
#   they have — padding tokens enter the mean and variance unless masked out), so the same review
#   gets different outputs in different batches; small or length-sorted batches give noisy or
#   biased statistics.
# - single review: the batch statistics of one review (or of one token) are meaningless or
#   degenerate (variance of one example is 0), so the model must switch to running averages
#   collected in training — train and test behaviour differ. LayerNorm uses each token's own
#   features and behaves identically for batch size 1 and 64.
# === END MARK SCHEME ===

# %% [markdown]
# Now measure one of the consequences. Below, a batch of two "reviews" of three tokens; we change
# review 1 only and look at review 0's output.

# %%
torch.manual_seed(0)
x = torch.randn(2, 3, 4) * 3 + 1  # (B, T, D)
x_other = x.clone()
x_other[1] = torch.randn(3, 4) * 10  # a very different second review
gamma, beta = torch.ones(4), torch.zeros(4)


def over_batch(t):
    """BatchNorm-style statistics: over the batch and the tokens, per feature."""
    return (t - t.mean((0, 1), keepdim=True)) / torch.sqrt(t.var((0, 1), unbiased=False, keepdim=True) + 1e-5)


def per_token(t):
    """LayerNorm's statistics, from PyTorch: over the features of each token (your exercise 1 writes it)."""
    return nn.functional.layer_norm(t, t.shape[-1:], gamma, beta)


for name, norm in (("over the batch", over_batch), ("LayerNorm", per_token)):
    change = (norm(x)[0] - norm(x_other)[0]).abs().max().item()
    print(f"{name:>15}: review 0's output changes by up to {change:.3f} when review 1 changes")
ln = per_token(x)
print("LayerNorm output, review 0 — mean per token:", ln[0].mean(-1), " std per token:", ln[0].std(-1, unbiased=False))

# %% [markdown]
# **Exercise 1 (3 points).** Write `layer_norm(x, gamma, beta, eps=1e-5)` for a torch tensor
# `x (..., D)`, normalising over the **last** dimension with the biased variance; `gamma` and
# `beta` have shape `(D,)`. It must equal `nn.LayerNorm`. (`torch.var` is unbiased by default:
# pass `unbiased=False`, or compute the mean of squares yourself.)

# %% nbgrader={"grade": false, "grade_id": "layer_norm", "locked": false, "schema_version": 3, "solution": true}
def layer_norm(x, gamma, beta, eps=1e-5):
    """LayerNorm of x (..., D) over the last dim: gamma * (x − mean) / sqrt(var + eps) + beta."""
    ### BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)                   # (..., 1)
    var = x.var(dim=-1, unbiased=False, keepdim=True)     # (..., 1), divides by D
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "layer_norm_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_layer_norm(layer_norm)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(layer_norm, check_layer_norm, "layer_norm")
for _seed, _shape in zip(fresh_seeds(3), [(1, 1, 5), (4, 7, 16), (2, 3, 64)]):
    check_layer_norm(layer_norm, seed=_seed, shape=_shape, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_norm = nn.LayerNorm(12, eps=1e-3).double()
with torch.no_grad():
    _norm.weight.normal_()
    _norm.bias.normal_()
_x = torch.from_numpy(_rng.normal(2.0, 0.05, size=(5, 3, 2, 12)))  # 4-D, tiny spread: eps matters
# In float32 an x near 2.0 is rounded by ~1e-7, which the division by a spread of ~0.06 and gamma
# magnify to ~1e-5: that is float32's precision here, not a mistake (leaving out eps moves them by ~0.2).
with quiet():
    expect_close(layer_norm(_x, _norm.weight.detach(), _norm.bias.detach(), eps=1e-3),
                 _norm(_x).detach(), "layer_norm of a 4-D tensor against nn.LayerNorm(eps=1e-3)", atol=1e-4)
### END HIDDEN TESTS

# %% [markdown]
# ## The feed-forward network: each token on its own
#
# After attention has mixed the tokens, a two-layer MLP transforms every token separately,
# with the same weights at every position:
#
# $$\mathrm{FFN}(x) = \max(0,\ x W_1 + b_1)\, W_2 + b_2, \qquad W_1: (D, 4D),\ W_2: (4D, D)$$
#
# The original uses ReLU and an inner width of `4 × 512 = 2048` (Vaswani et al., 2017); BERT,
# GPT and ViT switched to GELU (Hendrycks & Gimpel, 2016). Most of a layer's weights sit here:

# %%
d = 512
attention_weights = 4 * d * d + 4 * d                    # W_Q, W_K, W_V, W_O and biases
ffn_weights = d * 4 * d + 4 * d + 4 * d * d + d          # W_1, b_1, W_2, b_2
print(f"one layer at D = {d}: attention {attention_weights:,} weights, FFN {ffn_weights:,} "
      f"({ffn_weights / (attention_weights + ffn_weights):.0%} of the two)")

# %% [markdown]
# **Exercise 2 (2 points).** Write `feed_forward(x, w1, b1, w2, b2)`: `relu(x w1 + b1) w2 + b2`
# for `x (..., D)`, `w1 (D, F)`, `b1 (F,)`, `w2 (F, D)`, `b2 (D,)`. Weights multiply from the
# right, as everywhere in this course.

# %% nbgrader={"grade": false, "grade_id": "feed_forward", "locked": false, "schema_version": 3, "solution": true}
def feed_forward(x, w1, b1, w2, b2):
    """Position-wise FFN: relu(x w1 + b1) w2 + b2, x (..., D) -> (..., D)."""
    ### BEGIN SOLUTION
    hidden = torch.relu(x @ w1 + b1)  # (..., F)
    return hidden @ w2 + b2           # (..., D)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "feed_forward_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_feed_forward(feed_forward)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(feed_forward, check_feed_forward, "feed_forward")
for _seed, _shape, _f in zip(fresh_seeds(3), [(1, 1, 3), (4, 6, 8), (7, 5)], [1, 32, 20]):
    check_feed_forward(feed_forward, seed=_seed, shape=_shape, d_ff=_f, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_x = torch.from_numpy(_rng.normal(size=(3, 4, 6)))
_l1, _l2 = nn.Linear(6, 24).double(), nn.Linear(24, 6).double()
with quiet():
    _got = feed_forward(_x, _l1.weight.detach().T, _l1.bias.detach(), _l2.weight.detach().T, _l2.bias.detach())
expect_close(_got, _l2(torch.relu(_l1(_x))).detach(), "feed_forward against two nn.Linear layers")
_x2 = _x.clone()
_x2[1] = 0.0  # one token's output must not depend on the others
with quiet():
    _got2 = feed_forward(_x2, _l1.weight.detach().T, _l1.bias.detach(), _l2.weight.detach().T, _l2.bias.detach())
expect_close(_got2[0], _got[0], "feed_forward of batch element 0 when element 1 changes (position-wise)")
### END HIDDEN TESTS

# %% [markdown]
# ## One encoder layer
#
# Now assemble the layer. `nn.TransformerEncoderLayer` keeps its weights in `nn.Linear` and
# `nn.MultiheadAttention` modules; `helpers.block.encoder_params(layer)` copies them into a
# plain dict, transposed so that every weight is applied as `x @ w`. Its keys:

# %%
torch.manual_seed(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
for key, value in encoder_params(layer).items():
    print(f"{key:>10}: {tuple(value.shape) if hasattr(value, 'shape') else value}")

# %% [markdown]
# With `norm_first=True` (pre-norm) one layer computes
#
# ```
# h   = x + attention(LN1(x))        # LN1 uses ln1_gamma, ln1_beta
# out = h + FFN(LN2(h))
# ```
#
# and with `norm_first=False` (post-norm, the original)
#
# ```
# h   = LN1(x + attention(x))
# out = LN2(h + FFN(h))
# ```
#
# The attention is lesson 06's multi-head attention **with biases**: `q = x w_q + b_q` (and
# likewise `k`, `v`), split into `n_heads` heads, scaled dot-product attention, heads merged,
# then `@ w_o + b_o`.
#
# **Exercise 3 (5 points).** Write `encoder_block(x, params, n_heads, norm_first=True, mask=None)`
# for `x (B, T, D)`, using your `layer_norm` and `feed_forward`. `params` holds the LayerNorms'
# epsilon too, as `params["eps"]`: layers are built with different values (the check and the
# hidden tests use several), so read it from there. The heads are laid out as in lesson 06:
# `(B, T, D)` → `(B, H, T, D/H)`, head `h` holding features `h·D/H … (h+1)·D/H − 1` of every
# token, and merged back from `(B, H, T, D/H)` to `(B, T, D)` the same way. `mask` is boolean,
# broadcastable to the scores `(B, H, T, T)`, **True = may attend**; a padding mask for reviews
# of different lengths has shape `(B, 1, 1, T)`. You may use
# `helpers.attention.scaled_dot_product_attention(q, k, v, mask)`, which returns
# `(output, weights)`. (PyTorch's layer takes the opposite convention —
# `src_key_padding_mask` is True at **padding** — and the check inverts it for you.)

# %% nbgrader={"grade": false, "grade_id": "encoder_block", "locked": false, "schema_version": 3, "solution": true}
def encoder_block(x, params, n_heads, norm_first=True, mask=None):
    """One Transformer encoder layer: x (B, T, D) -> (B, T, D)."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    p = params

    def attend(h):
        def split(t):  # (B, T, D) -> (B, H, T, D/H)
            return t.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)

        q, k, v = (split(h @ p[f"w_{n}"] + p[f"b_{n}"]) for n in "qkv")
        out, _ = scaled_dot_product_attention(q, k, v, mask)     # (B, H, T, D/H)
        return out.transpose(1, 2).reshape(B, T, D) @ p["w_o"] + p["b_o"]

    def ln(h, i):
        return layer_norm(h, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])

    def ffn(h):
        return feed_forward(h, p["w1"], p["b1"], p["w2"], p["b2"])

    if norm_first:
        x = x + attend(ln(x, 1))
        return x + ffn(ln(x, 2))
    x = ln(x + attend(x), 1)
    return ln(x + ffn(x), 2)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "encoder_block_tests", "locked": true, "points": 5, "schema_version": 3, "solution": false}
check_encoder_block(encoder_block)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(encoder_block, check_encoder_block, "encoder_block")
# The calls below use the course's layer_norm and feed_forward, as the check does: one mistake, one charge.
from helpers.checks import course_callees

_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed, (_b, _t, _d, _h, _f) in zip(fresh_seeds(2), [(2, 7, 12, 3, 20), (4, 3, 16, 4, 64)]):
    # eps from 0.01 to 0.2: one not read from params shows
    check_encoder_block(encoder_block, seed=_seed, batch=_b, length=_t, d_model=_d, n_heads=_h,
                        d_ff=_f, eps=float(10 ** _rng.uniform(-2, np.log10(0.2))), verbose=False)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=False,
                                        layer_norm_eps=float(_rng.uniform(0.01, 0.1))).double()
_x = torch.from_numpy(_rng.normal(size=(2, 6, 16)))
_causal = torch.ones(6, 6, dtype=torch.bool).tril()  # a (T, T) mask, broadcast over batch and heads
with quiet(), course_callees(encoder_block, "layer_norm", "feed_forward", verbose=False):
    _got = encoder_block(_x, encoder_params(_layer), 4, norm_first=False, mask=_causal)
expect_close(_got, run_layer(_layer, _x, _causal), "encoder_block (post-norm, default init, "
             f"eps={_layer.norm1.eps:.3g}, causal (T, T) mask) against nn.TransformerEncoderLayer")
### END HIDDEN TESTS

# %% [markdown]
# ## Post-norm or pre-norm? Train both
#
# In post-norm every LayerNorm sits **on** the residual path, so the gradient reaching a low
# layer passes through all the LayerNorms above it. In pre-norm the path `x → x + … → x + …` is a
# clean identity, as in a ResNet. Xiong et al. (2020) showed that at initialisation post-norm's
# gradients are largest for the layers near the output, and argued that this is why post-norm
# Transformers need a learning-rate **warm-up** — small steps at first — while pre-norm ones can
# start at full rate.
#
# Here that claim is put to a test small enough to ship. The job: read 10 random tokens (16
# symbols) and write them out reversed, one answer per position — every answer must be fetched
# from another position, so attention has to work. The model: a stack of **12** encoder layers
# (`nn.TransformerEncoderLayer`, width 32, 4 heads, dropout 0), post-norm or pre-norm. Each is
# trained for 200 steps with Adam at learning rate 5·10⁻³, either at full rate from the first step
# or with a warm-up that raises the rate linearly over the first 50 steps; every combination with
# **3 seeds**. Training all twelve runs takes a few minutes, so the results ship in
# `data/norm_warmup/` (the command that makes them again: `python -m experiments.norm_warmup`).
#
# Left: the training loss, the line the median of the seeds and the band their range. Right: the
# gradient norm of each layer's weights at step 0, before any update (no warm-up has acted yet).

# %%
runs = norm_warmup.load_results()
norm_warmup.plot_norm_warmup(runs)
plt.show()
guessing = np.log(runs["config"]["vocab"])
print(f"guessing gives a loss of ln {runs['config']['vocab']} = {guessing:.2f}\n")
for name, ranges in norm_warmup.summary(runs).items():
    reached = [norm_warmup.steps_to(r) for r in norm_warmup.runs_of(runs, name)]
    when = ("never below 0.5 in 200 steps" if all(t is None for t in reached) else
            "below 0.5 after " + ", ".join("never" if t is None else f"{t}" for t in reached) + " steps")
    (l_lo, l_hi), right = ranges["final loss"], cls_reading.percent_range(ranges["accuracy"])
    print(f"{name:>22}: final loss {l_lo:.3f}–{l_hi:.3f}, tokens right {right} ({when}, seeds "
          + "/".join(str(r["seed"]) for r in norm_warmup.runs_of(runs, name)) + ")")
print()
step0 = {name.split(",")[0]: np.array([r["step0_gradients"] for r in norm_warmup.runs_of(runs, name)])
         for name in ("post-norm, no warm-up", "pre-norm, no warm-up")}  # (seeds, layers) each
for name, grads in step0.items():
    print(f"{name:>9} at step 0: layer 1 {grads[:, 0].min():.3f}–{grads[:, 0].max():.3f}, "
          f"layer {grads.shape[1]} {grads[:, -1].min():.3f}–{grads[:, -1].max():.3f}")
ratio = step0["post-norm"] / step0["pre-norm"]  # (seeds, layers), the same seed's two stacks
print(f"post-norm / pre-norm, layer by layer: {ratio.min():.1f}–{ratio.max():.1f}×; at layer 1 "
      f"{ratio[:, 0].min():.1f}–{ratio[:, 0].max():.1f}×, at layer {ratio.shape[1]} "
      f"{ratio[:, -1].min():.1f}–{ratio[:, -1].max():.1f}×")

# %% [markdown]
# What was measured, and what it shows. At this depth and learning rate, post-norm started at
# full rate never left the guessing loss in any of the three seeds; the same post-norm stack with
# a 50-step warm-up got nearly every token right, and pre-norm learned the task with or without a
# warm-up (the same on PyTorch's plainest kernels, `data/norm_warmup/default_kernels/`). Before
# the first update the difference was modest (the right panel and the last lines): post-norm's
# gradients were larger than pre-norm's in every layer, by more near the output than near the
# input, while pre-norm's were of similar size throughout. Smaller gradients are not a virtue in
# themselves, and the step-0 picture alone would not have predicted that one variant fails: the
# failure shows only in training, when full-size steps hit the post-norm stack before it has
# settled — which is the job a warm-up does. Keep the scale in mind: one task, one learning rate, 12 layers and
# 200 steps, and a learning rate chosen high on purpose. It shows that post-norm tolerates a
# smaller learning rate at the start than pre-norm, not that post-norm never trains without a
# warm-up; where exactly each one breaks down was not searched for.

# %% [markdown]
# ## Encoder and decoder
#
# The original Transformer is an **encoder–decoder** for translation. The encoder is a stack of
# the layers you just wrote, with self-attention over the source sentence. Each **decoder** layer
# has three sub-layers:
#
# 1. **masked self-attention** over the target words generated so far (a causal mask: word `i`
#    cannot peek at the answer);
# 2. **cross-attention**: queries from the decoder, keys and values from the encoder's output —
#    which source words matter for the word being written now?
# 3. the FFN,
#
# each wrapped in a residual and a LayerNorm. (GPT-style language models keep only the first and
# the last — a *decoder-only* stack of masked self-attention and FFN, with no encoder — and train
# with dropout, which this lesson leaves at 0; lesson 11 builds such a model and trains it.) The
# course's reference
# `helpers.block.decoder_block(y, memory, params, n_heads, norm_first, mask)` is built from the
# pieces of this lesson and lesson 06. Copy the weights of a PyTorch decoder layer into it and
# compare, with a causal mask on the target (5 words) and an encoder output of 7 source tokens:

# %%
torch.manual_seed(0)
decoder = nn.TransformerDecoderLayer(16, 4, 64, dropout=0.0, batch_first=True)  # post-norm, as the original
target_so_far, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)             # (B, T, D), (B, S, D)
causal = torch.ones(5, 5, dtype=torch.bool).tril()                                # True = may attend
with torch.no_grad():
    ours = decoder_block(target_so_far, memory, decoder_params(decoder), 4, mask=causal)
    theirs = decoder(target_so_far, memory, tgt_mask=~causal)                      # nn: True = blocked
print("largest difference to nn.TransformerDecoderLayer:", (ours - theirs).abs().max().item())

# %% [markdown]
# The **base model** of Vaswani et al. (2017) stacks 6 encoder and 6 decoder layers with
# `D = 512`, 8 heads and `F = 2048`: 65 M parameters, trained in 12 hours on 8 GPUs. Counting
# them (the layers as `nn.Transformer` holds them, plus one embedding matrix shared by source,
# target and output, over a vocabulary of about 37,000 tokens):

# %%
count = transformer_parameters(d_model=512, d_ff=2048, n_encoder=6, n_decoder=6, vocab=37_000)
for part, n in count.items():
    print(f"{part:>10}: {n / 1e6:5.1f} M")

# %% [markdown]
# Close to the paper's 65 M; the rest depends on the exact vocabulary and details the paper does
# not list.

# %% [markdown]
# ### A decoder at work
#
# A model 65 M parameters large is out of reach here; one that reverses digit strings is not.
# `experiments.decoding` trains a tiny encoder–decoder — one pre-norm encoder layer, one pre-norm
# decoder layer, width 32, 4 heads — to turn a source of 8 digits into the same digits reversed.
# It is trained with **teacher forcing**: the decoder reads the right answer shifted by one
# (a start symbol first) under a causal mask, so all 8 positions learn in one parallel pass —
# something an RNN decoder cannot do. Three seeds ship in `data/reverse/` (the command:
# `python -m experiments.decoding`, a minute or two).
#
# Generating is different: the answer is not known, so the decoder writes one digit at a time and
# reads its own output back. `decoding.greedy_decode` runs the shipped weights through the
# course's references: the encoder once, then each step feeds the newest digit, appends its key
# and value to each layer's **cache** (lesson 04), computes one query row against the cache and
# one cross-attention row against the encoder's output, and keeps the most likely digit.
# `greedy_decode_uncached` recomputes the whole target at every step instead; both must agree.

# %%
reverse_runs = decoding.load_results()
source, target = decoding.test_pairs()
reverser = decoding.load_reverser(seed=0)
with threads(1):
    fast = decoding.greedy_decode(reverser, source)
    slow = decoding.greedy_decode_uncached(reverser, source[:200])  # the slow way on a sample
print("cached and uncached decoding give the same digits on the first 200 strings:",
      torch.equal(fast.tokens[:200], slow.tokens))
print(f"query rows computed by the decoder's self-attention per string: {fast.query_rows} with the cache, "
      f"{slow.query_rows} without")
for i in range(3):
    print(f"source {source[i].tolist()} -> decoded {fast.tokens[i].tolist()}")
ranges = {key: cls_reading.percent_range([r["greedy"][key] for r in reverse_runs["runs"]])
          for key in ("tokens", "sequences")}
print(f"\nover {len(source):,} test strings and seeds {[r['seed'] for r in reverse_runs['runs']]}: "
      f"{ranges['tokens']} of the digits and {ranges['sequences']} of the whole strings right "
      f"(seed 0 recomputed here: {decoding.accuracy(fast.tokens, target)['sequences']:.1%})")

# %% [markdown]
# Where does each step read? The cross-attention weights of the first test string, averaged over
# the 4 heads: step 1 should need the last source digit, step 2 the one before, and so on. Below
# the picture, the same question over all the test strings.

# %%
decoding.plot_cross_attention(fast, source, index=0)
plt.show()
mean_heads = fast.cross_weights.mean(dim=1)  # (N, T, S): each step's weights over the source digits
steps = torch.arange(mean_heads.shape[1])
mirror = mean_heads.shape[2] - 1 - steps  # the source position step t needs: the t-th from the end
on_mirror = mean_heads[:, steps, mirror]  # (N, T)
print(f"over {len(source):,} strings and {len(steps)} steps: the mirrored source digit gets "
      f"{on_mirror.mean():.0%} of the weight on average (range over steps "
      f"{on_mirror.mean(0).min():.0%}–{on_mirror.mean(0).max():.0%}) and is the most-read digit at "
      f"{(mean_heads.argmax(-1) == mirror).float().mean():.0%} of the steps")

# %% [markdown]
# ## What the trained models look at
#
# Lesson 01 trained three sentiment classifiers on the course-review task: a plain RNN, an LSTM
# and a 2-layer attention model (pre-norm encoder layers, 4 heads, answer read at [CLS]). Their
# weights ship in `data/sentiment/`. To read the attention weights we recompute the attention
# model with the course's `encoder_layer` — the reference of your exercise 3 — from its
# parameters, and first make sure the recomputation gives the model's own logits (on 200 test reviews):

# %%
models = inspect_models.load_models(seed=0)
test = sentiment.test_sets()["fillers_4"]  # 4 filler phrases and a distractor clause
ids, lengths = sentiment.encode(test.sentences[:200], add_cls=True)  # a sample is enough to compare
logits, maps = inspect_models.attention_forward(models["attention"], ids, lengths)
with torch.no_grad():
    print("largest difference to the model's logits:",
          (logits - models["attention"](ids, lengths)).abs().max().item())
print("attention maps:", [tuple(m.shape) for m in maps], "(B, H, T, T) per layer")

# %% [markdown]
# Below: one review from the test sets, with [CLS]'s attention on each word in every head of both
# layers (numbers in %; what [CLS] keeps for itself is left out), and the probability of
# "positive" that the LSTM and the plain RNN give after each word (each model run on every prefix
# of the review). In the widget, pick an example or type your own review from the task's 89
# words; it opens on every head, and can show one head or the mean of the heads. (Where widgets
# do not run, the widget shows the first example's picture.)

# %%
view = inspect_models.sentence_view(inspect_models.EXAMPLES[2], models)
inspect_models.plot_sentence_view(view)
plt.show()

# %% tags=["hide-in-slides"]
display(inspect_models.attention_explorer(models))

# %% [markdown]
# A word outside the vocabulary gets a message, not a crash:

# %%
try:
    inspect_models.sentence_view("the lectur was gud", models)
except ValueError as err:
    print(err)

# %% [markdown]
# ### Measured over a test set, for all three seeds
#
# One review shows little. Over the 1,000 reviews of the `fillers_4` test set, and for the model of
# each of the three training seeds, we measure [CLS]'s row of weights in every layer and head in
# two ways that answer different questions:
#
# - **sharpness** — the largest single weight in the row: 100% means everything on one token,
#   *whichever* token that is;
# - **share on the deciding word** — the weight on the word that decides the label: the negation
#   when the adjective is negated, else the adjective.
#
# The bars split each head's weight by the role of the word it lands on ([CLS] itself, the first
# word, the negation, the deciding adjective, the distractor's adjective, any other word); the
# black tick is the sharpness.
#
# Three models over 1,000 reviews, and below one head removed from each, take a few seconds that
# every run of this notebook would pay again, so the measurements ship in `data/cls_reading/`
# (`python -m experiments.cls_reading` makes them again). `cls_reading.readings("fillers_4")`
# measures them here, if you want to watch it happen.

# %%
readings = cls_reading.load_readings()  # the same as cls_reading.readings("fillers_4")
cls_reading.plot_readings(readings)
plt.show()
for reading in readings:
    print("\n".join(cls_reading.reading_rows(reading)), end="\n\n")

# %% [markdown]
# A head that puts nearly everything on the same position whatever the review says is called a
# **sink**; the one found here rests on the first word, which never decides anything. Lesson 06
# removed each head in turn; below, the same removal for every sink, and for each layer the head
# that reads the deciding word most.

# %%
# removal_cost(model, layer, head, lesson 06's four test sets), measured for every sink and shipped
removals = cls_reading.load_sink_removals()
for reading in readings:
    for layer, head in reading.sinks():
        share = max(reading.share("first word")[layer, head], reading.share("[CLS]")[layer, head])
        cost = removals[(reading.seed, layer, head)]
        print(f"seed {reading.seed}: layer {layer + 1} head {head} is a sink ({share:.0%} on one position); "
              f"removing it costs {max(cost.values()):.1f} points at most on lesson 06's test sets")
    if not reading.sinks():
        print(f"seed {reading.seed}: no sink head (none puts ≥ {cls_reading.SINK_SHARE:.0%} on the first word or [CLS])")
print()
for layer in range(2):
    best = [cls_reading.best_heads(r)[layer] for r in readings]
    sharp = [r.sharpness[layer] for r in readings]
    print(f"layer {layer + 1}: sharpness of the heads {cls_reading.percent_range(np.concatenate(sharp))} "
          f"over seeds and heads; the best head on the deciding word puts "
          + ", ".join(f"{share:.0%} (seed {r.seed}, head {h})" for r, (h, share, _) in zip(readings, best))
          + " there")
negated = [r.share("negation")[0] + r.share("adjective")[0] for r in readings]  # (H,) per seed
print("layer 1, the most on negation + adjective together: "
      + ", ".join(f"{n.max():.0%} (seed {r.seed}, head {int(n.argmax())})" for r, n in zip(readings, negated)))

# %% [markdown]
# What the numbers say (a test checks each of these sentences against the shipped models):
#
# - **Sharp is not the same as right.** In seed 0 every layer-1 head is sharp, yet none puts half
#   its weight on the deciding word. One of them, head 1, is the sink: it puts all its weight on
#   the first word — and removing it, as lesson 06 did, costs almost nothing (the printed line
#   above). The other seeds have no sink head.
# - **The seeds disagree.** In seed 0 the deciding word is read, partly, in layer 1; in seed 2
#   layer 1's head 1 spreads most of its weight over the negation *and* the adjective together; in
#   seed 1 layer 1 is mostly diffuse — in three heads the largest weight averages under a third —
#   and its one sharp head puts about half its weight on the adjective and none on the negation
#   that may flip it. Seed 1's reading happens in
#   layer 2, where three heads put nearly all their weight on the deciding word.
# - **No layer-1 head of any seed puts 90% on the deciding word.** Where a head does (seed 1,
#   layer 2), the position it reads has already mixed in its neighbours in layer 1, so "it looks
#   at `not`" is a statement about a position, not about a word.
# - The mean over heads hides all of this: it averages a sink with a reader. That is why the
#   explorer opens on every head.
# - A map tells you which positions one layer mixes in — a **read**, not a derivation of the
#   answer: the values, the FFNs, the residual stream and the other layers all take part. Attention weights
#   can be changed a lot without changing a prediction (Jain & Wallace, 2019), and whether they
#   "explain" depends on what you ask of an explanation (Wiegreffe & Pinter, 2019). Test a map's
#   hint by intervening — removing the head, as lesson 06 did, or the word.
# - The LSTM's probability jumps when the deciding words arrive and then stays put across the
#   fillers; the plain RNN's hovers near 0.5, as its accuracy in lesson 01 said.

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=07_transformer` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** A short review is padded with zero vectors to the length of a long one, and the two are
# normalised in one batch. Compared with the short review normalised alone, without padding,
# LayerNorm's output for one of its words…
#
# - (a) changes: the batch statistics include the long review
# - (b) changes: its sentence's statistics include the padding
# - (c) stays the same only if the padding is masked first
# - (d) stays the same: it uses only the word's own features

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "d", "LayerNorm normalises each token over its own D features: no other token, padded "
             "or not, and no other sequence of the batch enters its mean and variance, so "
             "there is nothing to mask. Statistics over the batch or over the tokens are "
             "BatchNorm's way")
### END HIDDEN TESTS

# %% [markdown]
# **2.** In a pre-norm layer, which expression is computed for the attention sub-layer?
#
# - (a) `x + attention(LayerNorm(x))`
# - (b) `LayerNorm(x + attention(x))`
# - (c) `LayerNorm(attention(x))`
# - (d) `x + LayerNorm(attention(x))`

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "a", "pre-norm normalises the sub-layer's input and leaves the residual path x + … "
             "untouched; (b) is post-norm, the original Transformer's, (c) has no residual "
             "path, and (d) normalises the sub-layer's output instead of its input")
### END HIDDEN TESTS

# %% [markdown]
# **3.** In a decoder's cross-attention, the queries come from … and the keys and values from …
#
# - (a) the encoder's output; the decoder
# - (b) the decoder; the encoder's output
# - (c) the decoder; the decoder, under a causal mask
# - (d) the decoder; the encoder's input embeddings

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "b", "the word being written asks (query) which source words matter; the encoder's "
             "output — the source after every encoder layer — offers the keys and hands over "
             "the values. Queries, keys and values all from the decoder are its masked "
             "self-attention")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - A Transformer layer = multi-head attention (mixes tokens) + a position-wise FFN (each token
#   alone, inner width 4·D, ReLU in the original, GELU in BERT/GPT/ViT), each with a residual and
#   a LayerNorm.
# - LayerNorm normalises each token over its features with the biased variance, then scales by
#   `γ` and shifts by `β`; it never looks at the batch.
# - Post-norm `LN(x + f(x))` (original, BERT) vs pre-norm `x + f(LN(x))` (GPT-2, ViT): pre-norm
#   keeps an identity residual path. Measured here on 12-layer stacks, three seeds: at a high
#   learning rate post-norm learned only with a warm-up, pre-norm with or without; at step 0
#   post-norm's gradients were somewhat larger, most near the output (Xiong et al., 2020).
# - A decoder layer adds masked self-attention and cross-attention (queries from the decoder,
#   keys and values from the encoder); it is trained in parallel with teacher forcing and
#   generates one token at a time, reusing a key/value cache. The base model had 6 + 6 layers and
#   65 M parameters.
# - In the trained sentiment models, how sharp a head is and whether it reads the deciding word
#   are separate questions: heads can be sharp on a sink, the seeds read the label in different
#   layers, and attention maps show where a layer reads, not the whole computation.
#
# **Next:** lesson 08 counts what attention costs, and how to pay less.
#
# **References.**
# Ba, J. L., Kiros, J. R., & Hinton, G. E. (2016). Layer normalization. arXiv:1607.06450. ·
# Hendrycks, D., & Gimpel, K. (2016). Gaussian error linear units (GELUs). arXiv:1606.08415. ·
# Jain, S., & Wallace, B. C. (2019). Attention is not explanation. NAACL. ·
# Vaswani, A., et al. (2017). Attention is all you need. NeurIPS. ·
# Wiegreffe, S., & Pinter, Y. (2019). Attention is not not explanation. EMNLP. ·
# Xiong, R., Yang, Y., He, D., et al. (2020). On layer normalization in the Transformer
# architecture. ICML.
