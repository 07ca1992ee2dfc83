"""An adversarial sweep of `pcache serve`: hostile requests by kind, counted by outcome.

One `pcache serve --model tiny` child (loopback, a free port, stopped by its PID at the end)
gets, kind by kind: malformed JSON, wrong types and hostile values for every parameter (seeded
random bodies), extreme sampling values, deep nesting, unicode junk, a `Content-Length` of
2 GB, a chunked body far over the limit, bodies that trickle in and stop (waited on for a
bounded time), headers that never end (uvicorn has no header deadline: /health is asked while
they are held open), HTTP-level junk (bad methods, routes, request lines), and clients that
disconnect mid-stream or mid-wait, concurrently. After each kind the script asks /health and
notes the child's peak memory (VmHWM); at the end it checks that the server is idle, that no
block is left referenced, and that a repeated request reports the cached tokens the pool
holds.

Outcomes per kind: HTTP status counts (`5xx` is a failure of the promise), `no-answer`
(the server closed the connection or did not answer in time), `left` (the client left on
purpose). The script exits 1 when any 5xx came back or the server ended unhealthy or wrong.

Usage:
    python bench/adversarial_serve.py                 # 1,000 random bodies + the rest
    python bench/adversarial_serve.py --random 5000 --seed 3 --format json
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from serve_child import start_server, stop_server  # noqa: E402

FIELDS = [
    "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "top_k", "n", "stream", "stream_options", "stop", "logprobs", "top_logprobs", "echo",
    "seed", "logit_bias", "presence_penalty", "frequency_penalty", "tools", "tool_choice",
    "response_format", "model", "user", "ignore_eos", "cache_salt", "stop_token_ids",
    "best_of", "suffix", "include_stop_str_in_output", "add_special_tokens", "min_tokens",
]  # fmt: skip
ATOMS = [
    None, True, False, 0, 1, -1, 2, 0.5, 1e-40, 1e-320, 2**31, 2**63 - 1, -(2**63), 1.7e308,
    "", "nan", "NaN", "inf", "-Infinity", "1e309", "\x00", "\u202e", "🙂" * 50, "a" * 5000,
    [], {}, [1, 2], {"a": 1}, [[[]]], {"include_usage": "yes"},
]  # fmt: skip
PROMPT = list(range(1, 100))


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def junk(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return [junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and roll < 0.3:
        return {rng.choice([*FIELDS, "x", ""]): junk(rng, depth + 1) for _ in range(2)}
    if roll < 0.45:
        return rng.uniform(-1e6, 1e6) if rng.random() < 0.5 else rng.randint(-(2**40), 2**40)
    return rng.choice(ATOMS)


def random_body(rng: random.Random, chat: bool) -> bytes:
    body: dict = {"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"}
    body["max_tokens"] = rng.randint(1, 4)
    for key in rng.sample(FIELDS, rng.randint(1, 4)):
        body[key] = junk(rng)
    return json.dumps(body, allow_nan=True).encode()


async def raw(port: int, data: list[bytes], wait: float, pause: float = 0.0) -> str:
    """Send `data` piece by piece on one connection; the status answered, or `no-answer`."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return "no-connection"
    try:
        for piece in data:
            writer.write(piece)
            try:
                await writer.drain()
            except OSError:
                break
            if pause:
                await asyncio.sleep(pause)
        line = await asyncio.wait_for(reader.readline(), wait)
        match = re.match(rb"HTTP/1\.[01] (\d{3})", line)
        return match.group(1).decode() if match else "no-answer"
    except (TimeoutError, OSError):
        return "no-answer"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def status_of(code: int) -> str:
    return str(code)


