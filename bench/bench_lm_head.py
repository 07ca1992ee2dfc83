"""The output projection of a decode step on the CPU: reordered (oneDNN) vs plain products.

A [vocab, hidden] fp32 weight (default the Llama 3 vocabulary over hidden 256, bench-llama's
shape) times a few rows: oneDNN's reordered copy (`pcache.engine.models.onednn_linear`), MKL's
weight @ hidden^T and `nn.Linear`'s hidden @ weight^T, each timed `--repeat` times per round,
the three interleaved round by round; prints each one's median and interquartile range in ms
and the load average before and after.

Usage:
    python bench/bench_lm_head.py --rows 1 4 8 --threads 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    import torch

    from pcache.engine.models.onednn_linear import ReorderedWeight

    torch.set_num_threads(args.threads)
    weight = torch.randn(args.vocab, args.hidden)
    reordered = ReorderedWeight()
    if not reordered.prepare(weight):
        raise SystemExit("this torch has no oneDNN linear ops: nothing to compare")
    load_before = os.getloadavg()[0]
    for rows in args.rows:
        hidden = torch.randn(rows, args.hidden)
        ways = {
            "reordered": lambda hidden=hidden: reordered.linear(hidden, weight),
            "weight @ hidden^T": lambda hidden=hidden: torch.mm(weight, hidden.t()),
            "hidden @ weight^T": lambda hidden=hidden: torch.nn.functional.linear(hidden, weight),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for way in ways.values():
            way()  # warm-up
        for _ in range(args.rounds):
            for name, way in ways.items():
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    way()
                    times[name].append(1000 * (time.perf_counter() - start))
        for name, measured in times.items():
            q1, median, q3 = statistics.quantiles(measured, n=4)
            print(f"{rows} rows, {name:18}: {median:6.2f} ms (IQR {q1:.2f}-{q3:.2f})")
    print(f"{args.threads} threads; load {load_before:.2f} -> {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
