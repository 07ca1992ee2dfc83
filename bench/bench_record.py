"""Recording overhead per request, side by side in one run: the same client with and without
`pcache.record.Transport`, over a mock network (so only the recorder's work is measured).

Each round sends one request through each client, in alternating order, with a ~10 kB
OpenAI-shaped body (a JSON response carrying `usage`, and an SSE stream). The overhead of a
request is its recorded time minus the plain time of the same round; the report gives the
p50, p90 and p99 of those paired differences, after a warm-up.

Run: python bench/bench_record.py [--rounds 3000] [--body-kb 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcache.record import Transport
from pcache.record.canned import chat_completion

URL = "http://127.0.0.1:9/v1/chat/completions"
REPLY = orjson.dumps(chat_completion("ok", usage={"prompt_tokens": 2500, "completion_tokens": 2}))
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":2500,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def body_of(kilobytes: int) -> bytes:
    text = ("The parcel service answers questions about deliveries. " * 200)[: kilobytes * 1000]
    return orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "system", "content": text}]})


class _Stream(httpx2.SyncByteStream):
    def __iter__(self):
        yield STREAM[:40]
        yield STREAM[40:]


def answer(request) -> httpx2.Response:
    if b'"stream":true' in request.content:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Stream())
    return httpx2.Response(200, headers={"content-type": "application/json"}, content=REPLY)


def send(client: httpx2.Client, body: bytes) -> float:
    headers = {"content-type": "application/json"}
    start = time.perf_counter()
    with client.stream("POST", URL, content=body, headers=headers) as response:
        for _ in response.iter_bytes():
            pass
    return time.perf_counter() - start


def measure(body: bytes, rounds: int, warmup: int, directory: Path) -> dict[str, float]:
    plain = httpx2.Client(transport=httpx2.MockTransport(answer))
    recorded_transport = Transport(directory / "bench.jsonl", httpx2.MockTransport(answer))
    recorded = httpx2.Client(transport=recorded_transport)
    differences, plain_times = [], []
    for index in range(warmup + rounds):
        if index % 2:
            without = send(plain, body)
            with_recorder = send(recorded, body)
        else:
            with_recorder = send(recorded, body)
            without = send(plain, body)
        if index >= warmup:
            differences.append(with_recorder - without)
            plain_times.append(without)
    recorded_transport.close()
    lines = (directory / "bench.jsonl").read_bytes().count(b"\n")
    assert lines == warmup + rounds, lines
    quantiles = statistics.quantiles(differences, n=100)
    return {
        "plain_p50_us": statistics.median(plain_times) * 1e6,
        "overhead_p50_us": statistics.median(differences) * 1e6,
        "overhead_p90_us": quantiles[89] * 1e6,
        "overhead_p99_us": quantiles[98] * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--body-kb", type=int, default=10)
    args = parser.parse_args()
    json_body = body_of(args.body_kb)
    stream_body = orjson.dumps({**orjson.loads(json_body), "stream": True})
    print(f"body {len(json_body):,} bytes; {args.rounds} paired rounds after {args.warmup} warm-up")
    print(f"{'response':<10} {'plain p50':>10} {'overhead p50':>13} {'p90':>8} {'p99':>8}  (µs)")
    for name, body in (("json", json_body), ("sse", stream_body)):
        with tempfile.TemporaryDirectory() as directory:
            row = measure(body, args.rounds, args.warmup, Path(directory))
        print(
            f"{name:<10} {row['plain_p50_us']:>10.1f} {row['overhead_p50_us']:>13.1f}"
            f" {row['overhead_p90_us']:>8.1f} {row['overhead_p99_us']:>8.1f}"
        )


if __name__ == "__main__":
    main()
