# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Why recurrent networks forget
#
# **Promise:** by the end you can write a recurrent network's forward pass, measure how fast its
# gradient fades with distance, and say — with numbers from a real experiment — what went wrong
# with plain RNNs, what LSTMs fixed, and what attention adds.
#
# **You will**
# - write the recurrence `h_t = tanh(x_t W_x + h_{t−1} W_h + b)` in NumPy and match PyTorch's
#   `nn.RNN` (exercise 1);
# - see the two costs of reading one word at a time: long paths and no parallelism;
# - meet the course-review sentiment task that lessons 01, 06 and 07 share;
# - write a function that measures how strongly each input position moves an output (exercise 2),
#   and use it on an RNN, an LSTM and an attention model before training;
# - read the results of training all three, three seeds each; see how far three seeds can be
#   trusted (the same runs over eight seeds, four ways of rounding floats and three training
#   budgets), and test an explanation with a control run.
#
# **Time:** about 50 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from experiments import rnn_spread
from experiments.training import run_experiment
from helpers import sentiment
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.checks.recurrence import check_gradient_by_position, check_rnn_forward
from helpers.models import LABELS, build, n_parameters
from helpers.quiz import check_choice, grade_choice
from helpers.recurrence import gradient_profile
from helpers.recurrence_plots import plot_gradient_by_distance, plot_lengths, plot_paths, plot_training_losses
from helpers.trained import accuracy_ranges, load_results, results_markdown

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## Reading one word at a time
#
# Before attention, a sentence was read by a **recurrent neural network** (RNN): one word at a
# time, left to right. After each word it updates a **hidden state** `h_t`, one vector in which
# the network must keep all it has gathered from the words read so far:
#
# $$h_t = \tanh\left(x_t W_x + h_{t-1} W_h + b\right), \qquad h_0 = 0 \text{ (or a given start)}$$
#
# | symbol | shape | what it is |
# |---|---|---|
# | `x_t` | `(d_in,)` | the embedding of word `t` (row `t` of `x`, which is `(T, d_in)`) |
# | `W_x` | `(d_in, d_h)` | input weights: the same for every step |
# | `W_h` | `(d_h, d_h)` | recurrent weights: how the old state feeds the new one |
# | `b`, `h_t` | `(d_h,)` | bias and hidden state |
#
# Papers often write `W_x x_t + W_h h_{t−1}` with column vectors; this course keeps tokens as
# **rows**, so weights multiply from the right. A classifier reads the last state `h_T` and maps
# it to an answer: everything about the first word has to survive `T` updates to get there.
#
# **Exercise 1 (3 points).** Write `rnn_forward(x, w_x, w_h, b, h0=None)` in NumPy. It returns
# all states `H` of shape `(T, d_h)` — row `t` is `h_t` after reading `x[t]` — starting from
# `h0`, or from zeros when `h0` is `None`. A plain Python loop over the rows of `x` is exactly
# right: that loop *is* the recurrence.

# %% nbgrader={"grade": false, "grade_id": "rnn_forward", "locked": false, "schema_version": 3, "solution": true}
def rnn_forward(x, w_x, w_h, b, h0=None):
    """Hidden states H (T, d_h) of h_t = tanh(x_t w_x + h_{t-1} w_h + b) for x (T, d_in)."""
    ### BEGIN SOLUTION
    h = np.zeros(w_h.shape[0]) if h0 is None else np.asarray(h0, dtype=float)
    states = []
    for x_t in x:
        h = np.tanh(x_t @ w_x + h @ w_h + b)
        states.append(h)
    return np.stack(states)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rnn_forward_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_rnn_forward(rnn_forward)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(rnn_forward, check_rnn_forward, "rnn_forward")
for seed, shape in zip(fresh_seeds(3), [(1, 2, 5), (12, 6, 3), (40, 8, 8)]):
    check_rnn_forward(rnn_forward, seed, *shape, verbose=False)
_seed = fresh_seeds(1)[0]
torch.manual_seed(_seed % 2**31)
_rnn = torch.nn.RNN(5, 7, dtype=torch.float64)  # both of PyTorch's biases non-zero
_x, _h0 = torch.randn(9, 5, dtype=torch.float64), torch.randn(7, dtype=torch.float64).tanh()
_w_x, _w_h = _rnn.weight_ih_l0.detach().numpy().T, _rnn.weight_hh_l0.detach().numpy().T
_b = (_rnn.bias_ih_l0 + _rnn.bias_hh_l0).detach().numpy()
with torch.no_grad():
    _want, _want_h0 = _rnn(_x)[0].numpy(), _rnn(_x, _h0[None])[0].numpy()
