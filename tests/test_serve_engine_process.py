"""`pcache serve` with its engine in a process of its own: the same answers and metrics as
the engine in a thread, and a child that never outlives the server nor hangs it."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import metric, serve_process, served  # noqa: E402
from tests.test_serve import PROMPT, completion, sse_events, wait_until_idle  # noqa: E402

COUNTERS = (
    "pcache:prefix_cache_queries_total",
    "pcache:prefix_cache_hits_total",
    "pcache:generation_tokens_total",
    "pcache:prompt_tokens_total",
    "pcache:time_to_first_token_seconds_count",
)


def children_of(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def exchange(url: str) -> tuple[list, str]:
    """Greedy answers (a repeated prompt, a stream, a chat) and the metrics page after them."""
    bodies = [
        {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "ignore_eos": True},
        {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "ignore_eos": True},
        {"prompt": PROMPT[:50], "max_tokens": 3, "temperature": 0, "stream": True},
    ]
    answers = []
    for body in bodies:
        response = completion(url, **body)
        assert response.status_code == 200, response.text
        if body.get("stream"):
            answers.append([chunk["choices"][0]["text"] for chunk in sse_events(response.text)])
        else:
            answers.append((response.json()["choices"][0]["text"], response.json()["usage"]))
    chat = {"messages": [{"role": "user", "content": "hi " * 30}], "max_tokens": 3}
    response = httpx.post(f"{url}/v1/chat/completions", json={**chat, "temperature": 0})
    answers.append(response.json()["choices"][0]["message"]["content"])
    return answers, wait_until_idle(url)


def test_the_engine_process_answers_and_counts_as_the_engine_thread():
    with served() as (url, _):
        thread_answers, thread_page = exchange(url)
    with served(engine_process=True) as (url, server):
        assert server.engine is None and server.engine_loop.pid in children_of(os.getpid())
        answers, page = exchange(url)
        pid = server.engine_loop.pid
    assert answers == thread_answers
    assert answers[1][1]["prompt_tokens_details"]["cached_tokens"] == 96
    for name in COUNTERS:
        assert metric(page, name) == metric(thread_page, name) > 0, name
    assert metric(page, "pcache:request_success_total", finished_reason="length") == 4
    assert pid not in children_of(os.getpid())  # the child ended with the server


def test_aborts_queue_bounds_and_resets_cross_the_process_boundary():
    async def leave_early(client: httpx.AsyncClient, index: int) -> None:
        body = {"prompt": PROMPT[index:], "max_tokens": 1500, "ignore_eos": True, "stream": True}
        async with client.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break

    async def burst(url: str) -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            await asyncio.gather(*(leave_early(client, index) for index in range(3)))
            body = {"prompt": PROMPT, "max_tokens": 40, "ignore_eos": True}
            responses = await asyncio.gather(
                *(client.post("/v1/completions", json=body) for _ in range(8))
            )
            return [response.status_code for response in responses]

    with served(engine_process=True, max_num_seqs=1, max_waiting=4) as (url, _):
        statuses = asyncio.run(burst(url))
        page = wait_until_idle(url)
        assert set(statuses) == {200, 429}, statuses
        assert metric(page, "pcache:requests_rejected_total") == statuses.count(429)
        assert metric(page, "pcache:request_success_total", finished_reason="abort") == 3
        assert metric(page, "pcache:kv_cache_usage_perc") == 0
        assert httpx.post(f"{url}/reset_prefix_cache").status_code == 200
        again = completion(url, prompt=PROMPT, max_tokens=2)
        assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_an_engine_process_that_dies_fails_its_requests_and_health_says_so():
    async def stream_until_killed(url: str, pid: int) -> list:
        body = {"prompt": PROMPT, "max_tokens": 1500, "ignore_eos": True, "stream": True}
        lines = []
        async with (
            httpx.AsyncClient(base_url=url, timeout=60) as client,
            client.stream("POST", "/v1/completions", json=body) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    lines.append(line)
                    if len(lines) == 1:
                        os.kill(pid, signal.SIGKILL)
        return lines

    with served(engine_process=True) as (url, server):
        lines = asyncio.run(stream_until_killed(url, server.engine_loop.pid))
        assert lines[-1] == "data: [DONE]"
        assert "the engine process exited" in lines[-2] and '"code":503' in lines[-2]
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/health").status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        health = httpx.get(f"{url}/health")
        assert health.status_code == 503 and "exit code -9" in health.json()["error"]["message"]
        assert completion(url, prompt=PROMPT, max_tokens=2).status_code == 503


def test_an_engine_that_cannot_start_is_the_same_error_and_leaves_no_child(tmp_path):
    import json

    from pcache.errors import EngineError
    from pcache.models import preset_config
    from pcache.serve.app import ServeOptions, build_server

    broken = tmp_path / "broken"  # a config, and weights that are not safetensors
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps(preset_config("tiny")))
    (broken / "model.safetensors").write_bytes(b"not a checkpoint")
    for model in (tmp_path / "missing", broken):  # refused by the server, by the child
        messages = []
        for engine_process in (False, True):
            options = ServeOptions(model=str(model), engine_process=engine_process)
            with pytest.raises(EngineError) as raised:
                build_server(options)
            messages.append(str(raised.value))
        assert messages[0] == messages[1] and str(model) in messages[0], messages
    assert not [pid for pid in children_of(os.getpid()) if "engine_process" in cmdline(pid)]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_pcache_serve_runs_its_engine_in_a_child_unless_told_a_thread():
    for arguments, expected in (((), 1), (("--engine-thread",), 0)):
        with serve_process("--model", "tiny", *arguments) as url:
            assert completion(url, prompt=[1, 2, 3], max_tokens=2).status_code == 200
            [server] = [pid for pid in children_of(os.getpid()) if "serve" in cmdline(pid)]
            engines = [pid for pid in children_of(server) if "engine_process" in cmdline(pid)]
            assert len(engines) == expected


def test_engine_cpus_bind_the_engine_and_leave_the_server_free():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to bind apart")
    for arguments in ((), ("--engine-thread",)):
        with serve_process("--model", "tiny", "--engine-cpus", str(cpus[-1]), *arguments) as url:
            assert completion(url, prompt=[1, 2, 3], max_tokens=2).status_code == 200
            [server] = [pid for pid in children_of(os.getpid()) if "serve" in cmdline(pid)]
            assert sorted(os.sched_getaffinity(server)) == cpus  # the server's main thread
            if arguments:  # the engine's thread, and those it started, are the ones bound
                tasks = [int(task.name) for task in Path(f"/proc/{server}/task").iterdir()]
                engine = [task for task in tasks if sorted(os.sched_getaffinity(task)) != cpus]
            else:
                engine = [pid for pid in children_of(server) if "engine_process" in cmdline(pid)]
            assert engine and all(os.sched_getaffinity(pid) == {cpus[-1]} for pid in engine)


@pytest.mark.parametrize(
    ("text", "cpus"), [("0", (0,)), ("0-3", (0, 1, 2, 3)), ("3,0-1", (0, 1, 3)), ("2, 2", (2,))]
)
def test_cpu_lists_read_as_linux_writes_them(text, cpus):
    from pcache.engine.cpus import parse_cpu_list

    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "1-", "0,,1"])
def test_a_bad_cpu_list_is_a_usage_error(text):
    from pcache.engine.cpus import parse_cpu_list
    from pcache.errors import UsageError

    with pytest.raises(UsageError, match="--engine-cpus"):
        parse_cpu_list(text)
