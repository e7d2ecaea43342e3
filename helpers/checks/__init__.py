"""Check functions called by grade cells: each compares with a reference on random inputs
and, when it fails, names the likely mistake; ``hint()`` then gives the fix."""

from .core import CheckFailed, course_callees, expect_close, fresh_seeds, quiet
from .failure import hint
from .lookup import check_attention, check_self_attention, check_softmax
from .scaling import check_entropy, check_score_std, check_softmax_jacobian

__all__ = [
    "CheckFailed",
    "check_attention",
    "check_entropy",
    "check_score_std",
    "check_self_attention",
    "check_softmax",
    "check_softmax_jacobian",
    "course_callees",
    "expect_close",
    "fresh_seeds",
    "hint",
    "quiet",
]
