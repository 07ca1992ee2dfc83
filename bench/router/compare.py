"""Predicted vs measured behind a real router: SGLang's router (sglang-router, the venv
bench/router/install.sh builds) over two `pcache serve --model tiny` replicas on loopback.

    PYTHONPATH=. python bench/router/compare.py [--venv DIR] [--requests 64] [--groups 8]
        [--system-chars 256] [--kv-cache-tokens 8192] [--policies cache_aware,round_robin]
        [--arrivals serial,held,poisson] [--rate 4] [--format text|json]

For each shared-prefix chat trace (two, of different seeds), router policy and arrival mode it
resets both replicas' prefix caches, starts the router, replays the trace through it
(`pcache replay --endpoint ROUTER/v1 --replica-metrics A,B`) and reads what each replica
served from its /metrics; then it predicts the same pass from the same trace file as a user
would, `pcache replay TRACE --simulate -t tiny --replicas 2 --router sglang|round-robin
--cache-blocks KV/16 --format json` (`-t tiny`: the tokens `pcache serve --model tiny` sees,
its ChatML layout over UTF-8 bytes; one vLLM-policy pool of `--kv-cache-tokens / 16` blocks
per replica; `--router sglang` for cache_aware, `round-robin` for round_robin). It prints, per
row, the split of requests over the replicas and the fleet token hit rate, measured and
predicted.

Arrival modes:
- `serial` sends each request after the previous answer (`--max-concurrency 1`): no request
  is in flight when the router looks, so its choice is deterministic, and the prediction
  (serial) must equal the measurement.
- `held` (`held_trace`) keeps one long request in flight on the first worker while short
  ones arrive far apart: the router sees loads 1 and 0 at every choice, also deterministic,
  and the prediction (timed, pcache's default TTFT model and decode rate, under which the same
  requests overlap) must equal the measurement too.
- `poisson` sends the trace's own timestamps, drawn as Poisson arrivals at `--rate`
  requests/s (seeded), with no concurrency limit: the router sees requests in flight; the
  prediction (timed, every request's TTFT the pass's measured median TTFT and its decode rate
  the measured median time per output token) is reported beside the measurement, not held to
  it: when a request lands while another is in flight depends on latencies the simulator
  only approximates.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
POLICY_ROUTERS = {"cache_aware": "sglang", "round_robin": "round-robin"}
"""sglang-router's `--policy` -> pcache's `--router`."""
BLOCK_SIZE = 16  # pcache serve's default --block-size
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zeta", "eta"]


def chat_trace(
    path: Path, seed: int, requests: int, groups: int, system_chars: int, rate: float | None
) -> int:
    """Shared-system-prompt chats: `groups` system prompts of `system_chars` ASCII characters
    (as many tokens for `pcache serve --model tiny`, one per byte), each request one of them
    and a short question; seed 0 takes the groups in turn, seed 1 at random. Poisson
    timestamps at `rate` requests/s (None: one per millisecond, for serial replays)."""
    rng = random.Random(seed)
    systems = [system_prompt(rng, system_chars) for _ in range(groups)]
    lines, now = [], 0.0
    for index in range(requests):
        group = index % groups if seed % 2 == 0 else rng.randrange(groups)
        question = " ".join(rng.choice(WORDS) for _ in range(12))
        now += rng.expovariate(rate) * 1000.0 if rate else 1.0
        lines.append(
            {
                "timestamp": round(now, 3),
                "output_length": 2,
                "messages": [
                    {"role": "system", "content": systems[group]},
                    {"role": "user", "content": f"{index}: {question}"},
                ],
            }
        )
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return len(lines)


HELD_GROUPS = (0, 1, 0, 1, 2, 0)
"""`held_trace`'s system prompt of each request: the first is held in flight throughout."""


HELD_OUTPUT_TOKENS = 1600
"""Within the tiny model's 2,048 positions with its ~400-token prompt: 2 to 7 s of decode on
pcache serve tiny, depending on the machine's load."""
HELD_GAP_MS = 400.0
"""Five gaps end at 2 s, before the long request; a short one takes 0.1 to 0.3 s."""


def held_trace(path: Path, seed: int, system_chars: int) -> int:
    """One long request (`HELD_OUTPUT_TOKENS` output tokens: seconds on pcache serve tiny)
    and, while it runs, five short ones `HELD_GAP_MS` apart, each done long before the next
    arrives: when each short one arrives exactly one request (the long one, on the first
    worker) is in flight."""
    rng = random.Random(100 + seed)
    systems = [system_prompt(rng, system_chars) for _ in range(max(HELD_GROUPS) + 1)]
    lines = []
    for index, group in enumerate(HELD_GROUPS):
        question = " ".join(rng.choice(WORDS) for _ in range(12))
        lines.append(
            {
                "timestamp": index * HELD_GAP_MS,
                "output_length": HELD_OUTPUT_TOKENS if index == 0 else 2,
                "messages": [
                    {"role": "system", "content": systems[group]},
                    {"role": "user", "content": f"{index}: {question}"},
                ],
            }
        )
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return len(lines)


