# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · From words to pixels
#
# **Promise:** by the end you can turn an image into the token sequence a Transformer reads, show
# by computation that the "patch embedding" is a convolution, and explain why a tiny Vision
# Transformer loses to a small CNN on a task whose label depends on two corners far apart.
#
# **You will**
# - cut images into `P × P` patches in the order every ViT uses (exercise 1);
# - count the tokens an image becomes, and watch the `n²` bill as the patch size shrinks
#   (exercise 2 and a widget);
# - show that "flatten each patch, multiply by a matrix" is a convolution with kernel = stride = `P`
#   (exercise 3);
# - add a [CLS] token and learned positions, and look at where a trained tiny ViT attends;
# - compare a tiny ViT with a small CNN on the same images, and say who wins and why.
#
# **Time:** about 60 minutes. Each exercise is followed by a check cell: run it, and if it
# fails, its message names the most likely mistake.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import inspect
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from torch import nn

from experiments import vision
from helpers import image_task
from helpers.checks import hint  # after a failing check: hint() for a hint, hint() again for the fix
from helpers.checks.core import expect_close, fresh_seeds, quiet
from helpers.checks.patches import check_conv_to_linear, check_n_tokens, check_patchify
from helpers.patches import (
    patch_size_explorer,
    plot_cls_attention,
    plot_head_attention,
    plot_patch_grid,
    plot_position_similarity,
    plot_tokens,
    quadrant_shares,
)
from helpers.quiz import check_choice, grade_choice

np.set_printoptions(precision=3, suppress=True)
torch.set_printoptions(precision=3, sci_mode=False)
_ = torch.manual_seed(0)

# %% [markdown]
# ## An image is a grid; a Transformer reads a list
#
# Every model so far read a sentence: a list of tokens, one vector per word. An image is a grid of
# pixels. The simplest way to make it a list — one token per pixel — costs too much: a 224 × 224
# photo would be 50,176 tokens, and attention compares every pair.
#
# The Vision Transformer (ViT, Dosovitskiy et al., 2021, "An image is worth 16×16 words") cuts the
# image into square **patches** of `P × P` pixels and treats each patch as a word:
#
# 1. cut the image `(C, H, W)` into `N = (H/P)·(W/P)` patches;
# 2. flatten each patch into `C·P·P` numbers;
# 3. project each with the same learned matrix to a `D`-wide token;
# 4. put a [CLS] token in front and add a learned position vector to every token;
# 5. run a standard Transformer encoder and classify from [CLS]'s output.
#
# Here is an image from this lesson's task (more about the task later), 32 × 32 pixels and one
# grey channel, cut with `P = 4`:

# %%
examples = image_task.test_set()  # 2,000 held-out images, always the same (seed 1)
image = torch.from_numpy(examples.images[:1])  # (1, 1, 32, 32)
plot_patch_grid(image, 4, title="one image, P = 4: 8 × 8 = 64 patches")
plt.show()

# %% [markdown]
# ### Which patch comes first, and which pixel inside it
#
# A Transformer does not care about the order of its tokens (lesson 05), but the rest of the code
# does: the position vectors, the convolution below and every pretrained checkpoint assume one
# layout. The one used everywhere, and in this course:
#
# - patches in **row-major order**: left to right along the top row of patches, then the next row
#   (the numbers in the figure above);
# - each patch flattened in **`(C, P, P)` order**: all of channel 0's pixels row by row, then all of
#   channel 1's, and so on.
#
# | tensor | shape |
# |---|---|
# | images | `(B, C, H, W)` |
# | patches, one row per token | `(B, N, C·P·P)` with `N = (H/P)·(W/P)` |
#
# On a tiny numbered image with two channels the layout is easy to read: every pixel holds its own
# index, so each token lists where its numbers came from.

# %%
tiny = torch.arange(2 * 4 * 6.0).reshape(1, 2, 4, 6)  # (B, C, H, W) = (1, 2, 4, 6): pixel k holds k
print("channel 0:\n", tiny[0, 0], "\nchannel 1:\n", tiny[0, 1])
# With P = 2 this image gives (4/2)·(6/2) = 6 tokens of 2·2·2 = 8 numbers. The first two, cut out by hand:
print("token 0:", tiny[0, :, 0:2, 0:2].flatten())  # rows 0-1, columns 0-1 of every channel
print("token 1:", tiny[0, :, 0:2, 2:4].flatten())  # rows 0-1, columns 2-3

