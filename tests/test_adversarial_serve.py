"""`pcache serve` under hostile load: 200 concurrent clients (half of them leaving mid-stream),
a keyed server flooded by strangers, and its engine process killed with SIGKILL (the clients
get a 503 that says so, /health says 503, and `pcache serve` exits instead of hanging)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import ROOT, served, wait_until_healthy  # noqa: E402
from tests.test_serve_engine_process import children_of  # noqa: E402

CLIENTS = 200
KEY = "sk-adversarial"


async def crowd(url: str, headers: dict[str, str]) -> tuple[list[int], int]:
    """CLIENTS requests at once: even ones read their whole answer, odd ones stream and leave
    after the first event; the statuses of the readers and how many leavers got a first event."""
    limits = httpx.Limits(max_connections=CLIENTS + 10)
    async with httpx.AsyncClient(
        base_url=url, timeout=60, limits=limits, headers=headers
    ) as client:

        async def read(index: int) -> int:
            body = {"prompt": [1 + index % 7] * 40, "max_tokens": 3, "ignore_eos": True}
            return (await client.post("/v1/completions", json=body)).status_code

        async def leave(index: int) -> int:
            body = {"prompt": [2] * 40, "max_tokens": 200, "ignore_eos": True, "stream": True}
            async with client.stream("POST", "/v1/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        return 1  # gone, mid-stream
            return 0

        results = await asyncio.gather(
            *(read(i) if i % 2 == 0 else leave(i) for i in range(CLIENTS))
        )
    return list(results[0::2]), sum(results[1::2])


def test_two_hundred_clients_half_of_them_vanishing_leave_the_server_idle_and_exact():
    headers = {"authorization": f"Bearer {KEY}"}
    with served(api_key=KEY, kv_cache_tokens=4096) as (url, server):
        statuses, left = asyncio.run(crowd(url, headers))
        assert statuses == [200] * (CLIENTS // 2) and left == CLIENTS // 2
        deadline = time.monotonic() + 30
        while server.engine_loop.num_running or server.engine_loop.num_waiting:
            assert time.monotonic() < deadline, "requests of vanished clients still run"
            time.sleep(0.05)
        server.engine.check_integrity()  # every block a vanished client held is free
        assert not server.engine.kv_manager.req_to_blocks
        assert httpx.post(f"{url}/reset_prefix_cache", headers=headers).status_code == 200
        assert httpx.get(f"{url}/health").status_code == 200


def test_strangers_flooding_a_keyed_server_get_401s_and_the_holder_is_served():
    async def flood(url: str) -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = {"prompt": "x" * 10_000, "max_tokens": 1}
            answers = await asyncio.gather(
                *(
                    client.post(
                        "/v1/completions", json=body, headers={"authorization": f"Bearer k{i}"}
                    )
                    for i in range(CLIENTS)
                )
            )
        return [answer.status_code for answer in answers]

    with served(api_key=KEY) as (url, server):
        assert asyncio.run(flood(url)) == [401] * CLIENTS
        assert server.engine_loop.num_waiting == 0  # none reached the engine
        answer = httpx.post(
            f"{url}/v1/completions",
            json={"prompt": "hi", "max_tokens": 1},
            headers={"authorization": f"Bearer {KEY}"},
        )
        assert answer.status_code == 200, answer.text


def test_a_killed_engine_process_is_a_503_then_the_server_exits():
    child = subprocess.Popen(
        [sys.executable, "-m", "pcache", "serve", "--model", "tiny", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        text=True,
    )
    try:
        assert child.stderr is not None
        match = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", child.stderr.readline())
        assert match, "no banner"
        url = match.group(1)
        wait_until_healthy(url, child)
        (engine,) = children_of(child.pid)
        body = {"prompt": [3] * 50, "max_tokens": 1500, "ignore_eos": True, "stream": True}
        lines = []
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    lines.append(line)
                    if len(lines) == 1:
                        os.kill(engine, signal.SIGKILL)
                        started = time.monotonic()
        assert time.monotonic() - started < 10  # the stream ended, it did not hang
        assert lines[-1] == "data: [DONE]"
        assert '"code":503' in lines[-2] and "exit code -9" in lines[-2], lines[-2]
        unhealthy = 0
        with pytest.raises(httpx.HTTPError):  # the server exits: answered 503 until then
            while True:
                health = httpx.get(f"{url}/health", timeout=5)
                assert health.status_code == 503, health.text
                assert "the engine process exited" in health.json()["error"]["message"]
                unhealthy += 1
                time.sleep(0.05)
        assert unhealthy > 0
        assert child.wait(timeout=20) == 2
        assert "the engine stopped" in child.stderr.read()
        assert engine not in children_of(child.pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
