"""`pcache serve` over loopback HTTP: response shapes, cached tokens, metrics, faults, load."""

from __future__ import annotations

import asyncio
import resource
import time

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import metric, served  # noqa: E402

PROMPT = list(range(1, 100))  # 99 tokens: 6 full blocks of 16 can be reused


def completion(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", json={"model": "tiny", **body}, timeout=30)


def sse_events(response_text: str) -> list:
    import orjson

    lines = [line[6:] for line in response_text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [orjson.loads(line) for line in lines[:-1]]


def wait_until_idle(url: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = httpx.get(f"{url}/metrics", timeout=5).text
        busy = metric(text, "pcache:num_requests_running") + metric(
            text, "pcache:num_requests_waiting"
        )
        if busy == 0:
            return text
        assert time.monotonic() < deadline, "requests are still running"
        time.sleep(0.05)


def test_completions_and_chat_report_the_engines_cached_tokens_and_metrics_agree():
    with served() as (url, server):
        first = completion(url, prompt=PROMPT, max_tokens=4, temperature=0, ignore_eos=True)
        second = completion(url, prompt=PROMPT, max_tokens=4, temperature=0, ignore_eos=True)
        assert first.status_code == second.status_code == 200
        one, two = first.json(), second.json()
        assert one["object"] == "text_completion" and one["model"] == "tiny"
        assert one["choices"][0]["finish_reason"] == "length"
        assert one["choices"][0]["text"] == two["choices"][0]["text"]  # greedy
        assert one["usage"]["prompt_tokens"] == 99 and one["usage"]["completion_tokens"] == 4
        assert one["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert two["usage"]["prompt_tokens_details"]["cached_tokens"] == 96

        chat = {
            "model": "tiny",
            "messages": [
                {"role": "system", "content": "Be brief. " * 20},
                {"role": "user", "content": "hi"},
            ],
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        usages = []
        for _ in range(2):
            response = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=30)
            assert response.headers["content-type"].startswith("text/event-stream")
            chunks = sse_events(response.text)
            assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
            assert chunks[-2]["choices"][0]["finish_reason"] == "length"
            assert chunks[-1]["choices"] == []
            usages.append(chunks[-1]["usage"])
        prompt_tokens = usages[0]["prompt_tokens"]
        assert prompt_tokens == len(server.codec.render_chat(chat["messages"], None))
        assert usages[0]["prompt_tokens_details"]["cached_tokens"] == 0
        assert usages[1]["prompt_tokens_details"]["cached_tokens"] == prompt_tokens // 16 * 16

        text = wait_until_idle(url)
        assert metric(text, "pcache:prefix_cache_queries_total") == 2 * 99 + 2 * prompt_tokens
        assert metric(text, "pcache:prefix_cache_hits_total") == 96 + prompt_tokens // 16 * 16
        assert metric(text, "pcache:time_to_first_token_seconds_count") == 4
        assert metric(text, "pcache:request_success_total", finished_reason="length") == 4
        assert 'le="2560.0"' in text  # vLLM's TTFT buckets
        models = httpx.get(f"{url}/v1/models").json()
        assert models["data"][0]["id"] == "tiny"
        assert httpx.post(f"{url}/reset_prefix_cache").status_code == 200
        again = completion(url, prompt=PROMPT, max_tokens=1)
        assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        warm = completion(url, prompt=PROMPT, max_tokens=1)  # SGLang's flush empties it too
        assert warm.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
        flushed = httpx.post(f"{url}/flush_cache")
        assert (flushed.status_code, flushed.text) == (200, "Cache flushed.\n")
        cold = completion(url, prompt=PROMPT, max_tokens=1)
        assert cold.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


MALFORMED = [
    (b"{", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"prompt": ""}', "prompt"),
    (b'{"prompt": [1, -2]}', "prompt"),
    (b'{"prompt": [1, true]}', "prompt"),
    (b'{"prompt": [600]}', "token ids must be in [0, 512)"),
    (b'{"prompt": "x", "max_tokens": 0}', "max_tokens"),
    (b'{"prompt": "x", "max_tokens": "5"}', "max_tokens"),
    (b'{"prompt": "x", "n": 2}', "n"),
    (b'{"prompt": "x", "temperature": 9}', "temperature"),
    (b'{"prompt": "x", "stream": "yes"}', "stream"),
    (b'{"prompt": "x", "stream_options": {"include_usage": true}}', "stream_options"),
    (b'{"prompt": "x", "max_tokens": 4000}', "exceeds"),
]
MALFORMED_CHAT = [
    (b'{"messages": []}', "messages"),
    (b'{"messages": "hi"}', "messages"),
    (b'{"messages": [{"content": "no role"}], "stream": true}', "messages"),
]


def test_malformed_bodies_get_openai_style_400s_and_the_server_keeps_serving():
    with served() as (url, _):
        cases = [("completions", *case) for case in MALFORMED]
        cases += [("chat/completions", *case) for case in MALFORMED_CHAT]
        for route, body, fragment in cases:
            response = httpx.post(f"{url}/v1/{route}", content=body, timeout=10)
            assert response.status_code == 400, (body, response.text)
            error = response.json()["error"]
            assert fragment in error["message"] or error["param"] == fragment, (body, error)
            assert error["type"] == "invalid_request_error" and error["code"] == 400
        unknown = completion(url, model="gpt-4o", prompt="x")
        assert unknown.status_code == 404 and "gpt-4o" in unknown.json()["error"]["message"]
        assert completion(url, prompt="still serving", max_tokens=2).status_code == 200
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_full_queue_answers_429_and_the_accepted_requests_complete():
    async def main(url: str):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            body = {"prompt": PROMPT, "max_tokens": 150, "ignore_eos": True}
            return await asyncio.gather(
                *(client.post("/v1/completions", json=body) for _ in range(10))
            )

    with served(max_num_seqs=1, max_waiting=2) as (url, server):
        responses = asyncio.run(main(url))
        statuses = sorted(response.status_code for response in responses)
        assert set(statuses) == {200, 429}, statuses
        for response in responses:
            if response.status_code == 429:
                assert response.json()["error"]["type"] == "rate_limit_exceeded"
                assert response.headers["retry-after"] == "1"
            else:
                assert response.json()["usage"]["completion_tokens"] == 150
        text = wait_until_idle(url)
        assert metric(text, "pcache:requests_rejected_total") == statuses.count(429)
        assert completion(url, prompt="after the burst", max_tokens=2).status_code == 200
        assert not server.engine.sequences


def test_clients_that_disconnect_leave_no_block_referenced():
    async def read_a_little_then_leave(client: httpx.AsyncClient, index: int) -> None:
        body = {"prompt": PROMPT[index:], "max_tokens": 1500, "ignore_eos": True, "stream": True}
        async with client.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            lines = 0
            async for line in response.aiter_lines():
                lines += line.startswith("data: ")
                if lines == 1 + index % 3:  # some leave after a chunk, some a little later
                    break

    async def leave_while_waiting(client: httpx.AsyncClient, index: int) -> None:
        body = {"prompt": PROMPT[index:], "max_tokens": 1500, "ignore_eos": True}
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/v1/completions", json=body, timeout=0.3)

    async def main(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            await asyncio.gather(
                *(read_a_little_then_leave(client, index) for index in range(8)),
                *(leave_while_waiting(client, index) for index in range(8, 12)),
            )

    with served(max_num_seqs=3, check_integrity=True) as (url, server):
        asyncio.run(main(url))
        text = wait_until_idle(url)
        assert metric(text, "pcache:request_success_total", finished_reason="abort") == 12
        assert metric(text, "pcache:kv_cache_usage_perc") == 0
        assert httpx.get(f"{url}/health").status_code == 200  # the integrity checks passed
        server.engine.check_integrity()  # the engine's thread is idle
        assert not server.engine.sequences and not server.engine.has_unfinished_requests()
        assert server.engine.kv_manager.usage == 0.0
        assert completion(url, prompt=PROMPT, max_tokens=2).status_code == 200


def _resident_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_200_concurrent_streams_all_complete_with_bounded_memory():
    async def one(client: httpx.AsyncClient, index: int) -> tuple[int, int, bool]:
        body = {
            "prompt": [*PROMPT[:40], index % 200 + 200],
            "max_tokens": 6,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        response = await client.post("/v1/completions", json=body)
        chunks = sse_events(response.text)
        usage = chunks[-1]["usage"]
        return len(chunks) - 1, usage["completion_tokens"], response.status_code == 200

    async def wave(url: str) -> list:
        limits = httpx.Limits(max_connections=250, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
            return await asyncio.gather(*(one(client, index) for index in range(200)))

    with served() as (url, server):
        first = asyncio.run(wave(url))
        peak_after_first = _resident_kib()
        second = asyncio.run(wave(url))
        for chunks, tokens, ok in first + second:
            assert ok and chunks == tokens == 6
        text = wait_until_idle(url)
        assert metric(text, "pcache:request_success_total", finished_reason="length") == 400
        assert not server.engine.sequences and not server.engine_loop.core.requests
        assert len(server.engine_loop.streams) == 0
        assert _resident_kib() - peak_after_first < 64 * 1024  # a second wave keeps no state


def test_chat_is_rendered_with_the_model_directorys_own_template(tmp_path):
    import shutil

    import orjson

    from pcache.pipeline import Settings
    from pcache.prompt.renderers.hf_template import load_hf_renderer
    from pcache.prompt.renderers.render import render
    from pcache.prompt.shapes.request import request_from_document
    from pcache.replayer.endpoint.driver import EndpointOptions, replay_endpoint
    from pcache.traces.readers import read_trace
    from tests.fixtures import hf_model_dir
    from tests.serve_helpers import write_random_checkpoint

    source = hf_model_dir("qwen3")  # pcache renders it as transformers does (test_hf_template)
    write_random_checkpoint("tiny-qwen3", tmp_path, vocab_size=151936)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, tmp_path / name)
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    body = {
        "messages": [{"role": "user", "content": "Add 2 and 3."}],
        "tools": [tool],
    }
    renderer = load_hf_renderer(str(source))
    expected = render(request_from_document(body, "test"), renderer).token_ids
    assert "<tools>" in renderer.decode(list(expected))  # Qwen3's template, not ChatML's
    with served(model=str(tmp_path), served_model_name="qwen3-tiny") as (url, server):
        assert server.codec.chat_template == "model"
        request = {"model": "qwen3-tiny", **body, "max_tokens": 2}
        response = httpx.post(f"{url}/v1/chat/completions", json=request, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["prompt_tokens"] == len(expected)
        assert server.codec.render_chat(body["messages"], body["tools"]) == list(expected)
        # a chat trace replayed through --api chat: the prediction renders as the server does
        trace_path = tmp_path / "chat.jsonl"
        system = {"role": "system", "content": "You answer in one word. " * 30}
        lines = [
            {"messages": [system, {"role": "user", "content": f"Question {i}?"}], "tools": [tool]}
            for i in range(4)
        ]
        trace_path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        trace = read_trace(
            trace_path, settings=Settings(tokenizer=str(tmp_path)), keep_requests=True
        )
        options = EndpointOptions(
            url=f"{url}/v1", model="qwen3-tiny", api="chat", max_concurrency=1,
            settings=Settings(tokenizer=str(tmp_path)), max_output_tokens=2,
        )  # fmt: skip
        data = replay_endpoint(trace, options).to_dict()
        assert data["completed"] == 4
        assert data["cached_tokens"] == data["predicted_cached_tokens"]
        assert data["cached_tokens"][0] == 0 and min(data["cached_tokens"][1:]) > 0


def test_a_failed_step_fails_its_requests_and_the_engine_serves_the_next_ones():
    with served() as (url, server):
        step = server.engine.step
        faults = iter([RuntimeError("simulated fault")])

        def failing_once():
            fault = next(faults, None)
            if fault is not None:
                raise fault
            return step()

        server.engine.step = failing_once
        response = completion(url, prompt=PROMPT, max_tokens=2)
        assert response.status_code == 500
        error = response.json()["error"]
        assert "simulated fault" in error["message"] and error["type"] == "internal_error"
        assert httpx.get(f"{url}/health").status_code == 200
        first = completion(url, prompt=PROMPT, max_tokens=2)
        second = completion(url, prompt=PROMPT, max_tokens=2)
        assert first.status_code == second.status_code == 200
        assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # afresh
        assert second.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 96
        text = wait_until_idle(url)
        assert metric(text, "pcache:request_success_total", finished_reason="error") == 1


def test_a_broken_pool_stops_the_engine_and_the_server_says_so():
    with served(check_integrity=True) as (url, server):

        def broken_check():
            raise AssertionError("simulated broken invariant")

        server.engine.check_integrity = broken_check
        response = completion(url, prompt="x", max_tokens=2)
        assert response.status_code == 500
        assert "simulated broken invariant" in response.json()["error"]["message"]
        health = httpx.get(f"{url}/health")
        assert health.status_code == 503 and "simulated broken invariant" in health.text
        assert health.json()["error"]["type"] == "service_unavailable"
        assert completion(url, prompt="y").status_code == 503


def test_a_request_joins_the_running_batch_instead_of_waiting_for_it():
    async def main(url: str) -> tuple[int, float, int]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            long_body = {"prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "stream": True}
            async with client.stream("POST", "/v1/completions", json=long_body) as response:
                lines = response.aiter_lines()
                async for line in lines:  # the long request is decoding
                    if line.startswith("data: "):
                        break
                short = await client.post(
                    "/v1/completions", json={"prompt": [5, 6, 7], "max_tokens": 2}
                )
                page = (await client.get("/metrics")).text
                running = metric(page, "pcache:num_requests_running")
                chunks = 1
                async for line in lines:
                    chunks += line.startswith("data: {")
                return short.status_code, running, chunks

    with served() as (url, _):
        status, running_after_short, chunks = asyncio.run(main(url))
    assert status == 200 and chunks == 400
    assert running_after_short == 1  # the short one finished while the long one still ran


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--model", "no-such-model"), "not a model directory nor a preset"),
        (("--model", "tiny", "--block-size", "3"), "--block-size must be a power of two"),
        (("--model", "tiny", "--engine", "tpu"), "--engine must be cpu or gpu"),
        (("--model", "tiny", "--host", "203.0.113.1", "--port", "0"), "cannot listen on"),
        (("--model", "tiny", "--engine-cpus", "99999"), "--engine-cpus: no CPU 99999 here"),
        (("--model", "tiny", "--engine-cpus", "0-x"), "--engine-cpus takes a CPU list"),
    ],
)
def test_serve_refuses_bad_options_in_one_line(cli, arguments, message):
    result = cli("serve", *arguments)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert result.stderr.count("\n") == 1


def test_the_engine_runs_under_a_short_switch_interval_given_back_at_stop():
    import sys

    from pcache.serve.engine_loop import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    with served() as (url, _):
        assert sys.getswitchinterval() == pytest.approx(min(before, SWITCH_INTERVAL_S))
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    assert sys.getswitchinterval() == before
