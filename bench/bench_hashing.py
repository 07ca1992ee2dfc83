"""Hashing throughput, side by side in one run on the same long token list.

Compares, per 16-token block over the same tokens:
  - pcache's sha256_cbor chain (`pcache.cache.hashing.block_hashes`);
  - the straightforward way: cbor2.dumps((parent, tuple(block), None)) then hashlib.sha256;
  - a bare hashlib.sha256 loop over the very same CBOR payloads (the hash's own limit);
  - pcache's own namespaced chain and vLLM's default pickle chain, for reference.

Run: python bench/bench_hashing.py [--tokens 2000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

import cbor2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcache.cache.hashing import HashSettings, block_hashes, vllm_none_hash


def straightforward(tokens: list[int], size: int) -> list[bytes]:
    parent = vllm_none_hash("sha256_cbor")
    out = []
    for start in range(0, len(tokens) - size + 1, size):
        payload = cbor2.dumps((parent, tuple(tokens[start : start + size]), None), canonical=True)
        parent = hashlib.sha256(payload).digest()
        out.append(parent)
    return out


def payloads(tokens: list[int], size: int) -> list[bytes]:
    parent = vllm_none_hash("sha256_cbor")
    out = []
    for start in range(0, len(tokens) - size + 1, size):
        out.append(cbor2.dumps((parent, tuple(tokens[start : start + size]), None)))
        parent = hashlib.sha256(out[-1]).digest()
    return out


def bare_sha256(data: list[bytes]) -> None:
    sha256 = hashlib.sha256
    for payload in data:
        sha256(payload).digest()


def median_seconds(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2_000_000)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 200_000, size=args.tokens).tolist()
    size = args.block_size
    cbor_settings = HashSettings(algo="sha256_cbor", block_size=size)
    assert block_hashes(tokens, cbor_settings) == straightforward(tokens, size)
    data = payloads(tokens, size)
    rows = {
        "pcache sha256_cbor chain": lambda: block_hashes(tokens, cbor_settings),
        "straightforward cbor2 + sha256": lambda: straightforward(tokens, size),
        "bare sha256 over the same payloads": lambda: bare_sha256(data),
        "pcache namespaced chain (default)": lambda: block_hashes(
            tokens, HashSettings(block_size=size)
        ),
        "vLLM sha256 (pickle) chain": lambda: block_hashes(
            tokens, HashSettings(algo="sha256", block_size=size)
        ),
    }
    results = {name: median_seconds(function, args.repeat) for name, function in rows.items()}
    print(f"{args.tokens:,} tokens, block size {size}, median of {args.repeat}")
    for name, seconds in results.items():
        print(f"  {name:<38} {seconds * 1000:8.1f} ms  {args.tokens / seconds / 1e6:7.1f} M tok/s")
    fast = results["pcache sha256_cbor chain"]
    slow = results["straightforward cbor2 + sha256"]
    bare = results["bare sha256 over the same payloads"]
    print(f"speed-up over the straightforward way: {slow / fast:.2f}x")
    print(f"fraction of bare sha256 throughput:    {bare / fast:.2f}")


if __name__ == "__main__":
    main()
