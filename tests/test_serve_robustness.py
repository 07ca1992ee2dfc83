"""`pcache serve` under hostile input: a request's fault is that request's, bodies are bounded,
every error has OpenAI's shape, and the server stays healthy and correct afterwards."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import metric, peak_rss_kib, raw_exchange, served  # noqa: E402
from tests.test_serve import PROMPT, sse_events, wait_until_idle  # noqa: E402


def post(url: str, route: str, body, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/v1/{route}", json=body, timeout=30, **kwargs)


def assert_openai_error(response: httpx.Response, status: int | None = None) -> dict:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["code"] == response.status_code
    assert status is None or response.status_code == status, response.text
    return error


def assert_serves_correctly(url: str, salt: str) -> None:
    """Healthy, and two identical requests report the cached tokens the pool holds."""
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    body = {"prompt": PROMPT, "max_tokens": 2, "cache_salt": salt}
    first, second = post(url, "completions", body), post(url, "completions", body)
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 96


def engine_errors(url: str) -> float:
    page = httpx.get(f"{url}/metrics", timeout=10).text
    return metric(page, "pcache:request_success_total", finished_reason="error")


@pytest.fixture(scope="module")
def server():
    with served(max_body_bytes=1 << 20, body_timeout_s=1.0) as running:
        yield running


def test_a_temperature_below_the_floor_is_greedy_and_the_server_keeps_serving(server):
    url, _ = server
    greedy = post(url, "completions", {"prompt": "hi", "temperature": 0, "max_tokens": 8})
    tiny = post(url, "completions", {"prompt": "hi", "temperature": 1e-40, "max_tokens": 8})
    assert greedy.status_code == tiny.status_code == 200, tiny.text
    assert tiny.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]
    streamed = post(
        url, "completions", {"prompt": "hi", "temperature": 1e-40, "max_tokens": 8, "stream": True}
    )
    assert streamed.status_code == 200
    chunks = sse_events(streamed.text)
    assert "".join(c["choices"][0]["text"] for c in chunks) == greedy.json()["choices"][0]["text"]
    chat = {"messages": [{"role": "user", "content": "hi"}], "temperature": 1e-40}
    assert post(url, "chat/completions", chat).status_code == 200
    assert_serves_correctly(url, "after-tiny-temperature")


def test_a_sampling_fault_fails_only_its_request_while_the_batch_goes_on(server):
    url, running = server
    sampler = running.engine_loop.sampler
    inner = sampler.inner

    def faulty(logits, temperatures, top_ks=None):  # a row at temperature 0.5 cannot be sampled
        if 0.5 in temperatures:
            raise RuntimeError("probability tensor contains either inf, nan or element < 0")
        return inner(logits, temperatures, top_ks)

    async def main():
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            long_body = {"prompt": PROMPT, "max_tokens": 60, "ignore_eos": True, "stream": True}
            async with client.stream("POST", "/v1/completions", json=long_body) as response:
                lines = response.aiter_lines()
                async for line in lines:  # the long request is in the running batch
                    if line.startswith("data: "):
                        break
                bad = {"prompt": "x", "temperature": 0.5, "max_tokens": 5}
                whole = await client.post("/v1/completions", json=bad)
                streamed = await client.post("/v1/completions", json={**bad, "stream": True})
                chunks = 1 + sum([line.startswith("data: {") async for line in lines])
                return whole, streamed, chunks

    sampler.inner = faulty
    try:
        whole, streamed, chunks = asyncio.run(main())
    finally:
        sampler.inner = inner
    error = assert_openai_error(whole, 500)
    assert "sampling failed" in error["message"] and error["type"] == "internal_error"
    assert streamed.status_code == 200  # the stream had started: the error is its last event
    lines = [line for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and '"error"' in lines[-2]
    assert chunks == 60  # the request beside them got every token
    text = wait_until_idle(url)
    assert metric(text, "pcache:request_success_total", finished_reason="error") >= 2
    assert_serves_correctly(url, "after-sampling-fault")


def test_tokens_drawn_around_the_guard_still_serve_and_logprobs_fail_by_name(server):
    url, running = server
    runner = running.engine.runner
    guard = runner.sampler
    runner.sampler = guard.inner  # as if the runner drew its tokens some other way
    try:
        plain = post(url, "completions", {"prompt": PROMPT, "max_tokens": 3})
        wanted = post(url, "completions", {"prompt": PROMPT, "max_tokens": 3, "logprobs": 1})
    finally:
        runner.sampler = guard
    assert plain.status_code == 200 and plain.json()["usage"]["completion_tokens"] == 3
    assert "gave no logprobs" in assert_openai_error(wanted, 500)["message"]
    assert_serves_correctly(url, "after-unguarded")


JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["nan", "NaN", "inf", "-Infinity", "1e309", "", "\x00", "\ud7ff", "🙂" * 9])
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "top_k", "n", "stream", "stream_options", "stop", "logprobs", "top_logprobs", "echo",
    "seed", "logit_bias", "presence_penalty", "tools", "tool_choice", "response_format",
    "model", "user", "ignore_eos", "cache_salt", "stop_token_ids", "best_of", "suffix",
]  # fmt: skip
SANE = {"prompt": "hi", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
HOSTILE_BODIES = st.one_of(
    JUNK,
    st.fixed_dictionaries(
        {}, optional={**{key: JUNK for key in FIELDS}, "max_tokens": st.integers(-3, 3)}
    ).map(lambda body: {**SANE, **body} if "prompt" not in body else body),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=HOSTILE_BODIES, chat=st.booleans())
def test_hostile_bodies_get_a_200_or_an_openai_shaped_4xx(server, body, chat):
    url, _ = server
    errors = engine_errors(url)
    response = post(url, "chat/completions" if chat else "completions", body)
    assert engine_errors(url) == errors  # refused or served: never failed inside the engine
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    event(f"status {response.status_code}")
    if response.status_code != 200:
        assert_openai_error(response)
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert response.text.endswith("data: [DONE]\n\n")
    else:
        assert response.json()["usage"]["completion_tokens"] >= 1


RAW_BODIES = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b'{"prompt": "x"', b'{"prompt": NaN}', b'{"a": 1e999999}', b"[" * 5000]),
    st.builds(
        lambda depth: b'{"prompt": ' + b"[" * depth + b"]" * depth + b"}", st.integers(1, 3000)
    ),
    st.text(max_size=30).map(lambda text: f'{{"prompt": "{text}"}}'.encode("utf-8", "replace")),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=RAW_BODIES)
def test_malformed_bytes_get_an_openai_shaped_4xx_or_a_200(server, body):
    url, _ = server
    response = httpx.post(f"{url}/v1/completions", content=body, timeout=30)
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    if response.status_code != 200:
        assert_openai_error(response)


def test_after_the_hostile_bodies_the_server_is_healthy_and_exact(server):
    url, running = server
    wait_until_idle(url)
    assert not running.engine.sequences
    assert_serves_correctly(url, "after-hostile-bodies")


def test_a_declared_length_over_the_limit_is_refused_before_reading(server):
    url, _ = server
    head = (
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 2000000000\r\n\r\n"
    )
    started = time.monotonic()
    status, body = raw_exchange(url, head, timeout=5)
    assert status == 413 and time.monotonic() - started < 5
    assert "exceeds 1048576 bytes" in body.decode()
    status, _ = raw_exchange(url, head.replace(b"2000000000", b"12abc"), timeout=5)
    assert status == 400


def test_a_chunked_body_over_the_limit_is_cut_off_without_buffering_it(server):
    url, _ = server
    chunk = b"x" * 65536
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    head = (
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    before = peak_rss_kib()
    status, body = raw_exchange(url, [head, *[framed] * 4800], timeout=30)  # 300 MiB offered
    growth = peak_rss_kib() - before
    assert status == 413 and b"exceeds" in body
    assert growth < 32 * 1024, f"the process grew by {growth} KiB"
    assert_serves_correctly(url, "after-chunked")


def test_a_body_that_trickles_in_gets_a_408(server):
    url, _ = server
    head = (
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b'content-length: 100\r\n\r\n{"prompt": '
    )
    started = time.monotonic()
    status, body = raw_exchange(url, head, timeout=10)
    assert status == 408 and "did not arrive" in body.decode()
    assert time.monotonic() - started < 5


def test_every_status_has_the_openai_error_shape(server):
    url, running = server
    assert_openai_error(httpx.get(f"{url}/v1/nothing-here"), 404)
    assert_openai_error(httpx.get(f"{url}/v1/completions"), 405)
    assert_openai_error(httpx.delete(f"{url}/health"), 405)
    assert_openai_error(post(url, "completions", {"prompt": "x", "model": "gpt-4o"}), 404)
    large = httpx.post(f"{url}/v1/completions", content=b" " * (2 << 20), timeout=30)
    assert_openai_error(large, 413)
    codec = running.codec
    encode = codec.encode

    def broken(*args, **kwargs):
        raise ValueError("simulated codec fault")

    codec.encode = broken
    try:
        failed = post(url, "completions", {"prompt": "x"})
    finally:
        codec.encode = encode
    error = assert_openai_error(failed, 500)
    assert "simulated codec fault" in error["message"]
    assert httpx.get(f"{url}/health").status_code == 200


def test_a_fault_while_answering_ends_the_answer_with_an_error_and_frees_the_request(server):
    url, running = server
    codec = running.codec
    detokenizer = codec.detokenizer

    class Broken:
        def push(self, token_id, final=False):
            raise ValueError("simulated detokenizer fault")

        flush = push

    codec.detokenizer = Broken
    try:
        body = {"prompt": PROMPT, "max_tokens": 300, "ignore_eos": True}
        whole = post(url, "completions", body)
        stream = post(url, "completions", {**body, "stream": True})
    finally:
        codec.detokenizer = detokenizer
    assert "simulated detokenizer fault" in assert_openai_error(whole, 500)["message"]
    lines = [line for line in stream.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and "simulated detokenizer fault" in lines[-2]
    text = wait_until_idle(url)
    assert metric(text, "pcache:kv_cache_usage_perc") == 0 and not running.engine.sequences
    assert_serves_correctly(url, "after-answer-fault")


def test_an_unprocessable_entity_is_shaped_like_every_other_error():
    from starlette.exceptions import HTTPException

    from pcache.serve.api_error import error_for_status

    for status in (400, 404, 405, 408, 413, 422, 429, 500, 503, 418):
        error = error_for_status(status, "x").body()["error"]
        assert error["code"] == status and error["param"] is None and error["type"]
    assert HTTPException(422).status_code == 422


def test_json_numbers_a_float_cannot_hold_are_refused():
    from pcache.serve.api_error import ApiError
    from pcache.serve.protocol import parse_request

    for value in (math.inf, math.nan, -math.inf):
        with pytest.raises(ApiError) as caught:
            parse_request({"prompt": "x", "temperature": value}, chat=False)
        assert caught.value.param == "temperature" and caught.value.status == 400
