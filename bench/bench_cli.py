"""Wall time of whole `pcache` commands (start-up included): median of N runs each.

Run: python bench/bench_cli.py [--runs 5]
Targets: `pcache --help` < 0.3 s; `pcache diff samples/a.json samples/b.json` < 1.0 s;
tokenize + hash of a 100k-token request < 1 s (bench/bench_tokenize.py measures it in-process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "pcache --help": ["--help"],
    "pcache diff samples/a.json samples/b.json": ["diff", "samples/a.json", "samples/b.json"],
    "pcache hash samples/a.json": ["hash", "samples/a.json"],
}


def median_wall(arguments: list[str], runs: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pcache", *arguments],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python_start = statistics.median(
        [_time([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
    )
    print(f"median of {args.runs} runs (python itself starts in {python_start:.3f} s)")
    for label, arguments in COMMANDS.items():
        print(f"  {label:<45} {median_wall(arguments, args.runs):.3f} s")


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=False)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
