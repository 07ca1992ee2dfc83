"""Lint throughput: a generated log of N requests (~2,000 tokens each, shared system prompt).

    python bench/bench_lint.py                      # 10,000 requests, default tokenizer
    python bench/bench_lint.py --requests 2000 --tokenizer o200k_base

Writes the log to a temporary folder, runs `python -m pcache lint LOG --format json` under
`/usr/bin/time -v` (wall time and peak RSS of the whole process), then lints the same log in
process to report where the time goes (read, render+tokenize, rules, cost) and the segment
cache's hit rate. The CLI runs `--repeat` times (median wall, largest RSS). Nothing is asserted;
the figures are printed side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = [
    *[
        "cache",
        "prefix",
        "token",
        "block",
        "request",
        "session",
        "agent",
        "tool",
        "schema",
        "prompt",
        "history",
        "turn",
    ],
    *[
        "reply",
        "server",
        "engine",
        "model",
        "latency",
        "budget",
        "order",
        "invoice",
        "shipping",
        "return",
        "refund",
    ],
    *[
        "customer",
        "account",
        "report",
        "metric",
        "error",
        "retry",
        "window",
        "stride",
        "summary",
        "context",
    ],
]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def system_prompt(rng: random.Random, target_words: int = 1370) -> str:
    parts, count = [], 0
    while count < target_words:
        words = rng.randint(8, 20)
        parts.append(sentence(rng, words))
        count += words
        if rng.random() < 0.15:
            parts.append("\n\n")
    return " ".join(parts)


def generate(path: Path, num_requests: int, seed: int = 7) -> None:
    """Sessions of 4-16 requests; each request repeats its session's history and adds a turn."""
    rng = random.Random(seed)
    system = system_prompt(rng)
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": sentence(rng, 12),
                "parameters": {
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                    "type": "object",
                },
            },
        }
        for name in ("lookup_order", "refund", "search_docs")
    ]
    written = 0
    session = 0
    with path.open("w") as out:
        while written < num_requests:
            session += 1
            turns = rng.randint(4, 16)
            messages = [{"role": "system", "content": system}]
            budget = 1000  # conversation tokens at the last turn, on top of ~1,500 shared ones
            per_turn = budget // turns
            for _ in range(turns):
                if written >= num_requests:
                    break
                messages.append({"role": "user", "content": sentence(rng, per_turn // 3)})
                body = {"model": "gpt-oss-120b", "messages": list(messages), "tools": tools}
                out.write(
                    json.dumps(
                        {"session_id": f"s{session}", "body": body, "custom_id": f"r{written}"}
                    )
                    + "\n"
                )
                written += 1
                messages.append({"role": "assistant", "content": sentence(rng, per_turn // 2)})


def timed_cli(log: Path, tokenizer: str) -> tuple[float, float, dict]:
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "pcache",
        "lint",
        str(log),
        "--tokenizer",
        tokenizer,
        "--format",
        "json",
        "--exit-zero",
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    hours = float(wall.group(1) or 0)
    seconds = hours * 3600 + float(wall.group(2)) * 60 + float(wall.group(3))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    rss_kib = float(rss.group(1))
    return seconds, rss_kib / 1024, json.loads(result.stdout)["summary"]


def in_process(log: Path, tokenizer: str) -> dict:
    from pcache.rules.config import LintConfig
    from pcache.rules.runner import LintOptions, _Run

    run = _Run(LintOptions(tokenizer=tokenizer), LintConfig(), None)
    started = time.perf_counter()
    run.lint_file(str(log))
    report = run.finish()
    total = time.perf_counter() - started
    cache = run.renderer
    return {
        "total_s": round(total, 2),
        "stages_s": report.summary.stage_seconds,
        "segment_cache": {"hits": cache.hits, "misses": cache.misses, "enabled": cache.enabled},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--tokenizer", default="gpt-oss")
    parser.add_argument("--repeat", type=int, default=3, help="CLI runs (median reported)")
    parser.add_argument("--keep", help="write the generated log here instead of a temp folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(args.keep) if args.keep else Path(folder) / "bench.jsonl"
        started = time.perf_counter()
        generate(log, args.requests)
        print(
            f"generated {args.requests} requests ({log.stat().st_size / 2**20:.0f} MiB)"
            f" in {time.perf_counter() - started:.1f}s"
        )
        runs = [timed_cli(log, args.tokenizer) for _ in range(args.repeat)]
        walls = sorted(run[0] for run in runs)
        wall, rss, summary = statistics.median(walls), max(run[1] for run in runs), runs[0][2]
        tokens = summary["prompt_tokens"]
        fired = {row["code"]: row["count"] for row in summary["rules"]}
        print(
            f"pcache lint ({args.tokenizer}): median {wall:.1f}s wall of {args.repeat} runs"
            f" ({', '.join(f'{w:.1f}' for w in walls)}), peak RSS {rss:.0f} MiB,"
            f" {tokens:,} prompt tokens ({tokens / args.requests:,.0f}/request),"
            f" {tokens / wall / 1e6:.2f} M tokens/s, fired: {fired},"
            f" cacheable {summary['cacheable_ratio']:.1%}"
        )
        print("in-process stages:", json.dumps(in_process(log, args.tokenizer)))


if __name__ == "__main__":
    main()