with quiet():
    _got, _got_h0 = rnn_forward(_x.numpy(), _w_x, _w_h, _b, None), rnn_forward(_x.numpy(), _w_x, _w_h, _b, _h0.numpy())
expect_close(_got, _want, "rnn_forward against torch.nn.RNN (h0=None passed explicitly)")
expect_close(_got_h0, _want_h0, "rnn_forward against torch.nn.RNN with a given h0")
### END HIDDEN TESTS

# %% [markdown]
# ### Your loop against PyTorch
#
# `torch.nn.RNN` computes the same recurrence, but it stores its weights the other way round:
# `weight_ih_l0` is `(d_h, d_in)`, the transpose of our `w_x`, because it computes `W x` for
# column vectors. It also keeps two biases, `bias_ih` and `bias_hh`, whose sum plays the role of
# `b`. Copy them over and compare (this cell uses your function):

# %%
torch.manual_seed(0)
torch_rnn = torch.nn.RNN(input_size=3, hidden_size=4, batch_first=True)
print("weight_ih_l0:", tuple(torch_rnn.weight_ih_l0.shape), " weight_hh_l0:", tuple(torch_rnn.weight_hh_l0.shape))
x_demo = torch.randn(1, 5, 3)  # (B, T, d_in): one sequence of five inputs
with torch.no_grad():
    H_torch = torch_rnn(x_demo)[0][0].numpy()  # (T, d_h)
w_x = torch_rnn.weight_ih_l0.detach().numpy().T  # (d_in, d_h)
w_h = torch_rnn.weight_hh_l0.detach().numpy().T  # (d_h, d_h)
b = (torch_rnn.bias_ih_l0 + torch_rnn.bias_hh_l0).detach().numpy()  # (d_h,)
H_mine = rnn_forward(x_demo[0].numpy(), w_x, w_h, b)
print("largest difference from nn.RNN:", np.abs(H_mine - H_torch).max())

# %% [markdown]
# ## Two costs of the recurrence
#
# The loop you wrote has two properties that no amount of tuning removes.
#
# 1. **Long paths.** The first word reaches the output only through every later state. During
#    training its gradient travels the same chain backwards and is multiplied, once per step, by
#    the Jacobian `∂h_t/∂h_{t−1} = diag(1 − h_t²) W_hᵀ`: the recurrent weights times the slope of
#    tanh, which is at most 1. If these factors shrink a vector by about the same amount every
#    step, the gradient shrinks **exponentially** with the distance — the *vanishing gradient*
#    (Bengio et al., 1994; Pascanu et al., 2013). If they grow it, it explodes, and a single
#    update can throw the weights far off. The usual guard is *gradient clipping*: whenever the
#    gradient's norm exceeds a bound, scale it down to the bound (Pascanu et al., 2013). Every
#    run in this lesson clips at norm 1 (`torch.nn.utils.clip_grad_norm_`); clipping tames
#    exploding gradients, but it cannot make a vanishing one larger.
# 2. **No parallelism.** Computing `h_t` requires `h_{t−1}` first: a review of 50 words means 50
#    updates in sequence, however many cores the machine has. Attention, as the right panel shows, connects
#    every word to the output directly, and all words are processed at the same time.

# %%
plot_paths("the lecture was not very helpful".split())
plt.show()

# %% [markdown]
# How fast is "exponentially"? If every step multiplied the gradient by 0.5, forty steps would
# leave this much of it:

# %%
print(f"0.5 ** 40 = {0.5 ** 40:.1e}")

# %% [markdown]
# ## The task: course reviews where the answer sits at the start
#
# To see the first cost directly we need a task where the deciding words can be far from the
# end. `helpers.sentiment` generates short course reviews from templates, over a vocabulary of
# 89 words, so the right answer is always known:
#
# - one rule sets the label: take the **first adjective** of the review, and flip its sentiment
#   when `not` or `never` comes before it, with at most an intensifier such as `very` in between
#   (`not very helpful` is negative, `never boring` positive); nothing else in the review counts;
# - **filler phrases** (`in the winter semester`, `if you ask me`, …) carry no sentiment and
#   push the deciding words away from the end;
# - a **distractor** clause (`although the coffee was great`) brings in a second sentiment word,
#   which the label does not depend on.

