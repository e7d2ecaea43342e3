# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · A small GPT from the course's parts
#
# **Promise:** by the end you have trained a decoder-only Transformer — built from the causal
# mask, the positions, the heads and the pre-norm block of lessons 04–07 — with your own training
# step, made it write, and measured what its key/value cache costs and how grouped-query
# attention shrinks the bill.
#
# **You will**
# - turn a text into next-character targets (exercise 1) and write the language-model loss
#   (exercise 2);
# - assemble the model's forward pass from the course's parts (exercise 3);
# - write a learning-rate schedule with warm-up and cosine decay (exercise 4) and one training
#   step with gradient clipping (exercise 5), then train the model here, on this CPU;
# - compare your run with a longer one over three seeds, shipped with the course;
# - draw the next character with a temperature and top-k (exercise 6), and generate with a
#   key/value cache that gives exactly what recomputing gives;
# - count the cache's bytes (exercise 7) and share key/value heads between query heads
#   (exercise 8), and measure how much that saves.
#
# **Time:** about 70 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from experiments import tiny_gpt
from helpers import gpt
from helpers.block import encoder_block, layer_norm
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.checks.gpt import (
    check_gpt_logits,
    check_kv_cache_bytes,
    check_lm_loss,
    check_lr_at,
    check_repeat_kv,
    check_sample_next,
    check_shift_targets,
    check_train_step,
)
from helpers.masking import causal_mask
from helpers.positional import sinusoidal_encoding
from helpers.quiz import check_choice, grade_choice
from helpers.runtime import threads

torch.set_printoptions(precision=3, sci_mode=False)
np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## From a classifier to a writer
#
# Lesson 01's models read a review and gave one number. A **language model** reads a text and,
# at every position, gives a probability for each possible next token. Trained on enough text,
# that is all GPT is: a decoder-only Transformer — no encoder, no cross-attention — whose
# self-attention is causal: position `t` sees tokens `0 … t`. To write, it predicts a token,
# appends it, and reads its own output back.
#
# Our tokens are **characters**, and our text is one every copy of the course has: the prose of
# lessons 01–10, shipped in `data/tiny_gpt/corpus.txt`. It is the course's own writing, under
# the course's MIT licence. The last 10% is held out to **validate**: a loss measured on text the
# model never trained on.

# %%
corpus = gpt.load_corpus()
print(f"{len(corpus.text):,} characters, {corpus.vocab} different ones; "
      f"{len(corpus.train):,} to train on, {len(corpus.val):,} held out")
print(repr(corpus.text[2000:2200]))
ids = corpus.encode("attention")
print("'attention' as ids:", ids.tolist(), "->", repr(corpus.decode(ids)))

# %% [markdown]
# Three yardsticks, in nats per character (the unit of the loss below): guessing uniformly
# among the characters; knowing only how often each character occurs; and a table of how often
# each character follows each other one — a model that reads one character of context. A
# Transformer that reads 32 or 64 characters should beat all three.

# %%
baselines = {"uniform guess": math.log(corpus.vocab), "characters' frequency": gpt.unigram_loss(corpus),
             "previous character (bigram table)": gpt.bigram_loss(corpus)}
for name, value in baselines.items():
    print(f"{name:>35}: {value:.3f} nats per character")

# %% [markdown]
# ## Next-token targets
#
# Training reads windows of `T + 1` consecutive ids. From each window the model gets the first
# `T` as input, and at every position `t` it is scored on the token that comes **next**: one
# window gives `T` lessons at once, all computed in one parallel pass.
#
# **Exercise 1 (2 points).** Write `shift_targets(tokens)`: `tokens` is a torch long tensor
# `(B, T+1)`; return `(inputs, targets)`, both `(B, T)`, with `targets[:, t]` the token that
# follows `inputs[:, t]` in the window.

# %% nbgrader={"grade": false, "grade_id": "shift_targets", "locked": false, "schema_version": 3, "solution": true}
def shift_targets(tokens):
    """(B, T+1) ids -> (inputs (B, T), targets (B, T)), targets[:, t] = tokens[:, t + 1]."""
    ### BEGIN SOLUTION
    return tokens[:, :-1], tokens[:, 1:]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "shift_targets_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_shift_targets(shift_targets)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(shift_targets, check_shift_targets, "shift_targets")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(3):
    check_shift_targets(shift_targets, seed=_seed % 10_000, batch=int(_rng.integers(2, 6)),
                        length=int(_rng.integers(3, 40)), verbose=False)
_tokens = torch.from_numpy(_rng.choice(50, size=(1, 2), replace=False))  # T = 1; two distinct ids
with quiet():
    _x, _y = shift_targets(_tokens)
assert _x.tolist() == [[_tokens[0, 0].item()]] and _y.tolist() == [[_tokens[0, 1].item()]], \
    "shift_targets of a (1, 2) window must give one input and its target"
### END HIDDEN TESTS

