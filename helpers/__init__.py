"""Attention from Scratch: the lesson library, the helpers every lesson imports.

Modules, by what a learner looks for:

- ``attention``   reference implementations the checks compare against
- ``checks``      the functions grade cells call; each names the likely mistake
- ``failure_text``  how a check's message is shown: the mistake first, then what was checked
- ``quiz``        multiple-choice answers: format checks and grading
- ``calculator``  the step-by-step attention lookup behind the lesson 02 widget
- ``sentiment``   the course-review sentiment task of lesson 01
- ``models``      lesson 01's plain RNN, LSTM and attention classifier
- ``trained``     the shipped trained ones (data/sentiment): load them, their test sets, ranges over seeds
- ``recurrence``  lesson 01: the recurrence, gradients by position (``recurrence_plots``: their figures)
- ``scaling``     lesson 03: the √d_k argument measured (score spread, softmax saturation)
- ``masking``     lesson 04: causal and padding masks, the KV cache, the n² bill measured
- ``positional``  lesson 05: sinusoidal encoding and RoPE references, their figures and widget
- ``heads``       lesson 06: heads, nn.MultiheadAttention's layout, head ablation of a trained model
- ``block``       lesson 07: LayerNorm, FFN, encoder and decoder blocks, pre- vs post-norm
- ``block_diagram``  lesson 07: the encoder and decoder blocks drawn
- ``inspect_models``  lesson 07: what the trained models look at (the [CLS] attention widget)
- ``cls_reading``  lesson 07: where [CLS] reads, per seed, layer and head
- ``cost``        lesson 08: multiply-adds of a layer, time and memory of three attentions
- ``patches``     lesson 09: patches, token counts, the patch-size widget
- ``image_task``  lesson 09: the generated corner-matching image task
- ``claims``      lesson 10: the measurements behind the claims
- ``gpt``         lesson 11: the tiny GPT, its corpus, loss, sampling and KV cache
- ``plots``       figures (each takes ``ax=None`` and returns the Axes)
- ``widgets``     thin ipywidgets wrappers with a static fallback
- ``paths``       where the shipped results are: data/ of the checkout, or $ATTENTION_DATA
- ``runtime``     a fixed number of torch threads for steady timings and reproducible training

Beside this library: ``experiments`` trains what the course ships in data/ (the lessons load it
from there), ``tooling`` builds the notebooks and the slides. Nothing here imports either of them,
except ``grading/``, the instructors' grading machinery (nbgrader settings, the sandbox, warm
kernels, the integrity scan, class grading, the student release), which builds the notebooks it
grades from with ``tooling.build``; no lesson imports ``grading``.
"""

import os as _os
import sys as _sys

if _os.environ.get("NBGRADER_VALIDATING") == "1" and type(_sys.stdout).__module__.startswith("ipykernel"):
    # `nbgrader validate` counts any text on stderr as a failed cell; grading counts errors only
    # (a warning costs no points). While a notebook is validated, warnings go to stdout.
    _sys.stderr = _sys.stdout