# %%
train = sentiment.training_set()  # the 8,000 training reviews (the same for every run)
for words, label in list(zip(train.sentences, train.labels))[:5]:
    print(f"{'positive' if label else 'negative'} ({len(words):2d} words): {' '.join(words)}")

# %% [markdown]
# A training review has 0 to 8 filler phrases and, half of the time, a distractor. Four test sets
# of 1,000 reviews each isolate the distance: no fillers and no distractor; a distractor only;
# 4 fillers; 8 fillers (42 to 60 words). The histogram shows where the training reviews lie:

# %%
lengths = np.array([len(words) for words in train.sentences])
last_decides = np.mean([words[-1] in sentiment.POSITIVE + sentiment.NEGATIVE
                        and not set(words) & set(sentiment.CONNECTORS) for words in train.sentences])
plot_lengths(train)
plt.show()
print(f"median length {np.median(lengths):.0f} words; {np.mean(lengths >= 30):.0%} have 30 words or more")
print(f"reviews whose deciding adjective is the very last word: {last_decides:.1%}")
NEAR = 7  # a connector and a distractor clause: the farthest the short test sets put it from the end
distance = np.array([sentiment.deciding_distance(words) for words in train.sentences])
print(f"reviews whose deciding adjective is at most {NEAR} words from the end: {np.mean(distance <= NEAR):.1%}")

# %% [markdown]
# ## How far does a gradient reach?
#
# To measure the first cost, ask: *how much would the output change if one input word's
# embedding changed a little?* That is the size of the gradient of the output with respect to
# that word's embedding, one number per position.
#
# **Exercise 2 (3 points).** Write `gradient_by_position(f, x)` in PyTorch. `f` maps a `(T, d)`
# tensor to a scalar tensor; return the `(T,)` tensor whose entry `t` is the L2 norm of
# `∂f/∂x_t` (row `t` of the gradient). Three rules:
#
# - the caller's `x` must come back untouched — no `requires_grad`, no `.grad`, same values — so
#   take the gradient with respect to a fresh copy of it that is cut off from any graph `x` is
#   part of (which tensor methods detach, copy, and switch gradients on?);
# - `torch.autograd.grad(output, inputs)` returns the gradient without storing it anywhere;
# - return the norms detached from the graph (they are measurements, not part of a model).

# %% nbgrader={"grade": false, "grade_id": "gradient_by_position", "locked": false, "schema_version": 3, "solution": true}
def gradient_by_position(f, x):
    """L2 norm of ∂f/∂x_t for each row t of x (T, d) -> (T,), detached; x is left untouched."""
    ### BEGIN SOLUTION
    leaf = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(leaf), leaf)  # (T, d)
    return grad.norm(dim=1).detach()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "gradient_by_position_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_gradient_by_position(gradient_by_position)
### BEGIN HIDDEN TESTS
from helpers import recurrence as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(gradient_by_position, check_gradient_by_position, "gradient_by_position")
for seed, (T, d) in zip(fresh_seeds(3), [(1, 4), (12, 3), (30, 16)]):
    check_gradient_by_position(gradient_by_position, seed, T, d, verbose=False)
torch.manual_seed(fresh_seeds(1)[0] % 2**31)
_model = build("lstm").double()
_ids, _lengths = sentiment.encode([sentiment.training_set(1, seed=fresh_seeds(1)[0]).sentences[0]])
_emb = _model.embed(_ids)[0].detach()
_f = lambda e: _model.from_embeddings(e[None], _lengths)[0]  # noqa: E731
with quiet():
    _got = gradient_by_position(_f, _emb)
expect_close(_got, reference.gradient_by_position(_f, _emb), "gradient norms of an LSTM's logit by word")
assert not _emb.requires_grad and _emb.grad is None, "gradient_by_position must leave x untouched"
### END HIDDEN TESTS

# %% [markdown]
# ### Three models before training
#
# Now apply the measurement to the three models of this lesson's experiment (`helpers.models`),
# straight from their random initialisation:
#
# - a **plain RNN**: embeddings of width 16, hidden state of width 32, one output logit;
# - an **LSTM** of the same widths (Hochreiter & Schmidhuber, 1997);
# - a **2-layer attention classifier** of width 32 that reads its answer from a `[CLS]` token put
#   in front of the review (lessons 02 to 07 take it apart).
#
# For long reviews (8 fillers and a distractor), the gradient of each model's logit with
# respect to every word's embedding, divided by the last word's, by distance from the end,
# measured with **your** `gradient_by_position` (`helpers.recurrence.gradient_profile` feeds it
# the models and the reviews).

