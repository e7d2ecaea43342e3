"""Time and memory of three attention implementations, up to longer sequences than lesson 08 runs.

    python -m experiments.cost_benchmark                    # n = 256 … 4096, d = 64, median of 3
    python -m experiments.cost_benchmark --max-n 8192 --repeats 5

Prints the table (median time on one thread; peak MiB of the tensors alive at once, counted by
``helpers.cost.TensorMeter``) and, for each n, how much slower and hungrier naive attention is
than the blocked online-softmax version and than ``torch.nn.functional.scaled_dot_product_attention``.
Not run by the tests or the lesson: at n = 4096 naive attention alone holds 128 MiB of scores.
"""

from __future__ import annotations

import argparse
import platform
import sys

import torch

from helpers.cost import cost_ratios, cost_table, measure_methods


def sequence_lengths(max_n: int, min_n: int = 256) -> list[int]:
    """Powers of two from min_n up to max_n (both included when they are powers of two)."""
    if min_n < 1 or max_n < min_n:
        raise ValueError(f"need 1 ≤ min_n ≤ max_n, got min_n={min_n}, max_n={max_n}")
    ns, n = [], min_n
    while n <= max_n:
        ns.append(n)
        n *= 2
    return ns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-n", type=int, default=4096, help="longest sequence (default 4096)")
    parser.add_argument("--min-n", type=int, default=256, help="shortest sequence (default 256)")
    parser.add_argument("--d", type=int, default=64, help="width of queries, keys and values (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per point (default 3)")
    parser.add_argument("--block-size", type=int, default=64, help="key block of the online version")
    args = parser.parse_args(argv)
    ns = sequence_lengths(args.max_n, args.min_n)
    print(f"torch {torch.__version__}, {platform.machine()}, one thread; d = {args.d}, "
          f"block_size = {args.block_size}, median of {args.repeats}")
    points = measure_methods(ns, d=args.d, repeats=args.repeats, block_size=args.block_size)
    print(cost_table(points))
    print()
    print(cost_ratios(points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
