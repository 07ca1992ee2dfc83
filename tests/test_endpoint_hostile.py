"""`replay --endpoint` against hostile or broken servers (real loopback servers that write
their answers byte for byte): every replay ends within its deadline, the request that got
the odd answer fails (or loses only the counts it could not trust) with its reason, and the
other requests keep their measurements."""

from __future__ import annotations

import gzip
import itertools
import time
import tracemalloc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("httpx")

import pcache
from tests.endpoint_fakes import completion_stream, fake_server, sse

DEADLINE_S = 0.4
SLACK_S = 4.0
PROMPT = 40
HOSTILE = 1
"""The request that gets the hostile answer; the others are answered normally."""
GOOD_CACHED = {0: 0, 2: 32}


def write_trace(tmp_path, count: int = 3):
    path = tmp_path / "trace.jsonl"
    lines = [{"token_ids": [*range(1, PROMPT), 100 + i], "output_length": 2} for i in range(count)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def forever(piece: bytes, pause: float = 0.0):
    for _ in itertools.count():
        yield piece
        if pause:
            time.sleep(pause)


EVENT_STREAM = {"content-type": "text/event-stream"}


class Script:
    """What the server answers: the hostile reply for request HOSTILE, normal ones else."""

    def __init__(self) -> None:
        self.hostile = (200, EVENT_STREAM, completion_stream(PROMPT, 0))
        self.metrics = (404, {}, b"not found")

    def __call__(self, method: str, path: str, body: bytes):
        if path.startswith("/metrics"):
            return self.metrics
        if not path.startswith("/v1/completions"):
            return 404, {}, b"{}"
        index = orjson.loads(body)["prompt"][-1] - 100
        if index == HOSTILE:
            return self.hostile
        return 200, EVENT_STREAM, completion_stream(PROMPT, GOOD_CACHED.get(index, 32))


@pytest.fixture(scope="module")
def server():
    script = Script()
    with fake_server(script) as url:
        yield script, url


def replay(url: str, trace, **options):
    options = {"max_concurrency": 1, "request_timeout_s": DEADLINE_S, "retries": 0, **options}
    started = time.monotonic()
    result = pcache.replay(str(trace), mode="endpoint", url=f"{url}/v1", model="m", **options)
    return result.to_dict(), time.monotonic() - started


def assert_others_measured(data: dict) -> None:
    for index, cached in GOOD_CACHED.items():
        assert data["errors"][index] == "", data["errors"]
        assert data["cached_tokens"][index] == cached
        assert data["ttfts"][index] is not None and data["output_lens"][index] == 2


SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats()
JSON = st.recursive(
    SCALARS | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = ("choices", "usage", "delta", "type", "error", "text", "message", "sglext", "meta_info")
CHUNK = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4),
    st.fixed_dictionaries(
        {
            "choices": st.lists(
                JSON | st.fixed_dictionaries({"delta": JSON, "text": JSON}), max_size=3
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "usage": st.dictionaries(
                st.sampled_from(["prompt_tokens", "completion_tokens", "prompt_tokens_details"]),
                JSON | st.fixed_dictionaries({"cached_tokens": JSON}),
            )
        }
    ),
    JSON,
)
TRICKLES = {
    "keep-alive comments": lambda: forever(b": keep-alive\n\n", 0.05),
    "content chunks": lambda: forever(b'data: {"choices": [{"text": "x"}]}\n\n', 0.05),
    "a byte at a time": lambda: forever(b"d", 0.02),
}


def hostile_kinds() -> dict:
    """The kinds of hostile answer, each a strategy (the sweep draws each in turn)."""
    odd_chunks = st.tuples(st.lists(CHUNK, max_size=5), st.booleans()).map(
        lambda drawn: (200, EVENT_STREAM, sse(*drawn[0], done=drawn[1]))
    )
    trickles = st.sampled_from(sorted(TRICKLES)).map(
        lambda name: (200, EVENT_STREAM, TRICKLES[name]())
    )
    statuses = st.tuples(st.integers(201, 599), st.binary(max_size=300)).map(
        lambda d: (d[0], {}, d[1])
    )
    raw = st.binary(max_size=2000).map(lambda data: (200, EVENT_STREAM, data))
    usages = st.fixed_dictionaries(
        {
            "prompt_tokens": JSON,
            "completion_tokens": JSON,
            "prompt_tokens_details": st.fixed_dictionaries({"cached_tokens": JSON}),
        }
    ).map(
        lambda usage: (
            200,
            EVENT_STREAM,
            sse({"choices": [{"text": "x"}]}, {"choices": [], "usage": usage}),
        )
    )
    return {
        "odd chunks": odd_chunks,
        "trickles": trickles,
        "error statuses": statuses,
        "raw bytes": raw,
        "odd usage": usages,
    }


def hostile_replies():
    return st.one_of(*hostile_kinds().values())


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reply=hostile_replies())
def test_a_hostile_answer_fails_one_request_within_the_deadline(server, tmp_path_factory, reply):
    script, url = server
    script.hostile = reply
    data, took = replay(url, write_trace(tmp_path_factory.mktemp("t")))
    assert took < DEADLINE_S * 3 + SLACK_S
    assert data["num_prompts"] == 3 and data["completed"] >= 2
    assert_others_measured(data)
    error = data["errors"][HOSTILE]
    assert "internal error" not in error
    if error:
        assert data["cached_tokens"][HOSTILE] is None and data["failed"] == 1
    prompt = data["input_lens"][HOSTILE]  # the server's count when it is possible, else pcache's
    assert type(prompt) is int and 0 < prompt <= PROMPT + 65_536
    cached = data["cached_tokens"][HOSTILE]
    assert cached is None or 0 <= cached <= prompt  # never an impossible count


