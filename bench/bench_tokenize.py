"""Tokenize + hash a ~100k-token chat request with the default tokenizer (gpt-oss): median of N.

Run: python bench/bench_tokenize.py [--runs 5] [--tokens 100000]
Target: < 1 s for the whole path (render the harmony format, tokenize with o200k_harmony, map
token starts, chain the block hashes). The encoding is loaded once beforehand; its load time is
printed separately. Phases are timed in the same run so their shares can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcache.cache.hashing import block_hashes
from pcache.pipeline import Settings, hash_request
from pcache.prompt.render import resolve_renderer
from pcache.prompt.request import Request, request_from_document

VOCABULARY = (
    *("the", "cache", "prefix", "block", "token", "request", "model", "server", "latency"),
    *("budget", "user", "agent", "tool", "call", "result", "error", "retry", "window", "session"),
    *("context", "history", "prompt", "weather", "city", "refund", "order", "invoice", "2026"),
    *("42", "3.14", "café", "Zürich", "東京", "данные", "def", "return", "{json}", "(args)"),
    *("=>", "x", "+", "y;", "//", "note\n"),
)


def long_request(target_tokens: int) -> dict[str, Any]:
    """An agent conversation (system prompt, tools, tool calls, results) of about N tokens."""
    rng = random.Random(7)

    def text(words: int) -> str:
        return " ".join(rng.choice(VOCABULARY) for _ in range(words))

    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{index}",
                "description": text(20),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": text(8)},
                        "limit": {"type": "integer", "default": 10},
                        "mode": {"type": "string", "enum": ["fast", "exact"]},
                    },
                    "required": ["query"],
                },
            },
        }
        for index in range(8)
    ]
    messages: list[dict[str, Any]] = [{"role": "system", "content": text(400)}]
    body = {"model": "gpt-oss-120b", "tools": tools, "messages": messages}
    turn = 0
    while turn % 10 or count_tokens(body) < target_tokens:
        turn += 1
        messages.append({"role": "user", "content": text(220)})
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": f"tool_{turn % 8}", "arguments": json.dumps({"query": text(4)})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": text(500)})
        messages.append({"role": "assistant", "content": text(250)})
    return body


def count_tokens(body: dict[str, Any]) -> int:
    request = request_from_document(body, "bench.json")
    return hash_request(request, Settings()).rendered.num_tokens


def timed(function, *args) -> tuple[float, Any]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=100_000)
    args = parser.parse_args()

    load_seconds, renderer = timed(resolve_renderer, "gpt-oss")
    body = long_request(args.tokens)
    request: Request = request_from_document(body, "bench.json")
    settings = Settings()
    options = settings.render_options()

    totals, phases = [], {"render": [], "tokenize": [], "tokenize + starts": [], "hash": []}
    num_tokens = 0
    for _ in range(args.runs):
        total, hashed = timed(hash_request, request, settings)
        totals.append(total)
        num_tokens = hashed.rendered.num_tokens
        seconds, (text, _) = timed(renderer.render_text, request, options)
        phases["render"].append(seconds)
        seconds, token_ids = timed(renderer.encode, text)
        phases["tokenize"].append(seconds)
        seconds, _ = timed(renderer.encode_with_starts, text)
        phases["tokenize + starts"].append(seconds)
        seconds, _ = timed(block_hashes, token_ids, hashed.settings)
        phases["hash"].append(seconds)

    median = statistics.median(totals)
    print(f"gpt-oss renderer load (o200k_harmony, once): {load_seconds:.3f} s")
    print(f"request: {len(request.messages)} messages, {num_tokens} tokens, block size 16")
    print(f"tokenize + hash, median of {args.runs}: {median:.3f} s"
          f" ({num_tokens / median / 1e6:.2f} M tokens/s; target < 1 s: "
          f"{'met' if median < 1 else 'MISSED'})")  # fmt: skip
    for name, seconds in phases.items():
        share = statistics.median(seconds)
        print(f"  {name:<17} {share:.3f} s  ({share / median:5.1%})")
    print(f"`pcache hash` on that file, whole process, median of {args.runs}:"
          f" {command_seconds(body, args.runs):.3f} s")  # fmt: skip


def command_seconds(body: dict[str, Any], runs: int) -> float:
    """Wall time of `python -m pcache hash FILE`: start-up, vocabulary load, render, hash."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "pcache", "hash", str(path), "--format", "json"],
                env=env, stdout=subprocess.DEVNULL, check=True,
            )  # fmt: skip
            times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    main()