async def sweep(url: str, pid: int, args) -> dict:
    import httpx

    port = int(url.rsplit(":", 1)[1])
    rng = random.Random(args.seed)
    results: dict[str, collections.Counter] = {}
    health: dict[str, int] = {}
    memory: dict[str, int] = {"start": peak_rss_kib(pid)}
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def post(route: str, content: bytes, headers=None) -> str:
            try:
                response = await client.post(route, content=content, headers=headers)
            except httpx.HTTPError:
                return "no-answer"
            shaped = response.status_code == 200
            if response.status_code != 200:
                try:
                    error = response.json()["error"]
                    shaped = set(error) == {"message", "type", "param", "code"}
                except (ValueError, KeyError, TypeError):
                    shaped = False
            return status_of(response.status_code) + ("" if shaped else " (not OpenAI-shaped)")

        async def kind(name: str, outcomes) -> None:
            counter = collections.Counter(await asyncio.gather(*outcomes))
            results[name] = counter
            health[name] = (await client.get("/health")).status_code
            memory[name] = peak_rss_kib(pid)

        semaphore = asyncio.Semaphore(32)

        async def bounded(coroutine):
            async with semaphore:
                return await coroutine

        routes = ["/v1/completions", "/v1/chat/completions"]
        await kind(
            "random bodies (wrong types, hostile values)",
            [
                bounded(post(routes[chat], random_body(rng, bool(chat))))
                for chat in (rng.randint(0, 1) for _ in range(args.random))
            ],
        )
        malformed = [b"", b"{", b"[1,2", b'{"prompt": "x",}', b"\xff\xfe{}", b"null", b"5",
                     b'{"prompt": NaN}', b'{"prompt": "x", "temperature": Infinity}',
                     b'{"prompt": 1e99999}', b'{"prompt": 123456789012345678901234567890}',
                     b'{"prompt": "\\ud800"}', b'{"prompt": "x"} trailing',
                     b"\x00" * 100]  # fmt: skip
        malformed += [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
                      for _ in range(50)]  # fmt: skip
        await kind(
            "malformed JSON",
            [bounded(post(route, body)) for body in malformed for route in routes],
        )
        sampling = [
            {"prompt": "hi", "temperature": t, "max_tokens": 3, "stream": stream}
            for t in (1e-40, 1e-38, 5e-324, 1e-5, 9.99e-6, 2, 2.0000001, 0, -0.0)
            for stream in (False, True)
        ]
        sampling += [{"prompt": "hi", "max_tokens": m} for m in (0, -1, 2**63, 2047, 2**31)]
        sampling += [{"prompt": "hi", "logprobs": k, "max_tokens": 2} for k in (0, 20, 21, -1)]
        await kind(
            "extreme sampling values",
            [bounded(post(routes[0], json.dumps(body).encode())) for body in sampling],
        )
        deep = [b'{"prompt": ' + b"[" * n + b"]" * n + b"}" for n in (100, 1000, 5000, 100000)]
        deep += [b'{"messages": [' + b'{"role": "user", "content": ' * n + b'"x"' + b"}" * n
                 + b"]}" for n in (50, 600, 5000)]  # fmt: skip
        deep += [json.dumps({"prompt": "x", "metadata": {"a": [[{"b": []}] * 50] * 50}}).encode()]
        await kind("deep nesting", [bounded(post(r, body)) for body in deep for r in routes])
        unicode = ["\u202e\u0000\ufeff", "🙂" * 2000, "\U0010ffff" * 100, "é\u0301" * 500,
                   "\x1b[31m", "\ud7ff\ue000", "ｆｕｌｌｗｉｄｔｈ", "\u2028\u2029"]  # fmt: skip
        bodies = []
        for text in unicode:
            bodies.append(({"prompt": text, "max_tokens": 2}, 0))
            bodies.append(({"messages": [{"role": text, "content": text}], "max_tokens": 2}, 1))
            bodies.append(({"prompt": "x", "stop": [text], "max_tokens": 2}, 0))
            bodies.append(({text: text, "prompt": "x", "max_tokens": 2}, 0))
        await kind(
            "unicode junk",
            [bounded(post(routes[r], json.dumps(b).encode())) for b, r in bodies],
        )
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        await kind(
            "Content-Length: 2000000000",
            [raw(port, [head + b"content-length: 2000000000\r\n\r\n"], 10) for _ in range(8)],
        )
        before = peak_rss_kib(pid)
        chunk = b"x" * 65536
        framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        await kind(
            "chunked body of 300 MiB",
            [raw(port, [head + b"transfer-encoding: chunked\r\n\r\n", *[framed] * 4800], 60)],
        )
        memory["chunked growth"] = peak_rss_kib(pid) - before
        await kind(
            "trickled bodies (bounded wait 40 s)",
            [
                raw(port, [head + b"content-length: 400\r\n\r\n", b'{"prompt": '], 40)
                for _ in range(args.slow)
            ]
            + [raw(port, [head + b"content-length: 30\r\n\r\n", *[b" "] * 20], 40, pause=0.5)],
        )
        held = [
            asyncio.ensure_future(raw(port, [b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n"], 5))
            for _ in range(args.slow * 8)
        ]
        await asyncio.sleep(1)
        health_while_held = (await client.get("/health")).status_code
        await kind("trickled headers, never finished (wait 5 s)", held)
        health["trickled headers, never finished (wait 5 s)"] = health_while_held
        junk_lines = [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x00\xa5",
                      b"POST /v1/completions HTTP/1.1\r\ncontent-length: -5\r\n\r\n",
                      b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n",
                      b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n",
                      b"GET /health HTTP/1.1\r\nhost: x\r\n" + b"x-a: b\r\n" * 5000
                      + b"\r\n"]  # fmt: skip
        await kind("HTTP-level junk (uvicorn's parser)", [raw(port, [j], 10) for j in junk_lines])
        verbs = [
            client.request(method, route)
            for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS")
            for route in ("/v1/completions", "/tokenize", "/nope", "/v1/models", "/../etc")
        ]

        async def shaped(request) -> str:
            response = await request
            if response.status_code == 200:
                return "200"
            ok = set(response.json().get("error", {})) == {"message", "type", "param", "code"}
            return str(response.status_code) + ("" if ok else " (not OpenAI-shaped)")

        await kind("methods and routes", [shaped(verb) for verb in verbs])

        async def leave_stream(index: int) -> str:
            body = {"prompt": PROMPT[index % 50 :], "max_tokens": 500, "ignore_eos": True,
                    "stream": True}  # fmt: skip
            async with client.stream("POST", "/v1/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        break
            return "left"

        async def leave_waiting(index: int) -> str:
            body = {"prompt": PROMPT[index % 50 :], "max_tokens": 500, "ignore_eos": True}
            try:
                await client.post("/v1/completions", json=body, timeout=0.2)
            except httpx.TimeoutException:
                return "left"
            return "answered"

        await kind(
            "concurrent disconnects",
            [leave_stream(i) for i in range(args.disconnects)]
            + [leave_waiting(i) for i in range(args.disconnects)],
        )
        # the end: idle, nothing referenced, and exact
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = (await client.get("/metrics")).text
            busy = re.findall(r"pcache:num_requests_(?:running|waiting)\{[^}]*\} (\S+)", text)
            if all(float(value) == 0 for value in busy):
                break
            await asyncio.sleep(0.1)
        usage = re.search(r"pcache:kv_cache_usage_perc\{[^}]*\} (\S+)", text)
        body = {"prompt": PROMPT, "max_tokens": 2, "cache_salt": "final-check"}
        first = (await client.post("/v1/completions", json=body)).json()
        second = (await client.post("/v1/completions", json=body)).json()
        cached = [r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in (first, second)]
        errors = re.findall(r'request_success_total\{finished_reason="error"[^}]*\} (\S+)', text)
        final = {
            "health": (await client.get("/health")).status_code,
            "kv_cache_usage_perc": float(usage.group(1)) if usage else None,
            "cached_tokens of a request sent twice": cached,
            "expected": [0, 96],
            "requests failed inside the engine": float(errors[0]) if errors else 0.0,
        }
    return {"kinds": results, "health": health, "peak_rss_kib": memory, "final": final}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=1000, help="random hostile bodies")
    parser.add_argument("--slow", type=int, default=8, help="trickled bodies")
    parser.add_argument("--disconnects", type=int, default=24, help="of each kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    load = os.getloadavg()
    child, url = start_server(
        "--model", "tiny", "--max-num-seqs", "16", "--max-waiting", "256", drain_stderr=True
    )
    try:
        started = time.monotonic()
        report = asyncio.run(sweep(url, child.pid, args))
        report["seconds"] = round(time.monotonic() - started, 1)
        report["load_average_before"] = [round(x, 2) for x in load]
        report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        stop_server(child)
    failed = any(
        outcome.startswith("5") or "not OpenAI" in outcome
        for counter in report["kinds"].values()
        for outcome in counter
    )
    final = report["final"]
    failed |= any(code != 200 for code in report["health"].values())
    failed |= final["health"] != 200 or final["kv_cache_usage_perc"] != 0
    failed |= final["cached_tokens of a request sent twice"] != final["expected"]
    if args.format == "json":
        print(json.dumps({**report, "kinds": {k: dict(v) for k, v in report["kinds"].items()}}))
    else:
        for name, counter in report["kinds"].items():
            outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(counter.items()))
            total = sum(counter.values())
            print(f"{name:45} {total:5}  {outcomes}  | /health {report['health'][name]}")
        print("peak RSS of the server (KiB):", report["peak_rss_kib"])
        print("final:", final)
        print(f"{report['seconds']} s; load average before {report['load_average_before']},"
              f" after {report['load_average_after']}")  # fmt: skip
        print("FAILED" if failed else "held: no 5xx, healthy after every kind, exact at the end")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