@pytest.mark.parametrize("name", sorted(TRICKLES))
def test_a_trickling_stream_is_cut_at_the_request_deadline(server, tmp_path, name):
    script, url = server
    script.hostile = (200, EVENT_STREAM, TRICKLES[name]())
    data, took = replay(url, write_trace(tmp_path))
    assert took < DEADLINE_S + SLACK_S
    assert data["errors"][HOSTILE] == "no complete response within --request-timeout 0.4 s"
    assert data["failures"]["count"] == 1 and data["completed"] == 2
    assert_others_measured(data)


def test_a_trickling_metrics_page_is_cut_at_the_side_deadline(server, tmp_path):
    script, url = server
    script.hostile = (200, EVENT_STREAM, completion_stream(PROMPT, 16))
    script.metrics = (200, {}, forever(b"# HELP x\n", 0.05))
    try:
        data, took = replay(url, write_trace(tmp_path))
    finally:
        script.metrics = (404, {}, b"not found")
    assert took < 2 * DEADLINE_S + SLACK_S
    assert "no complete answer within 0.4 s" in data["server_metrics_note"]
    assert data["completed"] == 3


BOMB = gzip.compress(b"\0" * (64 << 20), compresslevel=9)


@pytest.mark.parametrize(
    ("reply", "reason", "deadline"),
    [
        ((200, EVENT_STREAM, forever(b"x" * 65536)), "a stream line is longer than 4 MiB", 30),
        ((200, EVENT_STREAM, forever(b"\n" * 65536)), "no complete response", DEADLINE_S),
        ((200, {**EVENT_STREAM, "content-encoding": "gzip"}, BOMB), "longer than 4 MiB", 30),
        ((500, {}, forever(b"x" * 65536)), "HTTP 500: xxxx", 30),
        ((200, {"content-encoding": "br"}, b"data: {}\n\n"), "content-encoding 'br'", 30),
    ],
    ids=["300 MB line", "a flood of blank lines", "gzip bomb", "300 MB error body", "brotli"],
)
def test_what_is_read_is_bounded(server, tmp_path, reply, reason, deadline):
    script, url = server
    script.hostile = reply
    tracemalloc.start()
    try:
        data, took = replay(url, write_trace(tmp_path), request_timeout_s=deadline)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reason in data["errors"][HOSTILE]
    assert peak < 40 << 20, f"{peak / 2**20:.0f} MiB"
    assert took < min(deadline, DEADLINE_S) + SLACK_S
    assert_others_measured(data)


@pytest.mark.parametrize(
    ("chunk", "reason"),
    [
        ({"choices": 5}, "`choices` is a number, not a list"),
        ({"choices": ["x"]}, "choice is a string, not an object"),
        ({"choices": [{"delta": "hi"}]}, "`delta` is a string, not an object"),
    ],
)
def test_an_odd_chunk_fails_its_request_with_the_shape_it_had(server, tmp_path, chunk, reason):
    script, url = server
    script.hostile = (200, EVENT_STREAM, sse(chunk, {"choices": [], "usage": {}}))
    data, _ = replay(url, write_trace(tmp_path))
    assert reason in data["errors"][HOSTILE]
    assert_others_measured(data)