def system_prompt(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:chars]


DEFAULT_TIMING = {"ttft_ms": None, "tpot_ms": None}
"""Timed with pcache's default TTFT model and decode rate (55 ms + 0.05 ms a token, 50 tokens/s):
the held request lasts 32 s, each short one under 0.1 s."""


def prediction_arguments(
    path: Path, policy: str, kv_cache_tokens: int, timing: dict | None = None
) -> list[str]:
    """`pcache replay`'s arguments that predict `path` behind `policy` over 2 replicas of
    `pcache serve --model tiny` (`-t tiny`: its tokenizer and template): serial without
    `timing`; timed with `timing` (`ttft_ms`: every request's TTFT, `tpot_ms`: its time per
    output token, both taken from a measured pass; None: pcache's defaults)."""
    arguments = [str(path), "--simulate", "-t", "tiny", "--replicas", "2"]
    arguments += ["--router", POLICY_ROUTERS[policy], "--policy", "vllm"]
    arguments += ["--cache-blocks", str(kv_cache_tokens // BLOCK_SIZE)]
    arguments += ["--block-size", str(BLOCK_SIZE), "--format", "json"]
    if timing is not None:
        arguments += ["--concurrency", "timed"]
        if timing["ttft_ms"] is not None:
            arguments += ["--ttft-overhead-ms", f"{timing['ttft_ms']!r}"]
            arguments += ["--ttft-ms-per-token", "0", "--ttft-ms-per-pair", "0"]
            arguments += ["--decode-rate", f"{1000.0 / max(timing['tpot_ms'], 1e-3)!r}"]
    return arguments


def predict(path: Path, policy: str, kv_cache_tokens: int, timing: dict | None = None) -> dict:
    """The fleet simulator's split and hit rate, as `pcache replay --simulate` prints them
    for `prediction_arguments`: each replica's requests, prompt and hit tokens."""
    report = run_pcache(["replay", *prediction_arguments(path, policy, kv_cache_tokens, timing)])
    rows = report["replicas"]
    hits = [row["hit_tokens"] for row in rows]
    prompts = [row["prompt_tokens"] for row in rows]
    return {
        "split": [row["requests"] for row in rows],
        "hit_tokens": hits,
        "prompt_tokens": prompts,
        "hit_rate": round(sum(hits) / sum(prompts), 3) if sum(prompts) else 0.0,
    }


def run_pcache(arguments: list[str]) -> dict:
    """`python -m pcache ARGUMENTS` (this checkout's), its JSON output."""
    command = [sys.executable, "-m", "pcache", *arguments]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, capture_output=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        why = done.stderr.decode().strip()
        raise SystemExit(f"compare.py: pcache {arguments[0]} failed: {why}")
    return orjson.loads(done.stdout)


def measured(replay: dict) -> dict:
    """Split and fleet hit rate from the replicas' /metrics (`replay --replica-metrics`)."""
    rows = replay["replicas"]
    assert all(row["error"] is None for row in rows), rows
    hits = [int(row["hit_tokens"]) for row in rows]
    prompts = [int(row["prompt_tokens"]) for row in rows]
    return {
        "split": [int(row["requests"]) for row in rows],
        "hit_tokens": hits,
        "prompt_tokens": prompts,
        "hit_rate": round(sum(hits) / sum(prompts), 3) if sum(prompts) else 0.0,
        "max_in_flight": replay["max_concurrent_requests"],
        "ttft_ms": replay["median_ttft_ms"],
        "tpot_ms": replay["median_tpot_ms"],
    }


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports: each probe stays bound until all are chosen, so
    two calls in a row cannot hand out the same port twice."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def stop(child: subprocess.Popen) -> None:
    """Stop a child started in its own session, by its PID (its group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)


def wait_for(url: str, child: subprocess.Popen, check, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"compare.py: {url}: the server exited ({child.returncode})")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            if check(httpx.get(url, timeout=2)):
                return
        time.sleep(0.2)
    raise SystemExit(f"compare.py: {url} did not come up in {timeout:.0f} s")


@contextlib.contextmanager
def replica(kv_cache_tokens: int, log: Path):
    """The base URL of `pcache serve --model tiny` on a free loopback port."""
    port = free_port()
    command = [sys.executable, "-m", "pcache", "serve", "--model", "tiny", "--port", str(port)]
    command += ["--kv-cache-tokens", str(kv_cache_tokens)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("wb") as sink:
        child = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/health", child, lambda response: response.status_code == 200)
        yield url
    finally:
        stop(child)


def router_workers(url: str) -> list[str]:
    """The router's workers in its own order (`GET /workers`). sglang-router 0.3.2 registers
    the `--worker-urls` in an order that changes from run to run; its policies count in this
    order (round robin starts at its first worker, least-load ties go to it), so the
    simulator's replica i is the router's worker i."""
    import httpx

    return [worker["url"] for worker in httpx.get(f"{url}/workers", timeout=5).json()["workers"]]


@contextlib.contextmanager
def router(venv: Path, policy: str, workers: list[str], log: Path):
    """sglang-router (`--policy policy`) over `workers`: its base URL and its workers in its
    own order."""
    port, metrics_port = free_ports(2)  # distinct: the router binds both
    command = [
        str(venv / "bin" / "python"), "-m", "sglang_router.launch_router",
        "--host", "127.0.0.1", "--port", str(port),
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
        "--policy", policy, "--worker-urls", *workers,
    ]  # fmt: skip
    with log.open("wb") as sink:
        child = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"

    def healthy(response) -> bool:
        workers_listed = response.json().get("workers", [])
        return sum(1 for worker in workers_listed if worker.get("is_healthy")) == len(workers)

    try:
        wait_for(f"{url}/workers", child, healthy)
        yield url, router_workers(url)
    finally:
        stop(child)


def replay_through(url: str, trace: Path, workers: list[str], serial: bool) -> dict:
    """`pcache replay TRACE --endpoint URL/v1 --replica-metrics ...` as JSON."""
    import httpx

    for worker in workers:  # each pass starts from empty caches
        response = httpx.post(f"{worker}/reset_prefix_cache", timeout=10)
        response.raise_for_status()
    arguments = ["replay", str(trace), "--endpoint", f"{url}/v1"]
    arguments += ["--replica-metrics", ",".join(workers), "--format", "json", "--ignore-eos"]
    if serial:
        arguments += ["--max-concurrency", "1"]
    return run_pcache(arguments)


def compare(args: argparse.Namespace, folder: Path) -> list[dict]:
    rows = []
    traces = []
    arrivals = args.arrivals.split(",")
    for seed in (0, 1):  # two traces: groups in turn (seed 0), groups drawn at random (1)
        for arrival in arrivals:
            path = folder / f"chats_{seed}_{arrival}.jsonl"
            if arrival == "held":
                held_trace(path, seed, args.system_chars)
            else:
                rate = args.rate if arrival == "poisson" else None
                chat_trace(path, seed, args.requests, args.groups, args.system_chars, rate)
            traces.append((seed, arrival, path))
    with contextlib.ExitStack() as stack:
        workers = [
            stack.enter_context(replica(args.kv_cache_tokens, folder / f"replica{n}.log"))
            for n in range(2)
        ]
        for policy in args.policies.split(","):
            log = folder / f"router_{policy}.log"
            with router(args.venv, policy, workers, log) as (url, ordered):
                for seed, arrival, path in traces:
                    serial = arrival == "serial"
                    measure = measured(replay_through(url, path, ordered, serial))
                    timing = measure if arrival == "poisson" else None
                    if arrival == "held":
                        timing = DEFAULT_TIMING
                    guess = predict(path, policy, args.kv_cache_tokens, timing)
                    rows.append(
                        {
                            "policy": policy,
                            "trace": f"{'held' if arrival == 'held' else 'chats'}-{seed}",
                            "arrival": arrival,
                            "measured": measure,
                            "predicted": guess,
                            "equal": measure["split"] == guess["split"]
                            and measure["hit_tokens"] == guess["hit_tokens"],
                        }
                    )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| policy | trace | arrival | measured split | predicted split"
        " | measured hit rate | predicted hit rate | equal | most in flight |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        measure, guess = row["measured"], row["predicted"]
        lines.append(
            f"| {row['policy']} | {row['trace']} | {row['arrival']}"
            f" | {'/'.join(map(str, measure['split']))} | {'/'.join(map(str, guess['split']))}"
            f" | {measure['hit_rate']:.3f} | {guess['hit_rate']:.3f}"
            f" | {'yes' if row['equal'] else 'no'} | {measure['max_in_flight']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_venv = Path(
        os.environ.get("PCACHE_ROUTER_VENV", Path.home() / ".cache" / "pcache-router-venv")
    )
    parser.add_argument("--venv", type=Path, default=default_venv)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--system-chars", type=int, default=256)
    parser.add_argument("--kv-cache-tokens", type=int, default=8192)
    parser.add_argument("--policies", default="cache_aware,round_robin")
    parser.add_argument("--arrivals", default="serial,held,poisson")
    parser.add_argument("--rate", type=float, default=4.0, help="poisson: requests/s")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    if not (args.venv / "READY").is_file():
        raise SystemExit(f"compare.py: {args.venv} is no router venv (bench/router/install.sh)")
    with tempfile.TemporaryDirectory(prefix="pcache-router-") as folder:
        rows = compare(args, Path(folder))
    if args.format == "json":
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(table(rows))
        print(
            f"\n{args.requests} requests, {args.groups} groups,"
            f" {args.system_chars}-character system prompts,"
            f" {args.kv_cache_tokens}-token KV cache per replica; load average"
            f" {os.getloadavg()[0]:.2f}"
        )
        serial = prediction_arguments(Path("TRACE.jsonl"), "cache_aware", args.kv_cache_tokens)
        print(f"predicted (serial): pcache replay {' '.join(serial)}")


if __name__ == "__main__":
    main()
