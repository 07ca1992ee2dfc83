"""`replay --endpoint` of Responses, Gemini and Bedrock logs to a chat endpoint: each sends its
normalized messages and tools, and the server sees the prompt of the Chat Completions log of
the same conversation (a real `pcache serve --model tiny` on a loopback port)."""

from __future__ import annotations

import orjson
import pytest

pytest.importorskip("torch")
pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from pcache.prompt.reading.loading import iter_documents
from pcache.prompt.shapes.request import request_of
from pcache.replayer.endpoint.requests import chat_fields
from tests.conftest import ROOT
from tests.serve_helpers import serve_process

SHAPES = ROOT / "tests" / "data" / "shapes"


def _requests(name: str):
    return [request_of(document) for document in iter_documents(SHAPES / name)]


@pytest.mark.parametrize("name", ["responses.jsonl", "gemini.jsonl", "bedrock.jsonl"])
def test_other_shapes_send_the_chat_fields_of_the_same_conversation(name):
    chat = [chat_fields(request) for request in _requests("chat.jsonl")]
    other = [chat_fields(request) for request in _requests(name)]
    assert [len(fields["messages"]) for fields in other] == [len(f["messages"]) for f in chat]
    for fields, expected in zip(other, chat, strict=True):
        assert fields["tools"] == expected["tools"]
        for message in fields["messages"]:
            assert message["role"] in ("system", "user", "assistant", "tool")
            for call in message.get("tool_calls", []):
                assert isinstance(call["function"]["arguments"], str)  # JSON text, as sent


def _replay(cli, url, name):
    result = cli(
        "replay", SHAPES / name, "--endpoint", f"{url}/v1", "--reset-cache",
        "--max-concurrency", "1", "--time-scale", "0", "--max-output-tokens", "2",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_a_responses_log_replays_against_pcache_serve_as_its_chat_log(cli):
    with serve_process("--model", "tiny", "--max-num-batched-tokens", "64") as url:
        chat = _replay(cli, url, "chat.jsonl")
        responses = _replay(cli, url, "responses.jsonl")
    assert responses["backend"] == "openai-chat"
    assert responses["completed"] == responses["num_prompts"] == 5
    assert responses["input_lens"] == chat["input_lens"]  # the server saw the same prompts
    assert responses["prompt_tokens_mismatch"] is None, responses["notes"]
    assert responses["cached_tokens"] == responses["predicted_cached_tokens"]
    assert sum(responses["cached_tokens"]) > 0