# %%
for name in ("rnn", "lstm", "attention"):
    print(f"{LABELS[name]:<22} {n_parameters(build(name)):>6,} parameters")
before = gradient_profile(seeds=(0, 1, 2), n_reviews=10, grad_fn=gradient_by_position)
plot_gradient_by_distance(before, mark=40)
plt.show()
for name in before.ratios:
    print(f"{LABELS[name]:<22} word 40 before the end: {before.at(name, 40):.1e} of the last word's gradient")
step = before.at("rnn", 40) ** (1 / 40)
print(f"plain RNN: the same as multiplying by {step:.2f} at each of the 40 steps")

# %% [markdown]
# Read the chart from left to right. For the plain RNN the curve falls in a straight line on the
# log scale — exponential decay — and a word 40 positions back gets about 10⁻¹² of the last
# word's gradient (the exact median is printed above). Whatever the first adjective says, training
# barely hears it. The LSTM decays too at initialisation, though more slowly; the attention
# model's curve is flat, because every word is one attention step away from `[CLS]`.
#
# ## The experiment: train all three
#
# Each of the three models had the same training: the 8,000 training reviews above, Adam (learning
# rate 0.01, gradients clipped to norm 1), 20 epochs, three seeds each. The command
# `python -m experiments.training` does it in a few minutes and stores the weights and the accuracies
# in `data/sentiment/`; it reproduces the stored files exactly on the same machine. This lesson
# loads them. Set `RETRAIN = True` to train all nine runs again here instead.

# %%
RETRAIN = False
results = run_experiment(out_dir=None) if RETRAIN else load_results()
display(Markdown(results_markdown(results)))
ranges = accuracy_ranges(results)
for name, by_set in ranges.items():
    low = min(lo for lo, _ in by_set.values())
    high = max(hi for _, hi in by_set.values())
    print(f"{LABELS[name]:<22} every test set and seed between {low:.1%} and {high:.1%}")

# %% [markdown]
# In these three runs the plain RNN is near chance on every test set — a coin flip scores 50% —
# while the LSTM and the attention model are right on (nearly) every review, at every distance.
# But three seeds are three draws from a process that is sensitive to the smallest change: the
# same run on another CPU rounds its floats differently, and after thousands of updates it can
# end somewhere else. The command `python -m experiments.rnn_spread` (about 20 minutes on 2
# cores) trains the plain RNN again from seeds 0–7, each under four of PyTorch's *kernel paths*
# on one machine (the same code, the sums rounded in different orders), for 60 epochs instead of
# 20, and measures it after 20, 40 and 60; it also trains the LSTM and the attention model on the
# other paths, and the control of the next sections. Left: the mean training loss of every
# epoch of the nine shipped runs; right: the plain RNN's runs trained longer.

# %%
spread = rnn_spread.load_results()
longer = rnn_spread.distinct(rnn_spread.runs_of(spread))
above = [r["accuracy"]["60"]["no_fillers"] > rnn_spread.CHANCE[1] for r in longer]
plot_training_losses(results, [r["loss"] for r in longer], above,
                     (f"above {rnn_spread.CHANCE[1]:.0%} on no_fillers after 60 epochs", "not"))
plt.show()
display(Markdown(rnn_spread.spread_reading(spread)))

# %% [markdown]
# Read the left panel first. The LSTM sits on the guessing line for several epochs and then
# drops: it has found the rule. The plain RNN stays on the guessing line for all 20 epochs, and
# the right panel shows that this is a budget, not an end: trained on, its loss keeps edging
# down in most runs, and the sentences above count what that buys on each test set. These runs
# are one machine's. On a CPU whose kernels round differently, a retrained seed lands elsewhere
# in this spread or outside it — a run that learns `no_fillers` within 20 epochs is possible.
# What this lesson and its questions rely on is only what held in every run.
#
# **The LSTM's trick.** Besides `h_t`, an LSTM carries a cell state updated by *adding*:
# `c_t = f_t ⊙ c_{t−1} + i_t ⊙ c̃_t`. When the forget gate `f_t` is close to 1, `c_t` passes
# `c_{t−1}` on almost unchanged, and so does the gradient: an additive path that training can
# learn to keep open. Measure the three trained models (seeds 0–2 from `data/`) the same way as
# before training:

