"""How torch runs the course's measurements and training: a fixed number of threads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch threads, then restore the previous number.

    One thread makes timings on a busy machine far steadier (more threads mostly wait for each
    other) and makes training reproducible byte for byte.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