@pytest.mark.parametrize(
    ("usage", "problem"),
    [
        (
            {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 1_000_000}},
            "`usage.prompt_tokens_details.cached_tokens` 1,000,000 exceeds the prompt's 40 tokens",
        ),
        (
            {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 48}},
            "`usage.prompt_tokens_details.cached_tokens` 48 exceeds the prompt's 40 tokens",
        ),
        ({"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": -3}}, "is -3"),
        ({"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 16.0}}, "is 16.0"),
        (
            {"prompt_tokens": "40", "prompt_tokens_details": {"cached_tokens": 16}},
            "`usage.prompt_tokens` is a string",
        ),
        (
            {"prompt_tokens": 10**9, "prompt_tokens_details": {"cached_tokens": 16}},
            "`usage.prompt_tokens` is 1,000,000,000",
        ),
        (
            {"prompt_tokens": 900_000, "prompt_tokens_details": {"cached_tokens": 16}},
            "`prompt_tokens` 900,000 for a prompt of 40 tokens",
        ),
        (
            {"prompt_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0}},
            "`prompt_tokens` 0 for a prompt of 40 tokens",
        ),
    ],
)
def test_impossible_usage_is_unknown_with_a_note(server, tmp_path, usage, problem):
    script, url = server
    chunks = [{"choices": [{"text": "o"}]}, {"choices": [{"text": "k"}]}]
    script.hostile = (200, EVENT_STREAM, sse(*chunks, {"choices": [], "usage": usage}))
    data, _ = replay(url, write_trace(tmp_path))
    assert data["errors"][HOSTILE] == "" and data["completed"] == 3  # the timing stays
    assert data["ttfts"][HOSTILE] is not None
    assert data["usage_problems"] == [HOSTILE]
    note = next(note for note in data["notes"] if "impossible usage" in note)
    assert "in 1 of 3 requests" in note and f"request {HOSTILE}: " in note and problem in note
    assert_others_measured(data)
    assert data["input_lens"][HOSTILE] in (40, usage["prompt_tokens"])
    assert data["cached_tokens"][HOSTILE] in (None, usage["prompt_tokens_details"]["cached_tokens"])
    if data["cached_tokens"][HOSTILE] is not None:
        assert data["cached_tokens"][HOSTILE] <= 40


def test_credentials_in_the_url_are_never_printed(server, tmp_path, cli, monkeypatch):
    script, url = server
    script.hostile = (401, {}, orjson.dumps({"error": {"message": "bad key hunter2secret"}}))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-printed")
    secret_url = url.replace("http://", "http://alice:hunter2secret@") + "/v1?api_key=qwerty123&x=1"
    result = cli(
        "replay", write_trace(tmp_path), "--endpoint", secret_url, "--model", "m",
        "--max-concurrency", "1", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for secret in ("alice", "hunter2secret", "qwerty123", "sk-never-printed"):
        assert secret not in result.output
    data = orjson.loads(result.stdout)
    assert data["endpoint"].startswith("http://***@127.0.0.1:")
    assert data["endpoint"].endswith("/v1?api_key=***&x=1")
    assert data["errors"][HOSTILE] == "HTTP 401: bad key ***"
    text = cli("replay", write_trace(tmp_path), "--endpoint", secret_url, "--model", "m")
    assert "http://***@127.0.0.1" in text.stdout and "hunter2secret" not in text.output
    bad = cli("replay", write_trace(tmp_path), "--endpoint", "ftp://bob:pw123@host/v1")
    assert bad.exit_code == 2 and "pw123" not in bad.output and "ftp://***@host/v1" in bad.stderr


def test_models_that_list_odd_ids_are_a_usage_error_not_a_traceback(tmp_path, cli):
    pages = iter(
        [
            {"data": [{"id": 5}, {"id": 6}]},
            {"data": 5},
            [1, 2],
            {"data": [{"id": "a"}, {"id": "b"}]},
        ]
    )

    def handle(method, path, body):
        return 200, {}, orjson.dumps(next(pages))

    with fake_server(handle) as url:
        for expected in (
            "whose id is a number",
            "`data` is a number",
            "did not list one",
            "lists 2: a, b",
        ):
            result = cli(
                "replay", write_trace(tmp_path), "--endpoint", f"{url}/v1", "--no-server-metrics"
            )
            assert result.exit_code == 2 and expected in result.stderr, result.output
            assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "reply",
    [
        (0, {}, b""),
        (302, {"location": "http://127.0.0.1:1/elsewhere"}, b""),
        (200, EVENT_STREAM, b'data: {"choices": [{"text": "x"}]}\n\ndata: {"choi'),
        (200, EVENT_STREAM, b"data: \xff\xfe{}\n\n"),
        (200, EVENT_STREAM, b"data: " + b"[" * 5000 + b"\n\n"),
        (200, {"content-type": "application/json"}, orjson.dumps({"choices": []})),
        (200, {**EVENT_STREAM, "content-encoding": "gzip"}, b"not gzip at all"),
    ],
    ids=[
        "silent",
        "redirect",
        "cut mid-chunk",
        "not UTF-8",
        "deep nesting",
        "not a stream",
        "bad gzip",
    ],
)
def test_more_broken_answers_fail_their_request_only(server, tmp_path, reply):
    script, url = server
    script.hostile = reply
    data, took = replay(url, write_trace(tmp_path))
    assert took < DEADLINE_S + SLACK_S
    assert data["errors"][HOSTILE] and data["completed"] == 2
    assert_others_measured(data)


def test_escape_sequences_a_server_sends_are_not_written_to_the_terminal(server, tmp_path, cli):
    script, url = server
    message = "\x1b[2J\x1b]0;owned\x07 cleared"
    script.hostile = (400, {}, orjson.dumps({"error": {"message": message}}))
    result = cli("replay", write_trace(tmp_path), "--endpoint", f"{url}/v1", "--model", "m")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b[2J" in result.stderr


@pytest.mark.parametrize(
    "answer",
    [
        {"tokens": [1, -2, 3]},
        {"tokens": "1 2 3"},
        {"tokens": [1, 2], "count": 3},
        {"tokens": []},
        [1, 2, 3],
    ],
)
def test_an_unusable_tokenize_leaves_pcaches_tokens_with_a_note(tmp_path, cli, answer):
    from tests.endpoint_fakes import chat_stream

    def handle(method, path, body):
        if path == "/tokenize":
            return 200, {}, orjson.dumps(answer)
        if path == "/v1/chat/completions":
            return 200, EVENT_STREAM, chat_stream(10, 0)
        return 404, {}, b""

    trace = tmp_path / "chat.jsonl"
    trace.write_bytes(orjson.dumps({"messages": [{"role": "user", "content": "hi"}]}) + b"\n")
    with fake_server(handle) as url:
        result = cli(
            "replay", trace, "--endpoint", f"{url}/v1", "--model", "m", "--format", "json",
            "--request-timeout", "5",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == 1 and data["tokenization"] == "pcache's gpt-oss tokenizer"
    assert any("tokenized with pcache's gpt-oss tokenizer" in note for note in data["notes"])


@pytest.mark.parametrize("label", ['"0"', '"abc"', '"-16"', '"99999999999"', '""'])
def test_a_block_size_label_that_is_no_size_is_ignored(tmp_path, cli, label):
    from tests.endpoint_fakes import completion_stream

    metrics = (
        f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size={label}}} 1\n"
    )

    def handle(method, path, body):
        if path == "/metrics":
            return 200, {}, metrics.encode()
        if path == "/v1/completions":
            return 200, EVENT_STREAM, completion_stream(PROMPT, 0)
        return 404, {}, b""

    with fake_server(handle) as url:
        data, _ = replay(url, write_trace(tmp_path, 1))
    assert data["block_size"] == 16 and data["block_size_source"].startswith("the default")


def test_a_reset_route_that_never_answers_costs_the_side_deadline_only(tmp_path, cli):
    from tests.endpoint_fakes import completion_stream

    def handle(method, path, body):
        if path == "/reset_prefix_cache":
            return 0, {}, b""  # never answers
        if path == "/flush_cache":
            return 200, {}, b""
        if path == "/v1/completions":
            return 200, EVENT_STREAM, completion_stream(PROMPT, 0)
        return 404, {}, b""

    with fake_server(handle) as url:
        started = time.monotonic()
        data, _ = replay(url, write_trace(tmp_path), compare_cache=True)
        took = time.monotonic() - started
    assert data["compare_cache"]["reset"] == "/flush_cache"
    assert data["completed"] == 3
    assert took < 3 * DEADLINE_S + SLACK_S  # one wait on the silent route per reset