# %% [markdown]
# Token 0 is the top-left 2 × 2 square: `0, 1, 6, 7` from channel 0, then `24, 25, 30, 31` from
# channel 1. Token 1 is the square to its right. Token 3 starts the second row of patches.
#
# **Exercise 1 (4 points).** Write `patchify(images, patch_size)` for a torch tensor
# `(B, C, H, W)`, returning `(B, N, C·P·P)` in exactly this layout. Raise `ValueError` with a clear
# message if `P` does not divide `H` or `W` — never crop silently. The result has the dtype of
# `images`. Hint: slicing patch by patch in a loop works but is slow; one `reshape` alone cannot
# do it, because the numbers of one patch do not sit next to each other in memory. Give the height
# and the width two axes each — *which* patch, and *where inside* it — then ask in which order the
# axes must stand for one token's numbers to come out together, in `(C, P, P)` order.

# %% nbgrader={"grade": false, "grade_id": "patchify", "locked": false, "schema_version": 3, "solution": true}
def patchify(images, patch_size):
    """Cut images (B, C, H, W) into P × P patches: (B, N, C·P·P), row-major, each in (C, P, P) order."""
    ### BEGIN SOLUTION
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"patch size {P} must divide the height {H} and the width {W}")
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, h, P, w, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, h, w, C, P, P)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "patchify_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false}
check_patchify(patchify)
### BEGIN HIDDEN TESTS
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(patchify, check_patchify, "patchify")
for seed in fresh_seeds(2):
    check_patchify(patchify, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _C in (1, 3):
    _P = int(_rng.choice([2, 3, 4, 8]))
    _x = torch.randn(int(_rng.integers(1, 4)), _C, _P * int(_rng.integers(1, 6)), _P * int(_rng.integers(1, 6)))
    with quiet():
        _got = patchify(_x, _P)
    _want = torch.nn.functional.unfold(_x, _P, stride=_P).transpose(1, 2)  # (B, N, C·P·P)
    expect_close(_got, _want, f"patchify of {tuple(_x.shape)} with P = {_P} against torch's unfold")
_x = torch.randn(2, 3, 8, 8)
with quiet():
    _one = patchify(_x, 8)
expect_close(_one, _x.reshape(2, 1, -1), "patchify with P = H = W (a single patch)")
for _shape in [(1, 3, 12, 10), (2, 1, 9, 12), (1, 1, 6, 6)]:
    try:
        with quiet():
            patchify(torch.zeros(_shape), 4)
    except ValueError:
        pass
    else:
        raise AssertionError(f"patchify must raise ValueError for a {_shape[2]} × {_shape[3]} image and P = 4")
### END HIDDEN TESTS

# %% [markdown]
# Your patches of the task image, as the token matrix a Transformer reads: 64 rows (tokens), 16
# numbers each. The bright rows are the patches that cut through a shape.

# %%
tokens = patchify(image, 4)[0]  # (64, 16)
fig, axes = plt.subplots(1, 2, figsize=(8, 4), layout="constrained")
plot_patch_grid(image, 4, ax=axes[0])
plot_tokens(tokens, ax=axes[1])
plt.show()

# %% [markdown]
# ## How many tokens?
#
# An `H × W` image with patch size `P` gives `(H/P)·(W/P)` patches; the [CLS] token adds one more.
# The patch size sets the sequence length, and lesson 04 showed what that costs: each attention
# head builds an `n × n` matrix of scores.
#
# **Exercise 2 (2 points).** Write `n_tokens(height, width, patch_size, cls_token=True)`
# returning the number of tokens as an `int`. You may assume that `patch_size` divides both
# `height` and `width`: a ViT crops or resizes its images so that it does (the course's version
# refuses other sizes).

# %% nbgrader={"grade": false, "grade_id": "n_tokens", "locked": false, "schema_version": 3, "solution": true}
def n_tokens(height, width, patch_size, cls_token=True):
    """Tokens a ViT reads for a height × width image: (H/P)·(W/P) patches, +1 for [CLS]."""
    ### BEGIN SOLUTION
    return (height // patch_size) * (width // patch_size) + (1 if cls_token else 0)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "n_tokens_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_n_tokens(n_tokens)
### BEGIN HIDDEN TESTS
from helpers import patches as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(n_tokens, check_n_tokens, "n_tokens")
for seed in fresh_seeds(2):
    check_n_tokens(n_tokens, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
for _ in range(5):
    _P = int(_rng.integers(1, 33))
    _H, _W = _P * int(_rng.integers(1, 40)), _P * int(_rng.integers(1, 40))
    for _cls in (True, False):
        with quiet():
            _got = n_tokens(_H, _W, _P, cls_token=_cls)
        assert isinstance(_got, (int, np.integer)) and not isinstance(_got, bool), \
            f"n_tokens must return an int, got {type(_got).__name__}"
        assert _got == reference.n_tokens(_H, _W, _P, _cls), \
            f"n_tokens({_H}, {_W}, {_P}, cls_token={_cls}) = {_got}, expected {reference.n_tokens(_H, _W, _P, _cls)}"
### END HIDDEN TESTS

# %% [markdown]
# ViT-Base reads 224 × 224 photos with `P = 16`. The same model on bigger photos, and this lesson's
# tiny images with `P = 4`:

# %%
print(f"{'image':>11} {'P':>3} {'tokens n':>9} {'n² scores per head':>19}")
for side, P in [(32, 4), (224, 16), (384, 16), (1024, 16), (224, 8)]:
    n = n_tokens(side, side, P)
    print(f"{side:>4} × {side:<4} {P:>3} {n:>9,} {n * n:>19,}")
base, big = n_tokens(224, 224, 16), n_tokens(1024, 1024, 16)
print(f"1024 px against 224 px: {(1024 / 224) ** 2:.0f}× the pixels, {(big / base) ** 2:.0f}× the scores per head")

# %% [markdown]
# 224 px with `P = 16` gives 197 tokens: a short sentence. At 1024 px it is 4,097 tokens and each
# head's score matrix has almost 17 million entries — over 400 times more than at 224 px, for 21
# times more pixels. Halving `P` multiplies the tokens by 4 and the scores by 16: the `n²` bill of lesson
# 04 is why ViTs use large patches, and why high-resolution vision needs cheaper attention (the next
# course's Swin Transformer).
#
# ### Try it: the patch size
#
# Slide `P` over the sizes that tile a 32-pixel image. Small patches see fine detail but make long
# sequences; large patches are cheap but each token must summarise a big piece of the image. (Where
# widgets do not run, you see the picture for `P = 4`.)

# %% tags=["hide-in-slides"]
display(patch_size_explorer(image, patch_size=4))

# %% [markdown]
# ## The patch embedding is a convolution
#
# Step 3 multiplies every flattened patch by the same matrix `E` of shape `(C·P·P, D)` and adds a
# bias `b`: `tokens = patchify(x) @ E + b`. Now look at a convolution with `D` filters of size
# `C × P × P` and **stride `P`**: each output position is the dot product of every filter with one
# `P × P` window, plus the filter's bias. With stride = kernel size the windows do not overlap and
# tile the image — they are exactly the patches. So the two compute the same numbers, and ViT code
# writes its patch embedding as `nn.Conv2d(C, D, kernel_size=P, stride=P)`.
#
# One detail: `nn.Conv2d` stores its weight as `(D, C, P, P)`. Flattening each filter in
# `(C, P, P)` order gives `(D, C·P·P)`, the layout `nn.Linear` uses too; the course applies weights
# as `x @ w`, so the matrix is its transpose.
#
# **Exercise 3 (3 points).** Write `conv_to_linear(conv)` for an `nn.Conv2d` with kernel = stride =
# `P`, returning `(weight, bias)` of shapes `(C·P·P, D)` and `(D,)` such that
# `patchify(x, P) @ weight + bias` equals `conv(x).flatten(2).transpose(1, 2)`, the conv's output
# read as a token sequence. If the conv has no bias (`conv.bias is None`), return a zero bias, so
# the formula still works. Whether the two tensors still track gradients (`.detach()` or not) is
# up to you: the check compares their values only.

# %% nbgrader={"grade": false, "grade_id": "conv_to_linear", "locked": false, "schema_version": 3, "solution": true}
def conv_to_linear(conv):
    """The patch-embedding conv as a matrix (C·P·P, D) and a bias (D,); a zero bias if it has none."""
    ### BEGIN SOLUTION
    D = conv.out_channels
    weight = conv.weight.detach().reshape(D, -1).T  # (D, C, P, P) -> (D, C·P·P) -> (C·P·P, D)
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(D)
    return weight, bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "conv_to_linear_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check_conv_to_linear(conv_to_linear)
### BEGIN HIDDEN TESTS
from helpers import patches as reference  # noqa: E402 -- the course's own, for comparing
from helpers.checks.own_work import check_own_work  # noqa: E402

# a function that hands its work to the course's own version scores 0
check_own_work(conv_to_linear, check_conv_to_linear, "conv_to_linear")
# The calls below use the course's patchify, as the check does: one mistake, one charge.
from helpers.checks import course_callees

for seed in fresh_seeds(2):
    check_conv_to_linear(conv_to_linear, seed=seed, verbose=False)
_rng = np.random.default_rng(fresh_seeds(1)[0])
torch.manual_seed(int(_rng.integers(2**31)))
for _C, _bias in ((1, True), (3, True), (3, False)):
    _P, _D = int(_rng.choice([2, 4, 5])), int(_rng.integers(2, 20))
    _conv = nn.Conv2d(_C, _D, _P, stride=_P, bias=_bias)
    _x = torch.randn(2, _C, _P * int(_rng.integers(1, 5)), _P * int(_rng.integers(1, 5)))
    with quiet(), course_callees(conv_to_linear, "patchify", verbose=False):
        _w, _b = conv_to_linear(_conv)
    assert tuple(_w.shape) == (_C * _P * _P, _D) and tuple(_b.shape) == (_D,), \
        f"conv_to_linear gave shapes {tuple(_w.shape)} and {tuple(_b.shape)}, expected {(_C * _P * _P, _D)} and {(_D,)}"
    with torch.no_grad():
        _want = _conv(_x).flatten(2).transpose(1, 2)
        _got = reference.patchify(_x, _P) @ torch.as_tensor(_w).float() + torch.as_tensor(_b).float()
    expect_close(_got, _want, f"patchify(x) @ weight + bias against nn.Conv2d({_C}, {_D}, {_P}, stride={_P}, "
                 f"bias={_bias})", atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# The equivalence on a ViT-Base-sized patch embedding — 3 colour channels, `P = 16`, `D = 768` — and
# two random 224 × 224 images:

# %%
conv = nn.Conv2d(3, 768, kernel_size=16, stride=16)
x = torch.randn(2, 3, 224, 224)
weight, bias = conv_to_linear(conv)
with torch.no_grad():
    as_conv = conv(x).flatten(2).transpose(1, 2)  # (2, 196, 768)
    as_matrix = patchify(x, 16) @ weight + bias  # (2, 196, 768)
print("conv output as tokens:", tuple(as_conv.shape), " patchify @ weight + bias:", tuple(as_matrix.shape))
print(f"largest difference: {(as_conv - as_matrix).abs().max():.1e}")
print("weight:", tuple(weight.shape), "— C·P·P =", 3 * 16 * 16, "equals D = 768: a square matrix")

# %% [markdown]
# The differences are float32 rounding. Note the last line: for ViT-Base `C·P·P = 3·16·16 = 768 = D`,
# so a transposed weight has the right shape and runs without an error — only the values are
# wrong. That is why the check also tried a convolution with `D = C·P·P`.
#
# The equivalence has a consequence for what the model sees: the patch embedding is one linear map
# per patch, with no overlap. A shape that straddles a patch border is split between two or four
# tokens, and the split changes when the shape moves by one pixel. Keep that in mind for the
# experiment below.
#
# ## [CLS] and learned positions
#
# Two more pieces turn the patch tokens into the encoder's input, both met in lesson 05:
#
# - a learned **[CLS]** vector, the same for every image, put in front of the patches; after the
#   last layer its output is what the classifier reads (BERT's trick, kept by ViT);
# - a learned **position** vector for each of the `N + 1` slots, added to the tokens. Without it,
#   attention is permutation-equivariant and the model could not tell the top-left corner from the
#   bottom-right one.
#
# The tiny ViT of this lesson builds its input like this (from `experiments/vision.py`):

# %%
print(inspect.getsource(vision.TinyViT.tokens))

# %% [markdown]
# ## The experiment: do two opposite corners match?
#
# Each image has a small shape in each corner, drawn at a random offset and brightness on a noisy
# background. The label is 1 when the **top-left** and **bottom-right** shapes are the same kind.
# The other two corners are distractors: they may match either one and must be ignored. So a model
# has to recognise shapes, know *where* each one is, and bring together two regions about 20 pixels
# apart — a long-range interaction, the kind attention is built for.

# %%
image_task.plot_examples(examples, range(6))
plt.show()
print("shapes:", ", ".join(image_task.SHAPE_NAMES))
print(f"{image_task.N_TRAIN:,} training images (seed 0), {len(examples):,} test images (seed 1), "
      f"{examples.labels.mean():.0%} of the test images match")

# %% [markdown]
# Two models of about the same size, trained the same way (AdamW with a 2-epoch warm-up and cosine
# decay, 20 epochs, batches of 128, the same 10,000 training images; `experiments/vision.py`), each
# from three different random seeds:
#
# - **tiny ViT**: `P = 4` (64 patches + [CLS] = 65 tokens), `D = 32`, 4 pre-norm layers of 2 heads,
#   learned positions; it reads [CLS];
# - **small CNN**: three blocks of two 3 × 3 convolutions (with batch norm) and a 2 × 2 max-pool, then
#   a small MLP on the 4 × 4 feature map.
#
# The recipe is the same for both and was tuned for neither. Six training runs take too long for a
# lesson, so it loads the weights and results shipped in `data/vision/` (made by
# `python -m experiments.vision`). Set `RETRAIN = True` to train them again here.

# %%
RETRAIN = False  # True: train both models from seeds 0, 1, 2 again (8 to 30 minutes on 2 cores)
source = Path("retrained_vision") if RETRAIN else vision.DATA_DIR
if RETRAIN:
    vision.run_experiment(out_dir=source)
results = vision.load_results(source)
models = {name: vision.load_model(name, seed=0, directory=source) for name in vision.MODEL_NAMES}

test_x, test_y = examples.tensors()  # (2000, 1, 32, 32), (2000,)
predictions = {}
for name, model in models.items():
    with torch.no_grad():
        predictions[name] = (model(test_x) > 0).long().numpy()  # (2000,) predicted labels of seed 0
    stored = results["models"][name]["runs"][0]["test_accuracy"]
    print(f"{name} seed 0 re-measured here: {(predictions[name] == examples.labels).mean():.2%} "
          f"(stored: {stored:.2%}); {results['models'][name]['parameters']:,} parameters")
print()
print(vision.runs_table(results))
vision.plot_histories(results)
plt.show()
for sentence in vision.run_summary(results).values():
    print(sentence)

# %% [markdown]
# The CNN wins in every seed. It does not get there at once: read off the epoch at which each of
# its curves passes 90% and then 99%. The ViT spends its first epochs at chance, climbs late and
# slowly, and ends far below the CNN.
#
# Look at its training accuracy: barely above its test accuracy. The ViT is not overfitting — it
# is **underfitting**: with this recipe it has not even fit the 10,000 images it was trained on.
# These runs alone cannot say what the ViT is short of: more images, more epochs or another learning
# rate might each change the picture. One of the three can be varied cheaply here, since the images
# are generated; a section below does it.
#
# Which part of the rule did the ViT find? Split the test accuracy of the seed-0 models by the pair
# of shapes being compared:

# %%
fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.8), layout="constrained")
for ax, name in zip(axes, models):
    table = image_task.accuracy_by_pair(examples, predictions[name])
    image_task.plot_pair_accuracy(table, ax=ax, title=f"{name}: test accuracy by pair")
plt.show()

# %% [markdown]
# The CNN's table is close to 1 for every pair. The ViT's has a pattern: it is nearly always right
# when a shape with straight strokes (square, plus, bars) meets one with diagonal strokes (cross,
# diamond), and mostly right for matching pairs, but two *different* straight-stroked shapes, or a
# cross and a diamond, it calls a match. It has learned the direction of the strokes, not the shapes.
#
# Why does the CNN find the shapes so easily? Its inductive bias: a 3 × 3 filter looks at
# neighbouring pixels only, and the same filter slides over the whole image, so a shape produces the
# same features wherever it sits. The ViT has neither assumption built in. Its patch embedding sees
# each 4 × 4 piece on its own, and a shape moved by one pixel is cut into different pieces; telling a
# square from a plus means learning, from examples, how fragments at neighbouring positions fit
# together. Attention *can* learn that; with this budget it did not.
#
# At full scale the ViT paper saw something related, and measured it by changing the data:
# trained on ImageNet alone (1.3 million images), its ViTs did worse than comparable ResNets;
# pre-trained on 14 or 300 million images they caught up and overtook them (Dosovitskiy et al.,
# 2021).
#
# ### Fewer and more images
#
# `python -m experiments.vision --sweep` trained both models again, with the same recipe and the same
# three seeds, on 2,500, 5,000 and 20,000 generated images (`data/vision/n_train_*/`); the lesson
# loads those runs next to the 10,000-image ones above. Before you run the cell: which model do you
# expect to gain more from more images, and what do you expect the CNN to do with only 2,500?

# %%
sweep = vision.load_sweep()  # the shipped runs of every size, 10,000 included
vision.plot_sweep(sweep)
plt.show()
print(vision.sweep_table(sweep))
print()
for sentence in vision.sweep_reading(sweep).values():
    print(sentence)

# %% [markdown]
# Each model needs data in its own way. A model that gets its training images right and new ones
# wrong *memorises*; one that gets both right *generalises*; one that gets neither right
# *underfits*. With 2,500 or 5,000 images the CNN learns its training images by heart and stays
# close to chance on new ones; from 10,000 on, it generalises. The ViT underfits at every size.
# With 2,500 or 5,000 images it stays within 3 points of chance on new images, and it is far from
# right on its own training images too; only from 10,000 on does its test accuracy climb, and with
# 20,000 images its three seeds land close together.
#
# Two cautions before reading more into it. The recipe keeps 20 epochs at every size, so more
# images also means more training steps: the sweep shows what more data *and* more steps do
# together, not what data alone does. And the CNN is at 100% from 10,000 images on — a ceiling,
# where no gain could show. 20,000 images is nothing like the ViT paper's millions, so this sweep
# neither confirms nor contradicts the paper, and whether the tiny ViT would ever catch up, it
# cannot say. How to make ViTs learn from less data is the subject of the next course.
#
# ## Where does the tiny ViT look?
#
# Even a ViT that underfits can have learned something about *where* to look. Below, for four test
# images, how much the seed-0 ViT's [CLS] attends to each patch in each layer (averaged over the 2 heads; the
# colour scale tops out at each map's maximum, or at 0.1 if that is smaller, so a nearly uniform map
# stays dark).

# %%
vit = models["vit"]
shown = [0, 1, 2, 3]
maps = vit.cls_attention(test_x[shown])  # (L, B, H, 8, 8): [CLS]'s weights over the 64 patches
verdict = ["differ", "match"]  # label 1: the two deciding corners hold the same shape
titles = [f"{verdict[examples.labels[i]]}; ViT: {verdict[predictions['vit'][i]]}" for i in shown]
plot_cls_attention(test_x[shown], maps, titles)
plt.show()

# %% [markdown]
# Averaged over 200 test images, the share of [CLS]'s attention that lands in each quadrant
# ([CLS]'s attention to itself is the rest of each row), for the seed-0 ViT and then, summed over
# the two deciding corners and over the two distractors, for all three seeds:

# %%
shares = quadrant_shares(vit.cls_attention(test_x[:200]))  # (L, 4)
print(f"{'seed 0':>8}" + "".join(f"{corner:>14}" for corner in image_task.CORNERS))
for layer, row in enumerate(shares, start=1):
    print(f"layer {layer:>2}" + "".join(f"{share:>14.1%}" for share in row))
deciding, distractors = list(image_task.COMPARED), [1, 2]  # top-left + bottom-right; the other two
print("\n[CLS]'s attention on the deciding corners / on the distractors")
best = []  # per seed: the layer that reads the deciding corners most, and its two shares
for seed in results["seeds"]:
    model = vit if seed == 0 else vision.load_model("vit", seed=seed, directory=source)
    rows = quadrant_shares(model.cls_attention(test_x[:200]))  # (L, 4)
    on, off = rows[:, deciding].sum(axis=1), rows[:, distractors].sum(axis=1)  # (L,), (L,)
    print(f"seed {seed}: " + "   ".join(f"layer {layer} {a:5.1%} / {b:5.1%}"
                                      for layer, (a, b) in enumerate(zip(on, off), start=1)))
    best.append((int(on.argmax()) + 1, on.max(), off[on.argmax()]))
print(f"\nIn each seed the layer that reads the deciding corners most (seed by seed: layer "
      f"{', '.join(str(layer) for layer, _, _ in best)}) gives them {min(b[1] for b in best):.0%} to "
      f"{max(b[1] for b in best):.0%} of [CLS]'s attention, and the distractors "
      f"{min(b[2] for b in best):.0%} to {max(b[2] for b in best):.0%}.")

# %% [markdown]
# In every seed, some layer of the ViT sends most of [CLS]'s attention to the two corners that
# decide the label: in one step it reads regions 20 pixels apart. The distractors are not ignored,
# though — they keep a share that differs from layer to layer and from seed to seed. The CNN's
# window grows by a few pixels per layer and spans the two corners only in its last layers.
# The two heads of one layer need not agree — here the last layer of the seed-0 ViT for the first
# image:

# %%
plot_head_attention(test_x[0], maps[:, 0], layer=3)
plt.show()

# %% [markdown]
# The ViT was never told that its 64 patches form an 8 × 8 grid: its position vectors are free
# parameters. After training, the cosine similarity between one patch's position vector and every
# other patch's shows what it learned — here for the patch in each corner of the image (red cross):

# %%
grid = (8, 8)
plot_position_similarity(vit.positions[0, 1:], grid, [0, 7, 56, 63])  # skip [CLS]'s slot
plt.show()

# %% [markdown]
# The top-left and bottom-right quadrants resemble each other and differ from the other two, while
# the corners of the distractors show little structure. The positions learned what this task needs —
# "is this one of the two corners that count?" — rather than a general map of rows and columns.
# Full-size ViTs trained on much more varied images do learn row and column structure this way
# (Dosovitskiy et al., 2021).
#
# As always (lesson 07), an attention map shows where information is read from, not how it is used:
# here the ViT looks at the right corners and still confuses a square with a plus.
#
# ## Attention in vision, before and beside ViT
#
# - **Non-local blocks** (Wang et al., 2018) added attention *inside* CNNs: a block in which every
#   position of a feature map attends to every other (in space, and in time for video). One of their
#   variants is exactly the softmax attention of lesson 02. The CNN keeps its local filters; the
#   block adds long-range interaction in one step.
# - **Attention can express convolution** (Cordonnier et al., 2020): a multi-head self-attention
#   layer with relative positional encodings and enough heads — one per kernel position, so 9 for a
#   3 × 3 kernel — can represent any convolutional layer. When they trained such layers on images,
#   many heads of the first layers settled on one small offset each — this head the pixel just
#   above, that head the pixel to the left — so that together they worked much like a kernel.
#   Being able to express a convolution is not the same as finding one, though: within this
#   lesson's training budget the tiny ViT did not.

# %% [markdown]
# **Think (2 points, graded by hand).** The CNN and the ViT saw the same 10,000 images. In two or
# three sentences: what does the CNN "know" before training that the ViT has to learn from the data,
# and why does it matter on this task, where each shape sits at a random offset?

# %% [markdown] nbgrader={"grade": true, "grade_id": "inductive_bias", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# === BEGIN MARK SCHEME ===
# Full marks: names (1) locality — a convolution combines neighbouring pixels, so a shape's strokes
# are seen together — and (2) weight sharing / translation equivariance — the same filters slide over
# every position, so a shape gives the same features wherever it is. The ViT's patch embedding sees
# each P × P piece separately, a shifted shape is cut into different pieces, and its positions are
# learned; it must learn from examples how fragments fit together at every offset, and with this
# lesson's recipe (20 epochs on 10,000 images) it did not manage to, even on its training images.
# One point for either idea with the link to random offsets.
# === END MARK SCHEME ===

# %% [markdown]
# ## Quiz
#
# Set each answer to a letter, for example `quiz_1 = "a"`, and run the check below it. The check
# only confirms that your answer is recorded; the grade comes with the feedback. Working on your
# own? Save the notebook, then run `make check LESSON=09_vision_patches` in a terminal: it grades
# the notebook as an instructor would and shows each verdict with its reason.
#
# **1.** A ViT reads a 384 × 384 RGB image with `P = 16` and a [CLS] token. How many tokens?
#
# - (a) 25
# - (b) 576
# - (c) 577
# - (d) 1,729

# %% nbgrader={"grade": false, "grade_id": "quiz_1", "locked": false, "schema_version": 3, "solution": true}
quiz_1 = None
### BEGIN SOLUTION
quiz_1 = "c"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_1_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_1, "abcd", "quiz_1")
### BEGIN HIDDEN TESTS
grade_choice(quiz_1, "c", "384 / 16 = 24 patches per side, 24 · 24 = 576 patches, plus one [CLS] token; the "
             "colour channels make each token longer (3·16·16 numbers), not more numerous, "
             "and 25 counts one row of patches")
### END HIDDEN TESTS

# %% [markdown]
# **2.** On a 224 × 224 image you halve the patch size from 16 to 8. Each head's matrix of
# attention scores gets about…
#
# - (a) the same size
# - (b) 2 times bigger
# - (c) 4 times bigger
# - (d) 16 times bigger

# %% nbgrader={"grade": false, "grade_id": "quiz_2", "locked": false, "schema_version": 3, "solution": true}
quiz_2 = None
### BEGIN SOLUTION
quiz_2 = "d"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_2_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_2, "abcd", "quiz_2")
### BEGIN HIDDEN TESTS
grade_choice(quiz_2, "d", "half the patch size gives 4 times the patches (197 -> 785 tokens), and the score "
             "matrix is n × n: about 16 times the entries")