# %% [markdown]
# ## The loss: cross-entropy on the next token
#
# The model's output at each position is a vector of `V` **logits**; softmax turns them into
# probabilities. The loss at one position is `−log p(target)`, in nats; the loss of a batch is
# the **mean** over its `B · T` positions, so that its size — and the step it causes — does not
# depend on the batch or the window length. Guessing uniformly costs `ln V`.
#
# **Exercise 2 (2 points).** Write `lm_loss(logits, targets)`: `logits (B, T, V)` float,
# `targets (B, T)` long; return a scalar tensor, the mean cross-entropy in nats over every
# position, through which gradients flow. `F.cross_entropy` expects the classes in dimension 1
# of a 3-D input; a `(B·T, V)` matrix and `(B·T,)` targets avoid the question.

# %% nbgrader={"grade": false, "grade_id": "lm_loss", "locked": false, "schema_version": 3, "solution": true}
def lm_loss(logits, targets):
    """Mean cross-entropy in nats: logits (B, T, V), targets (B, T) long -> scalar tensor."""
    ### BEGIN SOLUTION
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "lm_loss_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_lm_loss(lm_loss)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(lm_loss, check_lm_loss, "lm_loss")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(3):
    check_lm_loss(lm_loss, seed=_seed % 10_000, batch=int(_rng.integers(1, 5)), length=int(_rng.integers(2, 9)),
                  vocab=int(_rng.integers(10, 70)), verbose=False)
_logits = torch.from_numpy(_rng.normal(size=(2, 3, 5)) * 40)  # confident logits: a naive softmax overflows
_targets = torch.from_numpy(_rng.integers(0, 5, size=(2, 3)))
with quiet():
    _got = lm_loss(_logits, _targets)
expect_close(_got, gpt.lm_loss(_logits, _targets), "lm_loss of logits of size ±100 (use log_softmax, not log(softmax))",
             rtol=1e-4)
### END HIDDEN TESTS

# %% [markdown]
# **Think (2 points, graded by hand).** Training scores all `T` positions of a window in one
# parallel pass; writing produces one character at a time. Suppose the causal mask were left out
# of the model. What would happen to the **training** loss, and what would happen when the
# trained model **writes** text? Explain both in two or three sentences.

# %% [markdown] nbgrader={"grade": true, "grade_id": "no_mask", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# One point each:
# - training: position t could attend to position t + 1, which holds its own target (the inputs
#   are the targets shifted by one), so the model learns to copy it and the training (and
#   validation) loss falls towards 0 — it measures copying, not prediction.
# - writing: at generation time the next token does not exist yet (there is nothing after the
#   last position to copy), so the model meets inputs unlike anything it trained on; it has not
#   learned to predict, and its text is poor — the low training loss was an illusion.
# === END MARK SCHEME ===

# %% [markdown]
# ## The model, from the course's parts
#
# | part | what it does | from |
# |---|---|---|
# | token embedding `tok_emb (V, D)`, times `√D` | one learned row per character | Vaswani et al. |
# | `sinusoidal_encoding(T, D)` added | where each character is | lesson 05 |
# | `causal_mask(T)` | position `t` reads `0 … t` only | lesson 04 |
# | pre-norm block `x + attention(LN(x))`, `x + FFN(LN(x))` | multi-head self-attention, then the FFN | lessons 06, 07 |
# | final LayerNorm `ln_f` | a pre-norm stack's residual path is normalised once, at the end | GPT-2 |
# | logits `x @ tok_emb.T` | the embedding matrix reads the output too ("tied") | GPT-2 |
#
# `helpers.gpt.TinyGPT` is this model as a `torch.nn.Module`. Its blocks call the course's
# `layer_norm`, `feed_forward`, `split_heads`, `merge_heads` and `scaled_dot_product_attention`;
# it adds **dropout** where GPT-2 has it — on the embeddings, on the attention weights, and on
# each sub-layer's output before it joins the residual path — a regulariser active in training
# only (`model.train()`), off when the model is evaluated (`model.eval()`). GPT uses learned
# positions and GELU; here lesson 05's sinusoids and lesson 07's ReLU do the same jobs. As in the
# original Transformer (Vaswani et al., 2017), the embedding rows start small — their entries have
# variance `1/D`, so that the logits they read out start near unit size — and are multiplied by
# `√D` before the positions are added: otherwise each token's own signal would be about `√D`
# times weaker than its position's.
# `model.params()` hands out its weights as plain tensors: `tok_emb`, `ln_f_gamma`,
# `ln_f_beta`, and `blocks`, one dict per block with the keys of lesson 07's `encoder_params`.

# %%
config = gpt.GPTConfig(vocab=corpus.vocab, block_size=32, d_model=64, n_heads=4, n_layers=2, dropout=0.1)
torch.manual_seed(0)
model = gpt.TinyGPT(config)
print(config)
print(f"{gpt.n_parameters(model):,} parameters; the keys of one block:", sorted(model.params()["blocks"][0]))

# %% [markdown]
# **Exercise 3 (3 points).** Write `gpt_logits(tokens, params, n_heads)`: the model's logits
# `(B, T, V)` for `tokens (B, T)` with no dropout, from the dict that `model.params()` returns.
# Use the course's parts, imported above: the embedding rows times `√D` plus
# `sinusoidal_encoding(T, D)`, `causal_mask(T)`, lesson
# 07's `encoder_block(x, p, n_heads, norm_first=True, mask=…)` for each block (its LayerNorms'
# epsilon is `p["eps"]`), `layer_norm(x, gamma, beta)`. Its result must equal the module's.

