"""The hidden tests' guard against delegation: an exercise function that hands its work to the
course's own implementation of the same exercise scores 0, however that implementation was
reached (``reference.attention``, an import inside the function, an alias)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator

from .core import CheckFailed

# Where the course keeps its own implementation of every exercise function, by name.
COURSE_MODULES = {
    "rnn_forward": "helpers.recurrence", "gradient_by_position": "helpers.recurrence",
    "softmax": "helpers.attention", "attention": "helpers.attention", "self_attention": "helpers.attention",
    "score_std": "helpers.scaling", "softmax_jacobian": "helpers.scaling", "entropy": "helpers.scaling",
    "causal_mask": "helpers.masking", "padding_mask": "helpers.masking",
    "masked_attention": "helpers.masking",
    "causal_attention_with_cache": "helpers.masking", "attention_matrix_bytes": "helpers.masking",
    "sinusoidal_encoding": "helpers.positional", "rope": "helpers.positional",
    "split_heads": "helpers.heads", "merge_heads": "helpers.heads", "multi_head_attention": "helpers.heads",
    "layer_norm": "helpers.block", "feed_forward": "helpers.block", "encoder_block": "helpers.block",
    "layer_macs": "helpers.cost", "score_share": "helpers.cost", "online_softmax_attention": "helpers.cost",
    "patchify": "helpers.patches", "n_tokens": "helpers.patches", "conv_to_linear": "helpers.patches",
    "shift_targets": "helpers.gpt", "lm_loss": "helpers.gpt", "gpt_logits": "helpers.gpt",
    "lr_at": "helpers.gpt", "train_step": "helpers.gpt", "sample_next": "helpers.gpt",
    "repeat_kv": "helpers.gpt", "kv_cache_bytes": "helpers.gpt",
}


def course_code(name: str):
    """The code object of the course's own implementation of the exercise function ``name``."""
    return inspect.unwrap(getattr(importlib.import_module(COURSE_MODULES[name]), name)).__code__


@contextlib.contextmanager
def watching(fn: Callable, name: str) -> Iterator[list[str]]:
    """Inside the block, note every time the course's ``name`` runs *inside* a call of ``fn``.

    Calls the checks make themselves (to compare) are not inside ``fn`` and are not noted. The
    yielded list holds one line per delegated call.
    """
    target, own = course_code(name), getattr(inspect.unwrap(fn), "__code__", None)
    seen: list[str] = []

    def profile(frame, event, arg):
        if event != "call" or frame.f_code is not target or own is None:
            return
        caller = frame.f_back
        while caller is not None:
            if caller.f_code is own:
                seen.append(f"{COURSE_MODULES[name]}.{name}")
                return
            caller = caller.f_back

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def check_own_work(fn: Callable, check: Callable, name: str | None = None) -> None:
    """Run ``check(fn)`` once more and fail if ``fn`` delegated to the course's own version of itself.

    The exercise is named by the check (``check_attention`` checks ``attention``) unless ``name``
    is given: what the learner called their function does not matter.
    """
    name = name or getattr(inspect.unwrap(check), "__name__", "").removeprefix("check_")
    if name not in COURSE_MODULES:
        raise ValueError(f"no course implementation of {name!r}; known: {', '.join(COURSE_MODULES)}")
    with watching(fn, name) as seen:
        check(fn, verbose=False)
    if seen:
        raise CheckFailed(
            f"{name} hands its work to the course's own {name} ({seen[0]}) — the exercise asks you to "
            f"compute it yourself, so this exercise scores 0 until {name} does the work in your own code")
