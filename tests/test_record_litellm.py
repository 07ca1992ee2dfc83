"""The LiteLLM callback records what LiteLLM sends, in the file format the transports write."""

from __future__ import annotations

import asyncio
import os
import time

import httpx2
import openai
import orjson
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of prices
litellm = pytest.importorskip("litellm")

from pcache.record.canned import CannedResponses, chat_completion  # noqa: E402
from pcache.record.litellm_logger import LiteLLMRecorder  # noqa: E402

SYSTEM = "You answer questions about parcels. Be brief. " * 10
USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 3,
    "total_tokens": 43,
    "prompt_tokens_details": {"cached_tokens": 32},
}


CALLBACK_LISTS = (
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "input_callback",
    "_async_input_callback",
)


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    """A recorder as LiteLLM's only callback (LiteLLM keeps derived lists: reset them too)."""
    recorder = LiteLLMRecorder(tmp_path / "litellm.jsonl")
    for name in CALLBACK_LISTS:
        monkeypatch.setattr(litellm, name, [])
    monkeypatch.setattr(litellm, "callbacks", [recorder])
    return recorder


def _client(sent: list[bytes], replies: int, asynchronous: bool = False):
    canned = CannedResponses([chat_completion("Out for delivery.", usage=USAGE)] * replies)

    def handle(request):
        sent.append(request.content)
        return canned(request)

    transport = httpx2.MockTransport(handle)
    if asynchronous:
        return openai.AsyncOpenAI(
            api_key="sk-x", http_client=httpx2.AsyncClient(transport=transport)
        )
    return openai.OpenAI(api_key="sk-x", http_client=httpx2.Client(transport=transport))


def _conversation() -> list[list[dict]]:
    first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is P-42?"}]
    second = [*first, {"role": "assistant", "content": "Out for delivery."}]
    return [first, [*second, {"role": "user", "content": "Thanks"}]]


def _count(path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _wait_for_lines(path, count: int) -> list[dict]:
    """LiteLLM runs sync success callbacks on a worker thread; wait (bounded) for them."""
    for _ in range(250):
        if _count(path) >= count:
            break
        time.sleep(0.02)
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_each_call_is_one_line_with_the_body_sent_and_its_usage(recorder, cli):
    sent: list[bytes] = []
    client = _client(sent, replies=2)
    for messages in _conversation():
        litellm.completion(
            model="openai/gpt-4o-mini",
            messages=messages,
            client=client,
            api_key="sk-x",
            metadata={"session_id": "conversation-1"},
        )
    lines = _wait_for_lines(recorder.writer.path, 2)
    assert [line["body"] for line in lines] == [orjson.loads(body) for body in sent]
    assert {line["session_id"] for line in lines} == {"conversation-1"}
    assert lines[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    assert lines[0]["output_length"] == 3
    assert b"sk-x" not in recorder.writer.path.read_bytes()
    result = cli("lint", recorder.writer.path)
    assert result.exit_code == 0, result.output
    assert "All checks passed (2 requests in 1 file)" in result.output


def test_async_calls_are_recorded(recorder):
    sent: list[bytes] = []
    client = _client(sent, replies=2, asynchronous=True)

    async def main():
        for messages in _conversation():
            await litellm.acompletion(
                model="openai/gpt-4o-mini", messages=messages, client=client, api_key="sk-x"
            )
        for _ in range(250):  # async success callbacks run as tasks after the call
            if _count(recorder.writer.path) >= 2:
                break
            await asyncio.sleep(0.02)

    asyncio.run(main())
    lines = _wait_for_lines(recorder.writer.path, 2)
    assert [line["body"] for line in lines] == [orjson.loads(body) for body in sent]