# %%
after = gradient_profile(seeds=(0, 1, 2), n_reviews=10, trained=True, grad_fn=gradient_by_position)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True, layout="constrained")
plot_gradient_by_distance(before, ax=axes[0], title="before training")
plot_gradient_by_distance(after, ax=axes[1], title="after training")
plt.show()
for name in after.ratios:
    print(f"{LABELS[name]:<22} at distance 40: {before.at(name, 40):.1e} before training, "
          f"{after.at(name, 40):.1e} after (relative to the last word)")
    print(f"{'':<22} the last word's own gradient: {np.median(before.last_word[name]):.2g} before, "
          f"{np.median(after.last_word[name]):.2g} after; at distance 40 without dividing: "
          f"{before.absolute_at(name, 40):.1e} before, {after.absolute_at(name, 40):.1e} after")

# %% [markdown]
# Compare the two panels at distance 40: training opened the LSTM's path by orders of magnitude,
# while the plain RNN's stayed shut. The chart divides by the last word's gradient, and training
# changes that too — the second line of each model gives the gradients without the division, so
# you can check that the ratio does not create the gain.
#
# **Think (2 points, graded by hand).** In every run above — any seed, any rounding, 20 epochs or
# 60 — the plain RNN stays at chance on `fillers_4` and `fillers_8`. On `no_fillers`, whose
# deciding adjective is the *last* word (a path of a single step), its progress is slow and
# uneven from run to run. Using the training reviews' lengths and distances, the gradient chart
# and the loss curves, explain in three or four sentences (1) why the filler sets are out of
# reach in every run, and (2) why even the short reviews are learned so slowly.

# %% [markdown] nbgrader={"grade": true, "grade_id": "why_short_fails", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# One point each. (1) In the filler reviews the deciding words sit 10–50 steps before the end,
# where the plain RNN's gradient is 10⁻⁴ to 10⁻¹² of the last word's before training, and
# training does not open that path (the "after training" panel): the rule gets no usable
# signal from those reviews, whatever the seed or the rounding. (2) For the short reviews the
# signal exists but is weak and rare: only about one training review in six has its deciding
# adjective within a few words of the end (the printed share), where the gradient is still a
# few percent or less of the last word's, and for the rest of the data the rule's words are out
# of reach, so they add noise, not signal; the shortcut "read the last word" does not help
# either, since only about 5% of training reviews end on the deciding adjective. The loss hardly
# moves below ln 2, so each epoch buys little, and where a run stands after a fixed budget hangs
# on small differences (the seed, even how floats are rounded); with more epochs some runs
# creep up. No point for "the RNN cannot represent the rule" (the control learns it with the
# same state) or "short reviews are too short to learn from".
# === END MARK SCHEME ===

# %% [markdown]
# ## A control: the same RNN without fillers
#
# Whatever you wrote above makes a prediction, and a control can test it: the same RNN, the
# same recipe and seeds, trained on 8,000 reviews drawn the same way but **without filler
# phrases** (half of them still have a distractor), then evaluated on the same four test sets.
# Removing the fillers changes more than one thing, and the cell below measures each: every
# deciding adjective comes within a few words of the end, the training reviews are shorter, the
# filler words never occur in training, and far more reviews end on the deciding adjective, so
# "read the last word" pays off on much of the data. If the RNN cannot hold the rule at all, the
# control fails on the short test reviews too; if it can, the control shows that it can — not
# which of these changes made the difference. The command `python -m experiments.rnn_control`
# trains its three runs (half a minute of CPU) and stores them in `data/sentiment_control/`; this
# lesson loads them. Set `RETRAIN_CONTROL = True` to train them here instead.

# %%
from experiments import rnn_control

RETRAIN_CONTROL = False
control = rnn_control.run_experiment(out_dir=None) if RETRAIN_CONTROL else rnn_control.load_results()
control_train = sentiment.training_set(config=rnn_control.CONTROL_TASK)
control_distance = np.array([sentiment.deciding_distance(words) for words in control_train.sentences])
print(f"control training reviews: at most {max(map(len, control_train.sentences))} words (with fillers: "
      f"{lengths.max()}); deciding adjective at most {NEAR} words from the end: "
      f"{np.mean(control_distance <= NEAR):.0%}; the very last word: {np.mean(control_distance == 0):.0%} "
      f"(with fillers: {np.mean(distance == 0):.0%})")
