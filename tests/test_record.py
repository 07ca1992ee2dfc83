"""Recording through the real OpenAI and Anthropic SDKs, with a mock transport as the network.

What the recorder writes is checked by what reads it: `pcache lint` and `pcache replay`.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import logging
from concurrent.futures import ThreadPoolExecutor

import anthropic
import httpx
import httpx2
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.record import AsyncTransport, Transport
from pcache.record.canned import CannedResponses, chat_completion
from pcache.record.usage import UsageScanner
from tests.sdk_agents import (
    anthropic_agent,
    anthropic_responses,
    async_anthropic_agent,
    openai_agent,
    openai_responses,
    ticking_clock,
)

API_KEY = "sk-test-secret-0123456789"


def _lines(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _run_agent(kind: str, path, clock=None) -> str:
    if kind == "openai":
        canned = httpx2.MockTransport(CannedResponses(openai_responses()))
        client = openai.OpenAI(
            api_key=API_KEY, http_client=httpx2.Client(transport=Transport(path, canned))
        )
        return openai_agent(client, clock)
    if kind == "openai-httpx":  # the SDK also takes a client of the original httpx package
        canned = httpx.MockTransport(CannedResponses(openai_responses()))
        client = openai.OpenAI(
            api_key=API_KEY, http_client=httpx.Client(transport=Transport(path, canned))
        )
        return openai_agent(client, clock)
    if kind == "anthropic":
        canned = httpx2.MockTransport(CannedResponses(anthropic_responses()))
        client = anthropic.Anthropic(
            api_key=API_KEY, http_client=httpx2.Client(transport=Transport(path, canned))
        )
        return anthropic_agent(client, clock)
    assert kind == "anthropic-async"
    canned = httpx2.MockTransport(CannedResponses(anthropic_responses()))
    client = anthropic.AsyncAnthropic(
        api_key=API_KEY, http_client=httpx2.AsyncClient(transport=AsyncTransport(path, canned))
    )
    return asyncio.run(async_anthropic_agent(client, clock))


AGENTS = ["openai", "openai-httpx", "anthropic", "anthropic-async"]


@pytest.mark.parametrize("kind", AGENTS)
def test_a_clean_agent_loop_records_and_lints_silently(kind, tmp_path, cli):
    path = tmp_path / "recorded.jsonl"
    assert _run_agent(kind, path) == "You're welcome!"
    lines = _lines(path)
    assert len(lines) == 3
    assert [line["status"] for line in lines] == [200, 200, 200]
    assert all(line["usage"] and line["output_length"] == 9 for line in lines)
    assert API_KEY.encode() not in path.read_bytes()  # headers are never written
    result = cli("lint", path)
    assert result.exit_code == 0, result.output
    assert "All checks passed (3 requests in 1 file)" in result.output


@pytest.mark.parametrize("kind", AGENTS)
def test_a_timestamp_planted_in_the_system_prompt_is_found(kind, tmp_path, cli):
    path = tmp_path / "recorded.jsonl"
    _run_agent(kind, path, clock=ticking_clock())
    result = cli("lint", path, "--format", "json")
    assert result.exit_code == 1
    findings = orjson.loads(result.stdout)["findings"]
    clocks = [finding for finding in findings if finding["code"] == "PC101"]
    assert {2, 3} <= {finding["line"] for finding in clocks}  # the clock changed there
    system_path = "body.system" if kind.startswith("anthropic") else "body.messages[0].content"
    assert {finding["json_path"] for finding in clocks} == {system_path}


def test_replay_reads_a_recording_with_its_observed_usage(tmp_path, cli):
    path = tmp_path / "recorded.jsonl"
    _run_agent("anthropic", path)
    result = cli("replay", path, "--simulate", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "observed" in result.stdout


def _echo_handler(sent: list[bytes], response=None):
    def handle(request):
        sent.append(request.content)
        return response(request) if response else httpx2.Response(200, json=chat_completion("ok"))

    return handle


def test_bodies_are_written_byte_for_byte(tmp_path):
    path, sent = tmp_path / "r.jsonl", []
    client = openai.OpenAI(
        api_key=API_KEY,
        http_client=httpx2.Client(
            transport=Transport(path, httpx2.MockTransport(_echo_handler(sent)), session_id="s-1")
        ),
    )
    text = 'Zoë said "hi"\n\ttabs, 1.50 and 1e5 stay as sent'
    client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": text}], temperature=1.0
    )
    line = path.read_bytes()
    assert line.endswith(b',"body":' + sent[0] + b"}\n")
    assert line.count(b"\n") == 1
    assert _lines(path)[0]["session_id"] == "s-1"


def test_session_id_may_be_a_function_of_the_body(tmp_path):
    path = tmp_path / "r.jsonl"
    inner = httpx2.MockTransport(_echo_handler([]))
    transport = Transport(path, inner, session_id=lambda body: body.get("user"))
    client = httpx2.Client(transport=transport)
    for user in ("ana", None):
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        client.post("http://127.0.0.1:9/v1/chat/completions", json=body | {"user": user})
    first, second = _lines(path)
    assert first["session_id"] == "ana" and "session_id" not in second


def test_url_keeps_no_query_and_no_credentials(tmp_path):
    path = tmp_path / "r.jsonl"
    client = httpx2.Client(transport=Transport(path, httpx2.MockTransport(_echo_handler([]))))
    client.post(
        "https://user:pw@example.test/v1/chat/completions?key=SECRET",
        json={"messages": [{"role": "user", "content": "x"}]},
    )
    assert _lines(path)[0]["url"] == "https://example.test/v1/chat/completions"
    assert b"SECRET" not in path.read_bytes() and b"pw" not in path.read_bytes()


def test_only_request_bodies_pcache_reads_are_recorded(tmp_path):
    path = tmp_path / "r.jsonl"
    client = httpx2.Client(transport=Transport(path, httpx2.MockTransport(_echo_handler([]))))
    client.get("http://127.0.0.1:9/v1/models")
    client.post("http://127.0.0.1:9/v1/embeddings", json={"model": "e", "input": "x"})
    client.post("http://127.0.0.1:9/v1/files", content=b"\x00binary")
    assert not path.exists()


class _Chunks(httpx2.SyncByteStream):
    def __init__(self, chunks: list[bytes]):
        self.chunks, self.closed = chunks, False

    def __iter__(self):
        yield from self.chunks

    def close(self):
        self.closed = True


OPENAI_STREAM = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":'
    b'[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":null}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32,'
    b'"prompt_tokens_details":{"cached_tokens":16}}}\n\n'
    b"data: [DONE]\n\n"
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[start:end] for start, end in itertools.pairwise(points)]


def test_a_stream_reaches_the_application_untouched_and_its_usage_is_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    chunks = _split(OPENAI_STREAM, [7, 100, 101, 250, 333])
    stream = _Chunks(chunks)
    events = {"content-type": "text/event-stream"}
    inner = httpx2.MockTransport(
        lambda request: httpx2.Response(200, headers=events, stream=stream)
    )
    client = httpx2.Client(transport=Transport(path, inner))
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with client.stream("POST", "http://127.0.0.1:9/v1/chat/completions", json=body) as response:
        assert not path.exists()  # the line is written when the response ends, not before
        received = list(response.iter_raw())
    assert received == chunks and stream.closed
    (line,) = _lines(path)
    assert line["usage"]["prompt_tokens_details"] == {"cached_tokens": 16}
    assert line["output_length"] == 2


def test_the_openai_sdk_streams_through_the_recorder(tmp_path):
    path = tmp_path / "r.jsonl"
    events = {"content-type": "text/event-stream"}
    inner = httpx2.MockTransport(
        lambda r: httpx2.Response(200, headers=events, stream=_Chunks([OPENAI_STREAM]))
    )
    client = openai.OpenAI(
        api_key=API_KEY, http_client=httpx2.Client(transport=Transport(path, inner))
    )
    stream = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Hello"
    assert _lines(path)[0]["usage"]["total_tokens"] == 32


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(OPENAI_STREAM)), max_size=12))
def test_usage_is_found_however_the_stream_is_cut(cuts):
    scanner = UsageScanner("text/event-stream; charset=utf-8")
    for chunk in _split(OPENAI_STREAM, cuts):
        scanner.feed(chunk)
    assert scanner.finish()["completion_tokens"] == 2


def test_a_compressed_json_body_is_read_as_it_streams(tmp_path):
    path = tmp_path / "r.jsonl"
    payload = gzip.compress(orjson.dumps(chat_completion("hi", usage={"completion_tokens": 4})))
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    inner = httpx2.MockTransport(
        lambda r: httpx2.Response(200, headers=headers, stream=_Chunks([payload[:9], payload[9:]]))
    )
    client = httpx2.Client(transport=Transport(path, inner))
    response = client.post(
        "http://127.0.0.1:9/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}]},
    )
    assert response.json()["choices"][0]["message"]["content"] == "hi"
    assert _lines(path)[0]["output_length"] == 4


def test_a_failure_to_write_never_fails_the_request(tmp_path, caplog):
    blocked = tmp_path / "a-directory"
    blocked.mkdir()
    client = openai.OpenAI(
        api_key=API_KEY,
        http_client=httpx2.Client(
            transport=Transport(blocked, httpx2.MockTransport(_echo_handler([])))
        ),
    )
    with caplog.at_level(logging.WARNING, logger="pcache.record"):
        for _ in range(3):
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
            assert reply.choices[0].message.content == "ok"
    assert sum("cannot record" in record.message for record in caplog.records) == 1


def test_a_request_without_a_response_is_not_recorded(tmp_path):
    path = tmp_path / "r.jsonl"

    def refuse(request):
        raise httpx2.ConnectError("refused", request=request)

    client = httpx2.Client(transport=Transport(path, httpx2.MockTransport(refuse)))
    with pytest.raises(httpx2.ConnectError):
        client.post("http://127.0.0.1:9/v1/messages", json={"messages": []})
    assert not path.exists()


def test_threads_append_whole_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    transport = Transport(path, httpx2.MockTransport(_echo_handler([])))
    client = httpx2.Client(transport=transport)

    def send(index: int) -> int:
        body = {"messages": [{"role": "user", "content": f"{index} " + "x" * 5000}]}
        return client.post("http://127.0.0.1:9/v1/chat/completions", json=body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(send, range(200))) == {200}
    transport.close()
    contents = sorted(
        int(line["body"]["messages"][0]["content"].split()[0]) for line in _lines(path)
    )
    assert contents == list(range(200))


def test_concurrent_async_requests_append_whole_lines(tmp_path):
    path = tmp_path / "r.jsonl"

    async def main():
        transport = AsyncTransport(path, httpx2.MockTransport(_echo_handler([])))
        async with httpx2.AsyncClient(transport=transport) as client:
            bodies = [{"messages": [{"role": "user", "content": str(i)}]} for i in range(100)]
            url = "http://127.0.0.1:9/v1/chat/completions"
            await asyncio.gather(*(client.post(url, json=body) for body in bodies))

    asyncio.run(main())
    assert sorted(int(line["body"]["messages"][0]["content"]) for line in _lines(path)) == list(
        range(100)
    )


JSON_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=60, deadline=None)
@given(contents=st.lists(JSON_TEXT, min_size=1, max_size=4), indent=st.booleans())
def test_any_body_is_one_line_holding_the_same_json(tmp_path_factory, contents, indent):
    path = tmp_path_factory.mktemp("bodies") / "r.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": text} for text in contents]}
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2 if indent else 0)
    client = httpx2.Client(transport=Transport(path, httpx2.MockTransport(_echo_handler([]))))
    headers = {"content-type": "application/json"}
    client.post("http://127.0.0.1:9/v1/chat/completions", content=raw, headers=headers)
    data = path.read_bytes()
    assert data.count(b"\n") == 1
    assert orjson.loads(data)["body"] == body
    if not indent:  # a one-line body is kept byte for byte
        assert data.endswith(b',"body":' + raw + b"}\n")


def test_a_session_function_that_raises_never_fails_the_request(tmp_path, caplog):
    path = tmp_path / "r.jsonl"

    def broken(body):
        raise KeyError("conversation")

    transport = Transport(path, httpx2.MockTransport(_echo_handler([])), session_id=broken)
    client = httpx2.Client(transport=transport)
    body = {"messages": [{"role": "user", "content": "x"}]}
    with caplog.at_level(logging.ERROR, logger="pcache.record"):
        response = client.post("http://127.0.0.1:9/v1/chat/completions", json=body)
    assert response.status_code == 200 and not path.exists()
    assert "cannot record" in caplog.text


WHITESPACE = st.text(alphabet=" \t\r\n", max_size=3)
"""JSON's whitespace: any run of it may stand between two tokens."""