# %% nbgrader={"grade": false, "grade_id": "gpt_logits", "locked": false, "schema_version": 3, "solution": true}
def gpt_logits(tokens, params, n_heads):
    """Logits (B, T, V) of a TinyGPT with weights params, for ids tokens (B, T)."""
    ### BEGIN SOLUTION
    T, D = tokens.shape[1], params["tok_emb"].shape[1]
    x = params["tok_emb"][tokens] * math.sqrt(D) + sinusoidal_encoding(T, D)   # (B, T, D)
    mask = causal_mask(T)                                          # (T, T), True = may attend
    for p in params["blocks"]:
        x = encoder_block(x, p, n_heads, norm_first=True, mask=mask)
    x = layer_norm(x, params["ln_f_gamma"], params["ln_f_beta"])
    return x @ params["tok_emb"].T                                 # (B, T, V)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "gpt_logits_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_gpt_logits(gpt_logits)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(gpt_logits, check_gpt_logits, "gpt_logits")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(2):
    check_gpt_logits(gpt_logits, seed=_seed % 10_000, batch=int(_rng.integers(1, 4)),
                     length=int(_rng.integers(3, 12)), verbose=False)
_model = gpt.TinyGPT(gpt.GPTConfig(vocab=9, block_size=16, d_model=12, n_heads=3, n_layers=3, dropout=0.0)).eval()
_tokens = torch.from_numpy(_rng.integers(0, 9, size=(2, 10)))
with quiet(), torch.no_grad():
    _got = gpt_logits(_tokens, _model.params(), 3)
    expect_close(_got, _model(_tokens), "gpt_logits of a float32 TinyGPT with 3 layers of 3 heads", rtol=1e-3, atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# Your function and the module agree on the untrained model. Its loss before training is worth a
# look: is it near the uniform guess `ln V`?

# %%
model.eval()
inputs, targets = shift_targets(gpt.random_windows(corpus.val, 8, config.block_size + 1, torch.Generator().manual_seed(0)))
with torch.no_grad():
    yours = gpt_logits(inputs, model.params(), config.n_heads)
    print("largest difference to TinyGPT:", (yours - model(inputs)).abs().max().item())
    print(f"loss before training: {lm_loss(yours, targets).item():.3f} nats; ln V = {math.log(corpus.vocab):.3f}")
    same = (yours.argmax(-1) == inputs).float().mean().item()
    p_same = torch.softmax(yours, -1).gather(-1, inputs[..., None]).mean().item()
print(f"the likeliest next character is the one just read at {same:.0%} of the positions, "
      f"with probability {p_same:.2f} on average")

# %% [markdown]
# Worse than guessing: the untrained model bets heavily that each character repeats. That is the
# tied read-out at work. The embedding row of the character just read, times `√D`, dominates the
# residual stream of the untrained model, and the logits are the stream's dot products with the
# same embedding rows — so the largest one belongs to that same character. Training unlearns this
# in its first steps (the validation loss at step 0 below is this number).

# %% [markdown]
# ## Training: warm-up, cosine decay, clipping
#
# GPT-style training uses **AdamW** (Adam whose weight decay shrinks the weights directly), a
# learning rate that rises linearly from 0 during a short **warm-up** — Adam's early estimates
# of the gradients' size are noisy, and big early steps can throw a model somewhere it does not
# recover from (lesson 07 measured this for post-norm) — and then decays along a half cosine to a
# floor. Every step's gradient is **clipped**: when the norm of all gradients together exceeds
# `max_norm`, they are scaled down to it, so one unlucky batch cannot make a huge step.
#
# **Exercise 4 (2 points).** Write `lr_at(step, peak_lr, warmup_steps, total_steps, min_lr=0.0)`,
# the rate for a step counted from 0: `peak_lr · step / warmup_steps` while
# `step < warmup_steps` (so step 0 has rate 0); then a cosine from `peak_lr` down to `min_lr`,
# `min_lr + ½ (peak_lr − min_lr)(1 + cos(π · progress))` with `progress` running from 0 at
# `warmup_steps` to 1 at `total_steps`; `min_lr` after that. Return a Python float.

# %% nbgrader={"grade": false, "grade_id": "lr_at", "locked": false, "schema_version": 3, "solution": true}
def lr_at(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The learning rate of step (from 0): linear warm-up, then cosine decay to min_lr."""
    ### BEGIN SOLUTION
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    if step >= total_steps:
        return float(min_lr)
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + 0.5 * (peak_lr - min_lr) * (1 + math.cos(math.pi * progress))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "lr_at_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_lr_at(lr_at)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(lr_at, check_lr_at, "lr_at")
for _seed in fresh_seeds(3):
    check_lr_at(lr_at, seed=_seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_peak, _total = float(_rng.uniform(1e-4, 1.0)), int(_rng.integers(20, 500))
for _warmup in (0, int(_rng.integers(2, 20))):  # 0: no warm-up at all, the decay starts at step 0
    _got = [lr_at(_s, _peak, _warmup, _total, _peak / 10) for _s in range(_total + 3)]
    expect_close(np.array(_got, dtype=float),
                 [gpt.lr_at(_s, _peak, _warmup, _total, _peak / 10) for _s in range(_total + 3)],
                 f"lr_at with peak_lr={_peak:.3g}, warmup_steps={_warmup}, total_steps={_total}")
### END HIDDEN TESTS

# %% [markdown]
# The schedule of the run below, step by step:

# %%
STEPS, PEAK_LR, WARMUP, MIN_LR = 250, 3e-3, 25, 3e-4
fig, ax = plt.subplots(figsize=(5.5, 2.6))
ax.plot(range(STEPS + 20), [lr_at(s, PEAK_LR, WARMUP, STEPS, MIN_LR) for s in range(STEPS + 20)])
ax.set(xlabel="step", ylabel="learning rate", title=f"warm-up {WARMUP} steps, cosine to {MIN_LR:g} at step {STEPS}")
plt.show()

# %% [markdown]
# **Exercise 5 (3 points).** Write `train_step(model, inputs, targets, optimizer, max_norm=1.0)`:
# one optimisation step on `lm_loss(model(inputs), targets)`, with the gradients of all the
# model's parameters clipped together to the norm `max_norm` (PyTorch's
# `torch.nn.utils.clip_grad_norm_`) before the optimiser uses them. `loss.backward()` **adds** to
# whatever each parameter's `.grad` already holds, so make sure no gradient of an earlier step
# (or of anything else) leaks in. Return the loss computed before the step, as a Python float.

# %% nbgrader={"grade": false, "grade_id": "train_step", "locked": false, "schema_version": 3, "solution": true}
def train_step(model, inputs, targets, optimizer, max_norm=1.0):
    """One step on lm_loss(model(inputs), targets), gradients clipped to max_norm; the loss before it."""
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    logits = model(inputs)                                        # (B, T, V)
    loss = lm_loss(logits, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return loss.item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "train_step_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_train_step(train_step)
### BEGIN HIDDEN TESTS
from helpers.checks import course_callees  # noqa: E402
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(train_step, check_train_step, "train_step")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(2):
    check_train_step(train_step, seed=_seed % 10_000, vocab=int(_rng.integers(4, 12)), width=int(_rng.integers(2, 9)),
                     verbose=False)
# three steps of SGD with momentum on a small TinyGPT against the course's train_step, from one start
_seed = fresh_seeds(1)[0] % 10_000
_models = []
for _ in range(2):
    torch.manual_seed(_seed)
    _models.append(gpt.TinyGPT(gpt.GPTConfig(vocab=11, block_size=8, d_model=8, n_heads=2, n_layers=1,
                                             dropout=0.0)).double())
_opts = [torch.optim.SGD(_m.parameters(), lr=0.1, momentum=0.9) for _m in _models]
_batch = torch.from_numpy(_rng.integers(0, 11, size=(4, 9)))
_x, _y = gpt.shift_targets(_batch)
with quiet(), course_callees(train_step, "lm_loss", verbose=False):
    _mine = [train_step(_models[0], _x, _y, _opts[0], 0.05) for _ in range(3)]
_ref = [gpt.train_step(_models[1], _x, _y, _opts[1], 0.05) for _ in range(3)]
expect_close(np.array(_mine, dtype=float), _ref, "the losses of three SGD steps with max_norm=0.05")
expect_close(torch.cat([_p.detach().flatten() for _p in _models[0].parameters()]),
             torch.cat([_p.detach().flatten() for _p in _models[1].parameters()]),
             "a TinyGPT's weights after three SGD steps with max_norm=0.05")
### END HIDDEN TESTS

# %% [markdown]
# ### Train it
#
# The loop below is all of training: pick windows at random from the training text, set the
# learning rate of the step, take the step. Every 50 steps it measures the loss on 512 held-out
# windows of the validation text with dropout off. It uses your `shift_targets`, `lm_loss` (inside
# your `train_step`), `lr_at` and `train_step`, and one CPU thread: about ten seconds on an idle
# core, longer on a busy machine.

# %%
torch.manual_seed(0)
model = gpt.TinyGPT(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, weight_decay=0.1)
batches = torch.Generator().manual_seed(0)
val_windows = tiny_gpt.validation_batches(corpus, tiny_gpt.RunConfig(block_size=config.block_size))
losses, val_curve = [], []
with threads(1):
    for step in range(STEPS):
        if step % 50 == 0:
            val_curve.append((step, tiny_gpt.evaluate(model, val_windows)))
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, PEAK_LR, WARMUP, STEPS, MIN_LR)
        inputs, targets = shift_targets(gpt.random_windows(corpus.train, 32, config.block_size + 1, batches))
        losses.append(train_step(model, inputs, targets, optimizer, max_norm=1.0))
    val_curve.append((STEPS, tiny_gpt.evaluate(model, val_windows)))
val_loss = val_curve[-1][1]
print(f"{STEPS} steps; validation loss {val_curve[0][1]:.3f} -> {val_loss:.3f} nats per character")
for name, value in baselines.items():
    print(f"   {name:>35}: {value:.3f} — yours is {'below' if val_loss < value else 'not below'} it")

# %% [markdown]
# In 250 steps the model has gone from worse than guessing to below the frequency table: it has
# learned which characters are common, and more. Whether it also beats the bigram table after so
# few steps — which it can only do by reading more than the previous character — the last line
# says.
#
# ## The longer run, over three seeds
#
# The same recipe, longer: 1,200 steps with windows of 64 characters, three layers, the
# reference versions of your functions, seeds 0, 1 and 2 (each seed sets the initial weights,
# the dropout and the batches). It takes several minutes, so it ships in `data/tiny_gpt/` with
# the command that makes it again, `python -m experiments.tiny_gpt`.

# %%
runs = tiny_gpt.load_results()
tiny_gpt.plot_runs(runs)
plt.show()
cfg = runs["config"]
passes = cfg["steps"] * cfg["batch"] * cfg["block_size"] / runs["n_train"]
print(f"{runs['parameters']:,} parameters; {cfg['steps']:,} steps of {cfg['batch']} windows of {cfg['block_size']} "
      f"characters: {passes:.0f} passes over the {runs['n_train']:,} training characters")
for run in runs["runs"]:
    val = dict(run["val_loss"])
    below = {name: min(s for s, v in val.items() if v < runs[key])
             for name, key in (("frequency", "unigram_loss"), ("bigram", "bigram_loss"))}
    last = list(val.values())
    print(f"seed {run['seed']}: below the frequency line from step {below['frequency']}, below the bigram line from "
          f"step {below['bigram']}; validation loss at the end {last[-1]:.3f} (100 steps before: {last[-2]:.3f}); "
          f"training loss, mean of the last 50 steps: {np.mean(run['loss'][-50:]):.3f}")
finals = tiny_gpt.final_val_losses(runs)
print(f"the seeds end {max(finals) - min(finals):.3f} apart")

# %% [markdown]
# Read the curves with the yardsticks in mind. Every seed leaves the frequency line behind within
# the first hundred steps and the bigram line within three hundred: from there on, the model uses
# more than the previous character. The three seeds end within a few hundredths of each other,
# and their validation loss is still falling at the last step: a longer run would likely go lower.
# The training loss lies *above* the validation loss: it is measured with dropout on, the
# validation loss with dropout off — a model that had started to learn its small text by heart
# would show the opposite. What does it write? Each seed's sample, 300 characters after the
# prompt "Attention ", at temperature 0.8 and top-k 10 (the next section explains both):

# %%
for run in runs["runs"]:
    print(f"--- seed {run['seed']}\n{run['sample']}\n")

# %% [markdown]
# Common words of the course between invented ones, and in some samples Markdown's backticks,
# headings or list items — but no meaning. A model of this size that reads 64 characters
# learns spelling and the look of the text. GPT-2's smallest model has over a hundred million
# parameters, reads 1,024 tokens of subwords, and was trained on about 40 GB of web text
# (Radford et al., 2019).

# %% [markdown]
# ## Sampling: temperature and top-k
#
# To write, the model turns the logits of the last position into a choice. **Greedy** decoding
# takes the most likely token every time; it is deterministic and tends to repeat itself.
# **Sampling** draws from the distribution instead. Two knobs shape it:
#
# - **temperature** `τ`: draw from `softmax(logits / τ)`. `τ < 1` sharpens the distribution
#   towards the likeliest tokens, `τ > 1` flattens it; `τ → 0` approaches greedy decoding.
# - **top-k**: only the `k` largest logits keep a chance; the others get probability 0, and
#   the `k` survivors are renormalised. It cuts off the long tail of unlikely tokens that, drawn
#   once in a while, derail a text.
#
# **Exercise 6 (3 points).** Write `sample_next(logits, temperature=1.0, top_k=None,
# generator=None)`: `logits (B, V)` → `(B,)` long, one id per row drawn from
# `softmax(logits / temperature)` restricted to the row's `top_k` largest logits (all of them
# when `top_k` is None); `temperature == 0` returns each row's argmax. Draw with the `generator`
# you are given (`torch.multinomial(…, generator=generator)` or `torch.rand(…, generator=…)`),
# so that a seeded run can be repeated. The check draws many samples and compares their
# frequencies with the probabilities; any correct way of drawing passes.

# %% nbgrader={"grade": false, "grade_id": "sample_next", "locked": false, "schema_version": 3, "solution": true}
def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """(B, V) logits -> (B,) ids from softmax(logits / temperature) over the top_k largest."""
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / float(temperature)                                # (B, V), sharper for τ < 1
    if top_k is not None:
        kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]   # (B, 1)
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    probs = torch.softmax(logits, dim=-1)                               # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "sample_next_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_sample_next(sample_next)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(sample_next, check_sample_next, "sample_next")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(2):
    _v = int(_rng.integers(5, 9))
    check_sample_next(sample_next, seed=_seed % 10_000, vocab=_v, temperature=float(_rng.uniform(0.5, 0.8)),
                      top_k=int(_rng.integers(2, _v - 1)), verbose=False)
_logits = torch.from_numpy(_rng.normal(size=(6, 40)))
with quiet():
    _got = sample_next(_logits, temperature=0, generator=torch.Generator().manual_seed(0))
assert torch.equal(torch.as_tensor(_got), _logits.argmax(-1)), "temperature 0 must give each row's argmax"
with quiet():
    _got = sample_next(_logits, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(0))
assert torch.equal(torch.as_tensor(_got), _logits.argmax(-1)), "top_k=1 must always give the row's argmax"
### END HIDDEN TESTS

# %% [markdown]
# Your sampler on your own model and on a shipped one, from one prompt, at three settings (the
# shipped model reads 64 characters, so each line continues for 50):

# %%
shipped = tiny_gpt.load_model(seed=0)
prompt = corpus.encode("The mask ")[None]  # (1, T0)
for name, m in (("your model", model), ("shipped, seed 0", shipped)):
    for temperature, top_k in ((0, None), (0.8, 10), (1.5, None)):
        n_new = min(50, m.config.block_size - prompt.shape[1])
        out = gpt.generate(m, prompt, n_new, sample_next, temperature=temperature, top_k=top_k, seed=1)
        print(f"{name:>15}, τ = {temperature}, top-k {top_k}: {corpus.decode(out.tokens[0])!r}")

# %% [markdown]
# ## Generating with a key/value cache
#
# Lesson 04 wrote attention one query at a time against a growing cache. Generation is where it
# pays: at each new step the keys and values of every earlier position are already known — the
# causal mask guarantees that a new token changes nothing before it — so each block needs the
# query, key and value of the **newest** position only, and appends the new key and value to its
# cache. Without a cache, every step recomputes the whole sequence.
#
# `gpt.generate(…, cache=True)` does the first, `cache=False` the second. With the same seed
# and your sampler, they must write the same characters, and the logits of every step must agree
# to float rounding:

# %%
fast = gpt.generate(shipped, prompt, 50, sample_next, temperature=0.8, top_k=10, seed=3, cache=True)
slow = gpt.generate(shipped, prompt, 50, sample_next, temperature=0.8, top_k=10, seed=3, cache=False)
print("same characters with and without the cache:", torch.equal(fast.tokens, slow.tokens))
print("largest difference between their logits:", (fast.logits - slow.logits).abs().max().item())
start = prompt.shape[1]
fed_cached = start + 49  # the prompt once, then each new character once (the 50th is never fed back)
fed_uncached = sum(range(start, start + 50))  # the whole sequence at every step
print(f"positions run through the model: {fed_cached} with the cache, {fed_uncached:,} without")
print(repr(corpus.decode(fast.tokens[0])))

# %% [markdown]
# ## What the cache costs
#
# Every layer keeps a key and a value for every token of every sequence in the batch, in each of
# its key/value heads: `2 · n_layers · batch · n_tokens · n_kv_heads · d_head` numbers. For a
# small model that is nothing; for a large one it is what limits how many users and how long a
# context fit on one GPU.
#
# **Exercise 7 (1 point).** Write `kv_cache_bytes(n_layers, n_tokens, n_kv_heads, d_head,
# bytes_per_element=2, batch=1)`: the bytes of a full key/value cache (2 bytes per element is
# fp16). Return an `int`.

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes", "locked": false, "schema_version": 3, "solution": true}
def kv_cache_bytes(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    """Bytes of the cached keys and values of n_layers layers."""
    ### BEGIN SOLUTION
    return 2 * n_layers * batch * n_tokens * n_kv_heads * d_head * bytes_per_element
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "kv_cache_bytes_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_kv_cache_bytes(kv_cache_bytes)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(kv_cache_bytes, check_kv_cache_bytes, "kv_cache_bytes")
for _seed in fresh_seeds(3):
    check_kv_cache_bytes(kv_cache_bytes, seed=_seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
_args = [int(_a) for _a in _rng.integers(2, 100, size=6)]  # no factor of 1 hides a missing one
with quiet():
    _got = kv_cache_bytes(*_args[:4], bytes_per_element=_args[4], batch=_args[5])
assert _got == gpt.kv_cache_bytes(*_args), f"kv_cache_bytes{tuple(_args)} is {_got}, not {gpt.kv_cache_bytes(*_args)}"
### END HIDDEN TESTS

# %% [markdown]
# Measured, not only computed: the tensors in the shipped model's cache after 50 steps like the
# ones above (the prompt's 9 characters and 49 of the new ones went in; the 50th was drawn and not
# fed back), float32, batch 1:

# %%
c = shipped.config
fast = gpt.generate(shipped, prompt, 50, temperature=0.8, top_k=10, seed=3)  # the course's sampler this time
cached_tokens = fast.tokens.shape[1] - 1
print(f"measured: {fast.cache_bytes:,} bytes in the cache; kv_cache_bytes gives "
      f"{kv_cache_bytes(c.n_layers, cached_tokens, c.kv_heads, c.d_head, bytes_per_element=4):,}")
print(f"per token: {kv_cache_bytes(c.n_layers, 1, c.kv_heads, c.d_head, bytes_per_element=4):,} bytes = 2 · "
      f"{c.n_layers} layers · {c.d_model} numbers · 4 bytes")

# %% [markdown]
# Now a large model. Llama 2 70B (Touvron et al., 2023) has 80 layers, 64 query heads of width
# 128 (so `D = 8192`) and — the subject of the next section — only 8 key/value heads. In fp16,
# with a context of 4,096 tokens and 8 sequences in the batch:

# %%
full = kv_cache_bytes(80, 4096, 64, 128, batch=8)
grouped = kv_cache_bytes(80, 4096, 8, 128, batch=8)
print(f"per token: {kv_cache_bytes(80, 1, 64, 128) / 2**20:.2f} MiB with a key and value per query head, "
      f"{kv_cache_bytes(80, 1, 8, 128) / 2**20:.2f} MiB with 8 key/value heads")
print(f"4,096 tokens × 8 sequences: {full / 2**30:.0f} GiB against {grouped / 2**30:.0f} GiB "
      f"(the weights themselves: 70e9 × 2 bytes = {70e9 * 2 / 2**30:.0f} GiB)")

# %% [markdown]
# ## Grouped-query attention: fewer keys and values
#
# The cache holds one key and one value per **key/value head**. Multi-query attention (Shazeer,
# 2019) keeps a single key/value head shared by all query heads; grouped-query attention (Ainslie
# et al., 2023) keeps `H_kv` of them, each shared by a group of `n_rep = H / H_kv` consecutive
# query heads: query heads `0 … n_rep − 1` read key/value head 0, the next `n_rep` read head 1, and
# so on. The cache shrinks by `n_rep`; the queries keep all `H` heads. To attend, each key/value
# head is repeated `n_rep` times, copies side by side, to line up with the query heads.
#
# **Exercise 8 (2 points).** Write `repeat_kv(x, n_rep)`: `x (B, H_kv, T, d_h)` →
# `(B, H_kv · n_rep, T, d_h)` where head `h` of the result is head `h // n_rep` of `x`. It only
# copies: the result keeps `x`'s dtype.

# %% nbgrader={"grade": false, "grade_id": "repeat_kv", "locked": false, "schema_version": 3, "solution": true}
def repeat_kv(x, n_rep):
    """(B, H_kv, T, d_h) -> (B, H_kv * n_rep, T, d_h): head h is head h // n_rep of x."""
    ### BEGIN SOLUTION
    B, H_kv, T, d_h = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, T, d_h).reshape(B, H_kv * n_rep, T, d_h)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "repeat_kv_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_repeat_kv(repeat_kv)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

check_own_work(repeat_kv, check_repeat_kv, "repeat_kv")
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _seed in fresh_seeds(2):
    check_repeat_kv(repeat_kv, seed=_seed % 10_000, batch=int(_rng.integers(1, 4)), kv_heads=int(_rng.integers(2, 5)),
                    n_rep=int(_rng.integers(2, 5)), length=int(_rng.integers(1, 7)), d_head=int(_rng.integers(1, 9)),
                    verbose=False)
# against PyTorch's own grouped-query attention
_q = torch.from_numpy(_rng.normal(size=(2, 6, 5, 4)))
_k, _v = (torch.from_numpy(_rng.normal(size=(2, 2, 5, 4))) for _ in range(2))
with quiet():
    _out = F.scaled_dot_product_attention(_q, repeat_kv(_k, 3), repeat_kv(_v, 3), is_causal=True)
    expect_close(_out, F.scaled_dot_product_attention(_q, _k, _v, is_causal=True, enable_gqa=True),
                 "attention with repeat_kv(k, 3) against F.scaled_dot_product_attention(…, enable_gqa=True)")
### END HIDDEN TESTS

# %% [markdown]
# PyTorch's `F.scaled_dot_product_attention(…, enable_gqa=True)` takes fewer key/value heads than
# query heads and does the sharing itself; with your `repeat_kv` the plain call must agree:

# %%
torch.manual_seed(0)
q = torch.randn(1, 8, 6, 16)  # (B, H, T, d_h)
k, v = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)  # (B, H_kv, T, d_h): 4 query heads per key/value head
ours = F.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), is_causal=True)
theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
print("largest difference to enable_gqa=True:", (ours - theirs).abs().max().item())

