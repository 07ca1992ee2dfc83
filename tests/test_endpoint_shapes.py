"""The endpoint client against the response shapes of vLLM, SGLang and Anthropic (the network
under it replaced by httpx's MockTransport), arrivals, failures and secrets."""

from __future__ import annotations

import itertools
import statistics

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

httpx = pytest.importorskip("httpx")

from pcache.replayer.arrivals import arrival_offsets  # noqa: E402
from pcache.replayer.endpoint.driver import EndpointOptions, replay_endpoint  # noqa: E402
from pcache.replayer.endpoint.reported_cache import ReportedCache, reported_cache  # noqa: E402
from pcache.traces.readers import read_trace  # noqa: E402

URL = "http://server.test:8000/v1"


def sse(*chunks) -> bytes:
    lines = [b"data: " + (c if isinstance(c, bytes) else orjson.dumps(c)) + b"\n\n" for c in chunks]
    return b": keep-alive\n\n" + b"".join(lines)


def token_trace(tmp_path, count: int = 4):
    path = tmp_path / "trace.jsonl"
    lines = [{"token_ids": [*range(1, 40), 100 + i], "output_length": 3} for i in range(count)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return read_trace(path, keep_requests=True)


class FakeVllm:
    """vLLM without --enable-prompt-tokens-details: usage has no cached tokens, /metrics has."""

    def __init__(self) -> None:
        self.queries = self.hits = 0
        self.seen = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            text = (
                f"# TYPE vllm:prefix_cache_queries counter\n"
                f'vllm:prefix_cache_queries_total{{model_name="m"}} {self.queries}.0\n'
                f"# TYPE vllm:prefix_cache_hits counter\n"
                f'vllm:prefix_cache_hits_total{{model_name="m"}} {self.hits}.0\n'
            )
            return httpx.Response(200, text=text)
        body = orjson.loads(request.content)
        prompt = len(body["prompt"])
        self.queries += prompt
        self.hits += 32 if self.seen else 0
        self.seen += 1
        role_only = {"choices": [{"index": 0, "text": "", "finish_reason": None}]}
        chunks = [role_only] + [
            {"choices": [{"index": 0, "text": f"t{i}", "finish_reason": None}]} for i in range(3)
        ]
        usage = {"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3}
        chunks.append({"choices": [], "usage": usage})
        return httpx.Response(200, content=sse(*chunks, b"[DONE]"))


def test_a_server_that_reports_no_cached_tokens_gives_unknown_and_names_the_flag(tmp_path):
    fake = FakeVllm()
    options = EndpointOptions(url=URL, model="m", max_concurrency=1)
    report = replay_endpoint(token_trace(tmp_path), options, httpx.MockTransport(fake))
    data = report.to_dict()
    assert data["completed"] == 4 and data["server_kind"] == "vllm"
    assert data["cached_tokens"] == [None] * 4 and data["total_cached_tokens"] is None
    assert data["cached_tokens_match"] is None  # unknown is not a mismatch, nor a match
    assert "--enable-prompt-tokens-details" in data["cached_tokens_hint"]
    assert data["predicted_cached_tokens"] == [0, 32, 32, 32]
    assert data["server_metrics"]["delta"] == {
        "prefix_cache_queries": 4 * 40,
        "prefix_cache_hits": 3 * 32,
    }
    assert data["output_lens"] == [3] * 4
    for first, content in zip(data["first_chunk_times"], data["ttfts"], strict=True):
        assert first <= content  # the empty first chunk counts only for vLLM's definition
    assert all(len(gaps) == 2 for gaps in data["itls"])


def test_sglang_reports_cached_tokens_in_its_own_fields(tmp_path):
    def sglang(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(404, text="not found")
        done = {
            "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1},
            "sglext": {"cached_tokens_details": {"device": 16, "host": 16}},
        }
        return httpx.Response(200, content=sse(done, b"[DONE]"))

    options = EndpointOptions(url=URL, model="m", max_concurrency=1)
    report = replay_endpoint(token_trace(tmp_path, 2), options, httpx.MockTransport(sglang))
    data = report.to_dict()
    assert data["cached_tokens"] == [32, 32]
    assert data["cached_tokens_field"] == "sglext.cached_tokens_details"
    assert data["mismatched_requests"] == [0]  # the prediction: nothing cached at first
    assert data["server_metrics"] is None and "HTTP 404" in data["server_metrics_note"]


DETAILS = "prompt_tokens_details"
ANTHROPIC = {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 12}


@pytest.mark.parametrize(
    ("body", "usage", "expected"),
    [
        ({}, {DETAILS: {"cached_tokens": 5}}, (5, None, f"usage.{DETAILS}.cached_tokens")),
        (
            {},
            {"input_tokens_details": {"cached_tokens": 7}},
            (7, None, "usage.input_tokens_details.cached_tokens"),
        ),
        ({"sglext": {"cached_tokens": 3}}, {}, (3, None, "sglext.cached_tokens")),
        ({"meta_info": {"cached_tokens": 9}}, None, (9, None, "meta_info.cached_tokens")),
        ({}, ANTHROPIC, (0, 12, "usage.cache_read_input_tokens")),
        ({}, {"prompt_tokens": 10, DETAILS: None}, (None, None, None)),
        (
            {},
            {DETAILS: {"cached_tokens": -1}},
            (
                None,
                None,
                f"usage.{DETAILS}.cached_tokens",
                f"`usage.{DETAILS}.cached_tokens` is -1",
            ),
        ),
        (
            {"sglext": {"cached_tokens_details": {"device": 2.5}}},
            {},
            (None, None, "sglext.cached_tokens_details", "`sglext.cached_tokens_details` is 2.5"),
        ),
        ({}, None, (None, None, None)),
    ],
)
def test_reported_cache_shapes(body, usage, expected):
    assert reported_cache(body, usage) == ReportedCache(*expected)


def test_anthropic_streams_are_read_for_content_and_cache_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    seen_headers = []

    def anthropic(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(404)
        seen_headers.append(request.headers)
        body = orjson.loads(request.content)
        assert body["stream"] is True and body["max_tokens"] == 5 and body["model"] == "claude"
        usage = {
            "input_tokens": 10,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5,
        }

        def text(piece: str) -> dict:
            return {"type": "content_block_delta", "delta": {"type": "text_delta", "text": piece}}

        events = [
            {"type": "message_start", "message": {"usage": {**usage, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            text("Hi"),
            text("!"),
            {"type": "message_delta", "usage": {"output_tokens": 2}},
            {"type": "message_stop"},
        ]
        text = b"".join(
            b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
            for e in events
        )
        return httpx.Response(200, content=text)

    path = tmp_path / "anthropic.jsonl"
    line = {
        "model": "claude-x",
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64,
        "output_length": 5,
    }
    path.write_bytes(orjson.dumps(line) + b"\n")
    options = EndpointOptions(url="https://api.test/v1", model="claude", api="anthropic")
    trace = read_trace(path, keep_requests=True)
    report = replay_endpoint(trace, options, httpx.MockTransport(anthropic))
    data = report.to_dict()
    assert data["completed"] == 1, data["errors"]
    assert data["cached_tokens"] == [100] and data["input_lens"] == [115]
    assert data["output_lens"] == [2] and len(data["itls"][0]) == 1
    assert seen_headers[0]["x-api-key"] == "sk-ant-test-secret"
    assert seen_headers[0]["anthropic-version"] == "2023-06-01"
    assert "sk-ant-test-secret" not in orjson.dumps(data).decode()


def test_failures_are_summarized_and_only_unsent_requests_are_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-print")
    attempts = itertools.count()
    calls: list[int] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text="")
        assert request.headers["authorization"] == "Bearer sk-test-do-not-print"
        body = orjson.loads(request.content)
        index = body["prompt"][-1] - 100
        calls.append(index)
        attempt = next(attempts)
        if index == 0 and calls.count(0) == 1:
            raise httpx.ConnectError(f"refused (attempt {attempt})")
        if index == 1:
            message = f"bad key {request.headers['authorization']}"
            return httpx.Response(401, json={"error": {"message": message}})
        if index == 2:
            raise httpx.ReadTimeout("no chunk for 300 s")
        done = {"choices": [{"index": 0, "text": "x", "finish_reason": "length"}], "usage": {}}
        return httpx.Response(200, content=sse(done, b"[DONE]"))

    options = EndpointOptions(url=URL, model="m", max_concurrency=1, retries=2)
    report = replay_endpoint(token_trace(tmp_path), options, httpx.MockTransport(flaky))
    data = report.to_dict()
    assert calls.count(0) == 2 and calls.count(1) == 1 and calls.count(2) == 1  # no re-POST
    assert data["completed"] == 2 and data["failed"] == 2 and data["retries"] == 1
    assert data["failures"]["count"] == 2
    assert data["failures"]["status_codes"] == {"401": 1, "none": 1}
    assert data["failures"]["first_error"].startswith("HTTP 401: bad key Bearer ***")
    assert "ReadTimeout" in data["errors"][2] and data["errors"][0] == ""
    assert data["ttfts"][1] is None and data["cached_tokens"][1] is None
    assert "sk-test-do-not-print" not in orjson.dumps(data).decode()


def test_arrivals_follow_the_trace_or_a_gamma_process():
    assert arrival_offsets([1000.0, 1500.0, 4000.0], time_scale=0.5) == [0.0, 0.25, 1.5]
    assert arrival_offsets([0.0] * 3, rate=float("inf")) == [0.0, 0.0, 0.0]
    poisson = arrival_offsets([0.0] * 4001, rate=20.0, seed=1)
    gaps = [b - a for a, b in itertools.pairwise(poisson)]
    assert statistics.mean(gaps) == pytest.approx(1 / 20, rel=0.05)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.0, rel=0.08)
    bursty = arrival_offsets([0.0] * 4001, rate=20.0, burstiness=0.25, seed=1)
    gaps = [b - a for a, b in itertools.pairwise(bursty)]
    assert statistics.mean(gaps) == pytest.approx(1 / 20, rel=0.1)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(2.0, rel=0.1)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0, 1e7), min_size=1, max_size=30),
    st.floats(0.05, 10),
    st.one_of(st.none(), st.floats(0.1, 1000)),
)
def test_arrival_offsets_never_go_backwards(stamps, burstiness, rate):
    stamps = sorted(stamps)
    offsets = arrival_offsets(stamps, rate=rate, burstiness=burstiness, seed=3)
    assert len(offsets) == len(stamps) and offsets[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(offsets))


def test_an_unreachable_server_is_a_summary_and_exit_1_not_a_traceback(tmp_path, cli):
    import socket

    trace = token_trace(tmp_path, 3)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    result = cli("replay", trace.source, "--endpoint", url, "--model", "m", "--retries", "1")
    assert result.exit_code == 1, result.output
    assert "0 of 3 requests completed" in result.stdout
    assert "no request completed" in result.stdout
    assert "3 requests failed (none: 3); first: ConnectError" in result.stderr
    assert "Traceback" not in result.output
    missing = cli("replay", trace.source, "--endpoint", url)
    assert missing.exit_code == 2 and "--model not given" in missing.stderr


def test_compare_cache_without_a_way_to_turn_the_cache_off_is_cold_against_warm(tmp_path):
    routes: list[str] = []

    def server(kind: str):
        def handle(request: httpx.Request) -> httpx.Response:
            routes.append(request.url.path)
            if request.url.path == "/metrics":
                name = "sglang:cached_tokens" if kind == "sglang" else "vllm:prefix_cache_hits"
                return httpx.Response(200, text=f"# TYPE {name} counter\n{name}_total 0.0\n")
            if request.url.path in ("/flush_cache", "/reset_prefix_cache"):
                return httpx.Response(200)
            body = orjson.loads(request.content)
            if "cache_salt" in body:
                return httpx.Response(400, json={"error": {"message": "cache_salt unknown"}})
            done = {"choices": [{"index": 0, "text": "x", "finish_reason": "length"}]}
            return httpx.Response(200, content=sse(done, b"[DONE]"))

        return httpx.MockTransport(handle)

    options = EndpointOptions(url=URL, model="m", max_concurrency=1, compare_cache=True)
    data = replay_endpoint(token_trace(tmp_path, 2), options, server("sglang")).to_dict()
    comparison = data["compare_cache"]
    assert comparison["strategy"] == "cold-warm" and comparison["reset"] == "/flush_cache"
    assert comparison["run_order"] == ["cold", "warm"] and "no way to switch" in comparison["note"]
    assert data["completed"] == 2 and "/reset_prefix_cache" not in routes

    data = replay_endpoint(token_trace(tmp_path, 2), options, server("vllm")).to_dict()
    assert data["compare_cache"]["strategy"] == "cold-warm"
    assert data["completed"] == 2 and data["failed"] == 0
    assert any("refused cache_salt" in note for note in data["notes"])


def test_an_endpoint_replay_sends_the_requests_its_reader_parsed(tmp_path, monkeypatch):
    """The trace file is read once: the bodies sent are the reader's parsed requests, so the
    replay works with the file gone, and never opens it again."""
    from pcache.prompt.reading import loading

    path = tmp_path / "chat.jsonl"
    bodies = [
        {"model": "m", "messages": [{"role": "user", "content": f"question {i} " * 20}]}
        for i in range(3)
    ]
    path.write_bytes(b"".join(orjson.dumps(body) + b"\n" for body in bodies))
    trace = read_trace(path, keep_requests=True)
    path.unlink()
    monkeypatch.setattr(loading, "iter_values", None)  # any second read would fail
    sent = []

    def chat(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            sent.append(orjson.loads(request.content)["messages"])
            usage = {"prompt_tokens": 30, "completion_tokens": 1}
            chunk = {"choices": [{"delta": {"content": "ok"}}], "usage": usage}
            return httpx.Response(200, content=sse(chunk, b"[DONE]"))
        return httpx.Response(404)

    options = EndpointOptions(url=URL, model="m", scrape_metrics=False)
    report = replay_endpoint(trace, options, httpx.MockTransport(chat))
    assert report.to_dict()["completed"] == 3
    assert sent == [body["messages"] for body in bodies]
