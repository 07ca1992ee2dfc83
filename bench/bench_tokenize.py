"""Tokenize + hash a ~100k-token chat request with the default tokenizer (gpt-oss): median of N.

Run: python bench/bench_tokenize.py [--runs 5] [--tokens 100000]
     python bench/bench_tokenize.py --fixtures [--runs 3]   # tiktoken fast path vs tokenizers
Target: < 1 s for the whole path (render the harmony format, tokenize with o200k_harmony, map
token starts, chain the block hashes). The encoding is loaded once beforehand; its load time is
printed separately. Phases are timed in the same run so their shares can be compared.

`--fixtures`: tokens per second of every Hugging Face tokenizer fixture (tests/fixtures), on
the same pieces (pcache's source files and a multilingual, whitespace- and digit-heavy text,
cut into ~2,000-character pieces as a log's new turns are, and at the added tokens), encoded by
tiktoken over the converted tokenizer.json (one thread, and `--jobs` threads) and by
`tokenizers` (one `encode` per piece, and one `encode_batch_fast` call on its own threads),
alternately, median of N with min-max; CPU seconds (all threads) beside wall seconds, and
tokens per CPU second, since on a shared machine the wall time says more about the other work
than about this. The ids are checked equal.
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
from pcache.prompt.renderers.render import resolve_renderer
from pcache.prompt.shapes.request import Request, request_from_document

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


def fixture_pieces() -> list[str]:
    root = Path(__file__).resolve().parent.parent / "pcache"
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py")))
    text += "Zürich café naïve — 東京の天気は晴れ。данные 1234567 3.14159 🙂🙂\n\t  \u00a0x " * 400
    return [text[start : start + 2000] for start in range(0, len(text), 2000)]


def fixtures_main(runs: int, jobs: int) -> None:

    from tests.fixtures.build_tokenizers import build

    pieces = fixture_pieces()
    print(f"{len(pieces)} pieces, {sum(map(len, pieces)):,} characters; load average"
          f" {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")  # fmt: skip
    for name, directory in build().items():
        measure_fixture(name, directory, pieces, runs, jobs)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def measure_fixture(name: str, directory: Path, pieces: list[str], runs: int, jobs: int) -> None:
    """One fixture's tokens per second, each way, alternately (see `--fixtures`)."""
    from tokenizers import Tokenizer

    renderer = resolve_renderer(str(directory))
    assert renderer.fast is not None, renderer.encoder_path
    encoder = renderer.piece_encoder()
    codec = encoder.codec
    pieces = [part for piece in pieces for part in encoder.parts(piece)[::2] if part]
    reference = Tokenizer.from_file(str(directory / "tokenizer.json"))
    expected = [e.ids for e in reference.encode_batch_fast(pieces, add_special_tokens=False)]
    tokens = sum(map(len, expected))

    def tiktoken_threads(threads: int):
        codec.batch.threads = threads
        return codec.encode_pieces(pieces)

    ways = {
        "tiktoken, 1 thread": lambda: tiktoken_threads(1),
        f"tiktoken, {jobs} threads": lambda: tiktoken_threads(jobs),
        "tokenizers encode, 1 call per piece": lambda: [
            reference.encode(piece, add_special_tokens=False).ids for piece in pieces
        ],
        "tokenizers encode_batch_fast": lambda: [
            e.ids for e in reference.encode_batch_fast(pieces, add_special_tokens=False)
        ],
    }
    walls: dict[str, list[float]] = {way: [] for way in ways}
    cpus: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(runs):
        for way, encode in ways.items():
            cpu, wall = time.process_time(), time.perf_counter()
            result = encode()
            walls[way].append(time.perf_counter() - wall)
            cpus[way].append(time.process_time() - cpu)
            assert result == expected, f"{name}: {way} gives other ids"
    print(f"{name}: {tokens:,} tokens, {renderer.encoder_path}")
    for way in ways:
        wall = statistics.median(walls[way])
        cpu = statistics.median(cpus[way])
        print(f"  {way:<36} {tokens / wall / 1e6:6.2f} M tokens/s wall"
              f" ({wall:.3f} s, {min(walls[way]):.3f}-{max(walls[way]):.3f}),"
              f" {tokens / cpu / 1e6:6.2f} M tokens per CPU second ({cpu:.3f} s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--fixtures", action="store_true", help="fast path vs tokenizers")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if args.fixtures:
        fixtures_main(args.runs, args.jobs)
        return

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