@st.composite
def _spaced_json(draw, value) -> bytes:
    """`value` as JSON text with arbitrary whitespace around every token, strings written
    either as UTF-8 or with \\u escapes."""
    import json

    def text(item) -> bytes:
        if isinstance(item, str):
            ascii_only = draw(st.booleans())
            return json.dumps(item, ensure_ascii=ascii_only).encode()
        if isinstance(item, dict):
            parts = [
                text(key) + draw(WHITESPACE).encode() + b":" + draw(WHITESPACE).encode() + text(v)
                for key, v in item.items()
            ]
        else:
            parts = [text(v) for v in item]
        separator = lambda: draw(WHITESPACE).encode()  # noqa: E731
        inner = b",".join(separator() + part + separator() for part in parts)
        brackets = b"{}" if isinstance(item, dict) else b"[]"
        return brackets[:1] + inner + separator() + brackets[1:]

    return draw(WHITESPACE).encode() + text(value) + draw(WHITESPACE).encode()


UNICODE_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), contents=st.lists(UNICODE_TEXT, min_size=1, max_size=3))
def test_the_recorder_reads_back_what_it_wrote_as_lint_reads_it(tmp_path_factory, data, contents):
    from pcache.prompt.reading.loading import iter_json_lines
    from pcache.record import Recorder

    path = tmp_path_factory.mktemp("spaced") / "r.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": text} for text in contents]}
    raw = data.draw(_spaced_json(body))
    recorder = Recorder(path)
    recorder.respond(chat_completion("ok"))
    headers = {"content-type": "application/json"}
    recorder.client().post("http://127.0.0.1:9/v1/chat/completions", content=raw, headers=headers)
    assert recorder.requests == [body]
    assert [value["body"] for _, value in iter_json_lines(path)] == [body]
    if b"\n" not in raw:  # kept byte for byte ("\r" included); else one line re-serialized
        assert path.read_bytes().endswith(b',"body":' + raw + b"}\n")
    assert path.read_bytes().count(b"\n") == 1
    recorder.close()


def test_a_body_with_a_bare_carriage_return_is_read_back_and_linted(tmp_path):
    import pcache
    from pcache.record import Recorder

    recorder = Recorder(tmp_path / "r.jsonl")
    recorder.respond(chat_completion("ok"))
    raw = b'{"model": "m",\r"messages": [{"role": "user",\r"content": "Where is P-42?"}]}'
    headers = {"content-type": "application/json"}
    recorder.client().post("http://127.0.0.1:9/v1/chat/completions", content=raw, headers=headers)
    assert recorder.requests == [orjson.loads(raw)]
    assert b"\r" in recorder.path.read_bytes()
    assert pcache.lint(recorder.path).summary.requests == 1
    assert pcache.lint(recorder.requests).summary.requests == 1
