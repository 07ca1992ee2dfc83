"""Prefill bursts on two servers, alternately: N requests sent at once, each a fresh 256-token
prompt of token ids with `max_tokens` 1, timed from the first send to the last answer.

The servers are `bench/serve_ab.py`'s sides (`pcache serve` from a checkout, or `vllm`), started
once, each waited for, and kept up; both are stopped by their PIDs (vLLM: its process group) at
the end. With token-id prompts and one output token the burst is the engine's prefill steps and
the HTTP path, without tokenization or streaming. The prefix cache is reset before every burst;
a round times `--repeat` bursts of each size on A, then on B (the order flips every round).
Prints per side and burst size the median over all bursts with the min-max, then B / A.

Usage:
    python bench/serve_burst.py vllm . --rounds 3 [--sizes 1 3 4] [--repeat 8]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from serve_ab import add_server_arguments, set_up, start_side  # noqa: E402

PROMPT_TOKENS = 256


async def bursts(url: str, model: str, sizes: list[int], repeat: int, seed: int) -> dict:
    """Seconds of each burst, by size."""
    import httpx

    rng = random.Random(seed)
    times: dict[int, list[float]] = {size: [] for size in sizes}
    async with httpx.AsyncClient(timeout=120) as client:

        async def one(token_ids: list[int]) -> None:
            body = {"model": model, "prompt": token_ids, "max_tokens": 1, "temperature": 0}
            answer = await client.post(f"{url}/v1/completions", json=body)
            answer.raise_for_status()

        for size in sizes:
            for _ in range(repeat):
                (await client.post(f"{url}/reset_prefix_cache")).raise_for_status()
                prompts = [
                    [rng.randrange(1000, 120_000) for _ in range(PROMPT_TOKENS)]
                    for _ in range(size)
                ]
                started = time.perf_counter()
                await asyncio.gather(*(one(prompt) for prompt in prompts))
                times[size].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_arguments(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 4])
    parser.add_argument("--repeat", type=int, default=8)
    args = parser.parse_args()
    out, model, specs = set_up(args, "pcache-serve-burst-")
    times: dict[str, dict[int, list[float]]] = {"A": {}, "B": {}}
    with ExitStack() as stack:
        sides = {
            label: start_side(label, spec, args, model, out, stack) for label, spec in specs.items()
        }
        for side in sides.values():  # a fresh server's first bursts warm it: not counted
            asyncio.run(bursts(side.url, model, args.sizes, 1, -1))
        for round_ in range(args.rounds):
            for label in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
                side = sides[label]
                found = asyncio.run(bursts(side.url, model, args.sizes, args.repeat, round_))
                for size, values in found.items():
                    times[label].setdefault(size, []).extend(values)
                line = "  ".join(
                    f"{size}: {1000 * statistics.median(values):.1f} ms"
                    for size, values in found.items()
                )
                print(f"{label}{round_ + 1} {side.kind:7} burst medians  {line}", flush=True)
    print(f"medians over {args.rounds} rounds x {args.repeat} bursts [min-max], ms:")
    for size in args.sizes:
        medians = {}
        for label in ("A", "B"):
            values = times[label][size]
            medians[label] = statistics.median(values)
            print(
                f"  {label} {size} at once: {1000 * medians[label]:.1f}"
                f" [{1000 * min(values):.1f}-{1000 * max(values):.1f}]"
            )
        print(f"  B/A {size} at once: x{medians['B'] / medians['A']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
