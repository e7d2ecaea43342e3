"""Attention from Scratch: the helpers every lesson imports.

Modules, by what a learner looks for:

- ``attention``   reference implementations the checks compare against
- ``checks``      the functions grade cells call; each names the likely mistake
- ``quiz``        multiple-choice answers: format checks and grading
- ``calculator``  the step-by-step attention lookup behind the lesson 02 widget
- ``sentiment``   the course-review sentiment task of lesson 01
- ``models``      lesson 01's plain RNN, LSTM and attention classifier
- ``training``    ``python -m helpers.training``: trains them into data/sentiment (and a benchmark)
- ``recurrence``  lesson 01: the recurrence, gradients by position, and their figures
- ``scaling``     lesson 03: the √d_k argument measured (score spread, softmax saturation)
- ``masking``     lesson 04: causal and padding masks, the KV cache, the n² bill measured
- ``positional``  lesson 05: sinusoidal encoding and RoPE references, their figures and widget
- ``heads``       lesson 06: heads, nn.MultiheadAttention's layout, head ablation of a trained model
- ``head_count``  lesson 06: ``python -m helpers.head_count`` trains the one-head classifier into data/heads
- ``block``       lesson 07: LayerNorm, FFN, encoder and decoder blocks, pre- vs post-norm
- ``inspect_models``  lesson 07: what the trained models look at (the [CLS] attention widget)
- ``cost``        lesson 08: multiply-adds of a layer, time and memory of three attentions
- ``patches``     lesson 09: patches, token counts, the patch-size widget
- ``image_task``  lesson 09: the generated corner-matching image task
- ``vision``      lesson 09: the tiny ViT and the small CNN; ``python -m helpers.vision`` trains them
- ``claims``      lesson 10: the measurements behind the claims
- ``plots``       figures (each takes ``ax=None`` and returns the Axes)
- ``widgets``     thin ipywidgets wrappers with a static fallback
- ``paths``       where the shipped results are: data/ of the checkout, or $ATTENTION_DATA
- ``runtime``     a fixed number of torch threads for steady timings and reproducible training
- ``build``       ``python -m helpers.build``: solution notebooks and student release
- ``slides``      ``python -m helpers.slides``: offline reveal.js decks of the lessons

For instructors, ``grading/`` holds the grading machinery (nbgrader settings, the sandbox,
warm kernels, the integrity scan, class grading); no lesson imports it.
"""

import os as _os
import sys as _sys

if _os.environ.get("NBGRADER_VALIDATING") == "1" and type(_sys.stdout).__module__.startswith("ipykernel"):
    # `nbgrader validate` counts any text on stderr as a failed cell; grading counts errors only
    # (a warning costs no points). While a notebook is validated, warnings go to stdout.
    _sys.stderr = _sys.stdout