### END HIDDEN TESTS

# %% [markdown]
# **3.** A ViT cuts 224 × 224 RGB images into 16 × 16 patches and embeds each in `D = 768`
# features. Which PyTorch layer computes the same patch embedding?
#
# - (a) `nn.Conv2d(3, 768, kernel_size=16, stride=16)`
# - (b) `nn.Conv2d(3, 768, kernel_size=16, stride=1)`
# - (c) `nn.Linear(3, 768)`, applied to every pixel
# - (d) `nn.Conv2d(768, 3, kernel_size=16, stride=16)`

# %% nbgrader={"grade": false, "grade_id": "quiz_3", "locked": false, "schema_version": 3, "solution": true}
quiz_3 = None
### BEGIN SOLUTION
quiz_3 = "a"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz_3_check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_choice(quiz_3, "abcd", "quiz_3")
### BEGIN HIDDEN TESTS
grade_choice(quiz_3, "a", "non-overlapping P × P patches, each through the same linear map, are a "
             "convolution whose kernel and stride are both P, from the 3 colour channels to D "
             "= 768 features; stride 1 would slide the kernel one pixel at a time (209 × 209 "
             "overlapping patches), a Linear on each pixel sees no neighbours, and nn.Conv2d "
             "takes in_channels first, then out_channels")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - A ViT cuts the image into `P × P` patches, flattens each in `(C, P, P)` order, in row-major patch
#   order, and projects it: `(B, C, H, W)` → `(B, N, C·P·P)` → `(B, N, D)`.
# - The patch embedding is a convolution with kernel = stride = `P`; its `(D, C, P, P)` weight,
#   flattened and transposed, is the `(C·P·P, D)` matrix.
# - Tokens: `(H/P)·(W/P)` + 1 for [CLS]; 197 at 224 px and `P = 16`, 4,097 at 1024 px. Halving `P`
#   costs 4× the tokens and 16× the attention scores.
# - [CLS] collects the answer; learned positions tell the patches apart — and can learn the grid.
# - On our corner task, with one recipe for both and three seeds each, the small CNN beat the tiny
#   ViT, which underfit: it was hardly more accurate on its training images than on new ones.
#   Locality and weight sharing are built into the CNN; the ViT has to learn them. With fewer
#   images the CNN memorised them; with more the ViT kept improving while still underfitting —
#   with the epochs fixed, more images also meant more training steps.
#
# **Next course:** Vision Transformers at scale — ViT and Swin, why ViTs need so much data, and
# Swin's idea of letting each patch attend only within a small window that moves from one layer to
# the next, so that attention becomes local again, as a convolution is by construction.
