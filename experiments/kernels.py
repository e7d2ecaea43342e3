"""Run an experiment's jobs under several of PyTorch's CPU kernel paths of this machine.

A trained result can change with the way floats are rounded: PyTorch picks its vectorised
kernels by what the CPU offers (``ATEN_CPU_CAPABILITY`` forces a lower level), and MKL picks
its own (``MKL_ENABLE_INSTRUCTIONS``). Each path reorders the same sums, so the first steps of a
run agree to rounding, and a chaotic run can end elsewhere. Training the same seeds under
several paths on one machine shows how far a statement about a run can be trusted on another.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

# name -> the variables that select it; "native" is what PyTorch picks on this CPU by itself.
KERNEL_PATHS: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
    "avx2, MKL avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}
SELECTORS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


def check_paths(names: Sequence[str]) -> None:
    """A ValueError naming any kernel path this module does not know."""
    unknown = [n for n in names if n not in KERNEL_PATHS]
    if unknown:
        raise ValueError(f"unknown kernel paths {unknown}; choose from {list(KERNEL_PATHS)}")


def this_path() -> dict[str, str]:
    """What the running process computes with: torch's CPU capability, the selectors, the CPU."""
    return {"capability": torch.backends.cpu.get_cpu_capability(),
            **{k: os.environ[k] for k in SELECTORS if k in os.environ},
            "cpu": _cpu_name()}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    """os.environ with ``changes`` and without the other selectors, for the processes started inside."""
    before = {k: os.environ.get(k) for k in (*SELECTORS, *changes)}
    for k in SELECTORS:
        os.environ.pop(k, None)
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_under(path: str, job: Callable, jobs: Sequence[tuple], processes: int = 2) -> list:
    """``job(*args)`` for every ``args`` of ``jobs``, in fresh processes computing with ``path``.

    The selectors are read when PyTorch starts, so each path gets worker processes of its own
    (spawned, so that none inherits a started PyTorch). ``job`` must be importable by name.
    """
    check_paths([path])
    with _environment(KERNEL_PATHS[path]):
        with multiprocessing.get_context("spawn").Pool(max(1, min(processes, len(jobs)))) as pool:
            return pool.starmap(job, jobs, chunksize=1)