# %% [markdown]
# And in a model: the shipped model's shape with 4, 2 and 1 key/value heads (1 is multi-query
# attention), your `repeat_kv` inside every block, generating 50 characters with the cache. The
# measured cache shrinks with `H_kv`, and so do the key and value projections; these models are
# untrained — they show the bill, not the quality. Ainslie et al. (2023) report that a model
# converted to grouped-query attention and briefly trained further comes close to the quality of
# the original with its full set of heads, at a decoding speed near multi-query attention's.

# %%
for kv_heads in (4, 2, 1):
    torch.manual_seed(0)
    m = gpt.TinyGPT(gpt.GPTConfig(**{**vars(shipped.config), "n_kv_heads": kv_heads}))
    m.use_repeat(repeat_kv)
    out = gpt.generate(m, prompt, 50, sample_next, temperature=0.8, top_k=10, seed=3)
    again = gpt.generate(m, prompt, 50, sample_next, temperature=0.8, top_k=10, seed=3, cache=False)
    same = torch.equal(out.tokens, again.tokens)
    print(f"H_kv = {kv_heads}: cache {out.cache_bytes:>7,} bytes (kv_cache_bytes: "
          f"{kv_cache_bytes(m.config.n_layers, cached_tokens, kv_heads, m.config.d_head, bytes_per_element=4):>7,}), "
          f"{gpt.n_parameters(m):,} parameters; cached = recomputed: {same}")

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=11_tiny_gpt` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** A language model's training loss drops to 0.02 nats per character within a hundred
# steps, while its samples are gibberish. The most likely cause:
#
# - (a) the learning rate is too high, so the loss is measured badly
# - (b) the warm-up is too short for Adam's estimates to settle
# - (c) the targets are the inputs themselves, or the mask lets a position see its target
# - (d) the temperature used to sample is too low for this model

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "c", "a loss near 0 on text means the model knows each answer for certain: it can "
             "copy it — targets not shifted, or no causal mask — which writing never allows. A high "
             "rate or a short warm-up makes the loss jump or stall, not vanish; the temperature "
             "plays no part in the loss")
### END HIDDEN TESTS

# %% [markdown]
# **2.** A model has 32 query heads and 8 key/value heads (grouped-query attention). Compared
# with the same model with 32 key/value heads, its key/value cache is…
#
# - (a) the same size: the cache stores one entry per query head
# - (b) 8 times smaller: one key/value head in all
# - (c) 32 times smaller: the keys are shared across layers
# - (d) 4 times smaller: each key/value head serves 4 query heads

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "d", "the cache holds 2 · layers · tokens · H_kv · d_head numbers: going from 32 to 8 "
             "key/value heads divides it by 4. The repeated copies that line up with the 32 query heads "
             "are made when attending, not stored; every layer still has its own cache")
### END HIDDEN TESTS

# %% [markdown]
# **3.** You sample with temperature 0.5 and top-k 5. Which statement is true?
#
# - (a) only the 5 likeliest tokens can be drawn, and among them the likeliest ones gain
# - (b) the 5 likeliest tokens are drawn with equal probability
# - (c) temperature 0.5 halves every probability before the top 5 are kept
# - (d) the draw is the argmax whenever the temperature is below 1

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "a", "top-k gives every token outside the 5 largest logits probability 0; dividing "
             "the logits by 0.5 doubles their gaps, so after the softmax the likeliest tokens gain "
             "share. Probabilities are not halved (they would be renormalised anyway), the survivors "
             "are not made equal, and only temperature 0 is the argmax")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - A decoder-only Transformer is the encoder layer of lesson 07 under lesson 04's causal mask,
#   with positions (lesson 05), a final LayerNorm and a read-out to the vocabulary; GPT ties the
#   read-out to the token embedding and puts dropout on the embeddings, the attention weights and
#   each sub-layer's output.
# - Language-model training: targets are the inputs shifted by one; the loss is the mean
#   cross-entropy in nats over every position; every position of a window learns in one parallel
#   pass because of the mask. Unshifted targets or a missing mask make the loss collapse by
#   copying.
# - One step: zero the gradients, backward, clip the global norm, then step; AdamW with a linear
#   warm-up and a cosine decay. Here a small model passed the frequency table's loss in 250
#   steps; the shipped 3-seed run of 1,200 steps passed the bigram table too and learned the
#   course's common words and the look of its Markdown, but not meaning.
# - Writing: temperature divides the logits before the softmax; top-k keeps the k largest;
#   temperature 0 is greedy. A key/value cache makes each step compute one new position and gives
#   exactly the same text as recomputing.
# - The cache costs `2 · n_layers · batch · n_tokens · n_kv_heads · d_head` elements; with
#   grouped-query attention `n_kv_heads` is a fraction of the query heads (Llama 2 70B: 8 of 64)
#   and the cache shrinks by the same factor.
#
# **Next:** this is the last lesson. Lesson 10 reviews the claims of the whole course.
#
# **References.**
# Ainslie, J., Lee-Thorp, J., de Jong, M., et al. (2023). GQA: Training generalized multi-query
# Transformer models from multi-head checkpoints. EMNLP. ·
# Loshchilov, I., & Hutter, F. (2019). Decoupled weight decay regularization. ICLR. ·
# Radford, A., Wu, J., Child, R., et al. (2019). Language models are unsupervised multitask
# learners. OpenAI. ·
# Shazeer, N. (2019). Fast Transformer decoding: One write-head is all you need. arXiv:1911.02150. ·
# Touvron, H., Martin, L., Stone, K., et al. (2023). Llama 2: Open foundation and fine-tuned chat
# models. arXiv:2307.09288.
