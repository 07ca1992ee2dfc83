"""pcache's prediction against a real vLLM whose pool fills, over traces, pool sizes and
concurrency: how many requests it predicts exactly, its mean error in points of the prompt
(the timed prediction and the serial one beside it), what the missed tokens add up to by
reason, and whether the KV-event check agrees block by block.

Every replay is `pcache replay TRACE --endpoint URL/v1 --api completions --reset-cache
--kv-events ... --format json` with no capacity flag: pcache reads the pool from vLLM.

Usage: python bench/vllm/fidelity.py VENV [--blocks 48,80] [--concurrency 1,4,8]
       [--output-tokens 1,16] [--traces eviction,round-robin,sessions,zipf] [--json OUT]
(run from the repository root; the vLLM venv is `bench/vllm/install.sh`'s)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BLOCK = 32
"""vLLM's CPU block size (`bench/vllm/server.py`)."""


def eviction(seed: int) -> list[list[int]]:
    """The vLLM suite's eviction trace (`tests/vllm/traces.py`): 6 prefixes of 12 blocks, a
    suffix of 1-40 tokens each, a group kept 40% of the time."""
    from tests.vllm.traces import eviction_requests

    return [body["token_ids"] for body in eviction_requests(seed=seed)]


def round_robin(seed: int) -> list[list[int]]:
    """5 prefixes of 9-11 blocks in turn (more than the pool holds at once), short suffixes."""
    chooser = random.Random(seed)
    sizes = [chooser.randint(9, 11) * BLOCK for _ in range(5)]
    prefixes = [
        list(range(20_000 + 2_000 * g, 20_000 + 2_000 * g + n)) for g, n in enumerate(sizes)
    ]
    prompts = []
    for index in range(40):
        tail = 70_000 + 64 * index
        prompts.append(prefixes[index % 5] + list(range(tail, tail + chooser.randint(1, 30))))
    return prompts


def sessions(seed: int) -> list[list[int]]:
    """6 conversations interleaved at random, each turn its whole history plus 20-120 new
    tokens (a system prompt of 4 blocks shared by all), until 48 requests."""
    chooser = random.Random(seed)
    system = list(range(1_000, 1_128))
    histories = [list(system) for _ in range(6)]
    prompts, fresh = [], 80_000
    while len(prompts) < 48:
        session = chooser.randrange(6)
        grow = chooser.randint(20, 120)
        histories[session] += list(range(fresh, fresh + grow))
        fresh += grow
        if len(histories[session]) > 1_200:
            histories[session] = list(system)
        prompts.append(list(histories[session]))
    return prompts


def zipf(seed: int) -> list[list[int]]:
    """10 prefixes of 3-16 blocks chosen by a Zipf law, suffixes of 1-100 tokens."""
    chooser = random.Random(seed)
    sizes = [chooser.randint(3, 16) * BLOCK + chooser.randint(0, 31) for _ in range(10)]
    prefixes = [
        list(range(30_000 + 1_000 * g, 30_000 + 1_000 * g + n)) for g, n in enumerate(sizes)
    ]
    weights = [1 / (rank + 1) for rank in range(10)]
    prompts = []
    for index in range(48):
        group = chooser.choices(range(10), weights)[0]
        tail = 90_000 + 128 * index
        prompts.append(prefixes[group] + list(range(tail, tail + chooser.randint(1, 100))))
    return prompts


TRACES = {"eviction": eviction, "round-robin": round_robin, "sessions": sessions, "zipf": zipf}


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def replay(url: str, events: str, trace: Path, concurrency: int, output_tokens: int) -> dict:
    command = [sys.executable, "-m", "pcache", "replay", str(trace), "--endpoint", f"{url}/v1"]
    command += ["--api", "completions", "--reset-cache", "--kv-events", events, "--no-progress"]
    command += ["--max-output-tokens", str(output_tokens), "--max-concurrency", str(concurrency)]
    command += ["--format", "json"] + (["--rate", "inf"] if concurrency > 1 else [])
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run(command, capture_output=True, env=env, timeout=900, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-2000:])
    return json.loads(done.stdout)


def row(report: dict) -> dict:
    served = report["cached_tokens"]
    lengths = report["input_lens"]

    def compared(predicted: list[int]) -> tuple[int, float]:
        equal = sum(a == b for a, b in zip(served, predicted, strict=True))
        error = sum(
            abs(a - b) / n * 100 for a, b, n in zip(served, predicted, lengths, strict=True)
        )
        return equal, error / len(served)

    equal, error = compared(report["predicted_cached_tokens"])
    serial_equal, serial_error = compared(report["predicted_serial_cached_tokens"])
    differing = {
        i
        for i, (a, b) in enumerate(zip(served, report["predicted_cached_tokens"], strict=False))
        if a != b
    }
    named = {difference["request"] for difference in report["prediction_differences"]}
    check = report.get("kv_events") or {}
    reasons = report["miss_reasons"] or {}
    return {
        "requests": len(served),
        "hit_rate": round(sum(served) / sum(lengths) * 100, 1),
        "mode": report["prediction_mode"],
        "equal": equal,
        "error_points": round(error, 2),
        "serial_equal": serial_equal,
        "serial_error_points": round(serial_error, 2),
        "unequal_named": f"{len(differing & named)}/{len(differing)}",
        "kv_mismatches": check.get("mismatches"),
        "kv_removed": check.get("removed_matched"),
        "reasons": {reason: count for reason, count in reasons.items() if count},
        "max_concurrent": report.get("max_concurrent_requests"),
        "capacity": report["capacity_blocks"],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("--blocks", default="48,80")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--output-tokens", default="1,16")
    parser.add_argument("--traces", default=",".join(TRACES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args(argv)

    from bench.vllm.model_dir import build_model_dir
    from bench.vllm.server import vllm_server

    work = Path(tempfile.mkdtemp(prefix="pcache-fidelity-"))
    model = build_model_dir(work / "model")
    rows = []
    for blocks in map(int, arguments.blocks.split(",")):
        events = free_endpoint()
        log = work / f"vllm-{blocks}.log"
        with vllm_server(
            arguments.venv, model, log, 900, kv_events=events, num_gpu_blocks=blocks
        ) as server:
            for name in arguments.traces.split(","):
                path = work / f"{name}.jsonl"
                prompts = TRACES[name](arguments.seed)
                path.write_text("".join(json.dumps({"token_ids": p}) + "\n" for p in prompts))
                for output_tokens in map(int, arguments.output_tokens.split(",")):
                    for concurrency in map(int, arguments.concurrency.split(",")):
                        started = time.monotonic()
                        try:
                            found = row(
                                replay(server.url, events, path, concurrency, output_tokens)
                            )
                        except (RuntimeError, subprocess.TimeoutExpired) as failure:
                            found = {"error": str(failure)[-300:]}
                        case = {"blocks": blocks, "trace": name, "concurrency": concurrency}
                        case |= {
                            "output_tokens": output_tokens,
                            "seconds": round(time.monotonic() - started),
                        }
                        rows.append(case | found)
                        print(json.dumps(rows[-1]), flush=True)
    if arguments.json:
        arguments.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
