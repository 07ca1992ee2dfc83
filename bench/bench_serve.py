"""TTFT of `pcache serve` with its prefix cache off and on, measured through `replay --endpoint`.

One `pcache serve` child (loopback, a free port, stopped by its PID at the end) serves the
model; the trace is replayed with `--compare-cache` `--repeat` times. Each round is a cache-off
pass (a unique cache_salt per request) then a cache-on pass after a reset, same arrivals; the
script prints each round's TTFT p50 off and on, then the medians and the spread (min-max)
over the rounds, and checks that the server's cached tokens equal the prediction in every
cache-on pass of a serial replay (it exits 1 if not).

Usage:
    python bench/bench_serve.py                      # tiny, chunked prefill of 64, serial
    python bench/bench_serve.py --trace T.jsonl --max-concurrency 8 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from serve_child import start_server, stop_server  # noqa: E402

from pcache.replayer.endpoint.options import EndpointOptions  # noqa: E402
from pcache.traces.readers import read_trace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", default=str(ROOT / "samples/traces/shared_prefix_hash_ids.jsonl")
    )
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--max-num-batched-tokens", type=int, default=64)
    parser.add_argument("--max-concurrency", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import httpx

    from pcache.replayer.endpoint.driver import replay_endpoint

    child, url = start_server(
        "--model", args.model, "--max-num-batched-tokens", str(args.max_num_batched_tokens)
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or child.poll() is not None:
                raise SystemExit("pcache serve never became healthy")
            time.sleep(0.1)
        options = EndpointOptions(
            url=f"{url}/v1", model=args.model, compare_cache=True,
            max_concurrency=args.max_concurrency, ignore_eos=True, max_output_tokens=8,
        )  # fmt: skip
        trace = read_trace(args.trace, keep_requests=True)
        offs, ons, exact = [], [], True
        print(
            f"{args.trace}: {len(trace.records)} requests, {args.model}, chunked prefill of"
            f" {args.max_num_batched_tokens}, max concurrency {args.max_concurrency}"
        )
        for round_ in range(args.repeat):
            data = replay_endpoint(trace, options).to_dict()
            comparison = data["compare_cache"]
            off, on = comparison["cache_off"]["p50_ttft_ms"], comparison["cache_on"]["p50_ttft_ms"]
            offs.append(off)
            ons.append(on)
            exact &= data["cached_tokens"] == data["predicted_cached_tokens"]
            print(f"round {round_ + 1}: TTFT p50 off {off:.1f} ms, on {on:.1f} ms,"
                  f" x{off / on:.2f}; cached {data['total_cached_tokens']} of"
                  f" {data['total_input_tokens']} prompt tokens"
                  f" (predicted {data['total_predicted_cached_tokens']})")  # fmt: skip
        ratios = [off / on for off, on in zip(offs, ons, strict=True)]
        print(f"median over {args.repeat} rounds: off {statistics.median(offs):.1f} ms"
              f" [{min(offs):.1f}-{max(offs):.1f}], on {statistics.median(ons):.1f} ms"
              f" [{min(ons):.1f}-{max(ons):.1f}], speedup x{statistics.median(ratios):.2f}"
              f" [{min(ratios):.2f}-{max(ratios):.2f}]")  # fmt: skip
        print(f"server cached tokens == prediction in every round: {exact}")
        return 0 if exact or args.max_concurrency > 1 else 1
    finally:
        stop_server(child)


if __name__ == "__main__":
    raise SystemExit(main())