display(Markdown(rnn_control.comparison_markdown(control, results)))
display(Markdown(rnn_control.control_reading(control, results)))

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=01_rnn_bottleneck` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** Backwards through each step of an RNN, the gradient shrinks by a factor of about 0.6.
# Compared with the last word, a word 30 steps earlier gets a gradient that is about…
#
# - (a) 18 times smaller: 30 steps × 0.6
# - (b) 0.6 times as large: the factor applies once
# - (c) as large: every step uses the same `W_h`
# - (d) 10⁻⁷ times as large: 0.6 to the power 30

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "d", "the factors multiply, once per step: 0.6 ** 30 ≈ 2e-7, exponential in the "
             "distance; that every step shares W_h is what makes the same factor repeat")
### END HIDDEN TESTS

# %% [markdown]
# **2.** A one-layer RNN reads a 50-word review on a machine with 1,000 cores. How many steps must
# run one after the other?
#
# - (a) 1: each core takes one word
# - (b) about 6, log₂ 50, as in a tree of sums
# - (c) 50: one per word, in order
# - (d) 2,500: one per pair of words

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "c", "step t needs h_{t-1}: the 50 updates form a chain that extra cores cannot "
             "shorten; a tree of sums works for adding numbers, not for a tanh recurrence, and "
             "2,500 pairs is what attention compares, all at once")
### END HIDDEN TESTS

# %% [markdown]
# **3.** In an LSTM, `c_t = f_t ⊙ c_{t−1} + i_t ⊙ c̃_t`. What lets information about an early word
# — and its gradient — survive many steps?
#
# - (a) an input gate `i_t` near 1 at every step, so every word is written in
# - (b) a forget gate `f_t` near 1, so `c_{t−1}` is carried on by addition
# - (c) the tanh in `c̃_t`, which keeps the cell state between −1 and 1
# - (d) an output gate `o_t` near 1, so `h_t` shows the whole cell state

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "b", "with f_t ≈ 1 the cell state is copied forward by addition, and ∂c_t/∂c_{t-1} = "
             "f_t ≈ 1 does not shrink the gradient; an input gate open at every step "
             "overwrites the early word, the tanh bounds the new content, not the memory, and "
             "the output gate only decides what h_t reads from the cell")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - An RNN updates one state per word, `h_t = tanh(x_t W_x + h_{t−1} W_h + b)`; PyTorch's
#   `nn.RNN` stores the transposed weights and two biases.
# - Its two costs: the path from an early word to the output is as long as the review, and the
#   steps cannot run in parallel.
# - Measured, not assumed: at initialisation a plain RNN's gradient 40 words back is about 10⁻¹²
#   of the last word's, and a plain RNN trained on the review task stays at chance on the long
#   test reviews in every run, over seeds, kernel paths and three budgets; on the short ones it
#   makes slow, uneven progress that depends on the seed and even on the rounding.
# - Tested, not assumed: the same RNN trained on reviews without fillers gets the short test
#   reviews right in nearly every run, so its state can hold the rule; what it lacks with the
#   fillers is a training signal strong enough to find it.
# - The honest summary: vanishing gradients are a real, measurable problem of plain RNNs. On this
#   task the LSTM's additive cell path was enough (near 100%) — but the task asks little of
#   memory: the label depends on one adjective and on whether a negation came before it, about
#   two bits to carry to the end.
# - The deeper limit is the **fixed-size state**: whatever a later step may need must fit into
#   `h_t`. A task that needs many facts from far back — translating a long sentence word by word
#   — strains it, and that is where attention came from: Bahdanau et al. (2015) let a translation
#   model look back at *every* encoder state, weighted by relevance, instead of one final vector.
#   Attention gives every pair of words a one-step path, and computes all positions at once
#   instead of one after another.
#
# **Next:** lesson 02 builds attention itself, as a lookup you can differentiate.
#
# **References.**
# Bahdanau, D., Cho, K., & Bengio, Y. (2015). Neural machine translation by jointly learning to
# align and translate. ICLR. ·
# Bengio, Y., Simard, P., & Frasconi, P. (1994). Learning long-term dependencies with gradient
# descent is difficult. IEEE Transactions on Neural Networks. ·
# Hochreiter, S., & Schmidhuber, J. (1997). Long short-term memory. Neural Computation. ·
# Pascanu, R., Mikolov, T., & Bengio, Y. (2013). On the difficulty of training recurrent neural
# networks. ICML.
