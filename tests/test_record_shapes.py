"""Recording OpenAI Responses, Gemini (google-genai) and Bedrock Converse calls, then linting.

The SDKs are real; only the network under them is mocked (`MockTransport` with canned
responses, botocore's `Stubber`). Each agent puts the time in its system prompt (the planted
breaker, PC101), which lint must find in what the recorder wrote.
"""

from __future__ import annotations

import json

import httpx
import httpx2
import orjson
import pytest

from pcache.prompt.reading.held import requests_from
from pcache.record import Transport
from pcache.record.canned import CannedResponses
from tests.sdk_agents import ticking_clock
from tests.sdk_shape_agents import (
    gemini_agent,
    gemini_canned,
    responses_agent,
    responses_canned,
)


def _lines(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _lint(cli, path) -> dict:
    result = cli("lint", path, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _record_responses(path, clock=None) -> str:
    import openai

    canned = httpx2.MockTransport(CannedResponses(responses_canned()))
    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx2.Client(transport=Transport(path, canned))
    )
    return responses_agent(client, clock)


def test_responses_calls_are_recorded_with_their_response(tmp_path):
    path = tmp_path / "responses.jsonl"
    assert _record_responses(path) == "You're welcome!"
    lines = _lines(path)
    assert [line["url"] for line in lines] == ["https://api.openai.com/v1/responses"] * 3
    assert [line["response"]["id"] for line in lines] == ["resp_1", "resp_2", "resp_3"]
    assert lines[1]["body"]["previous_response_id"] == "resp_1"
    assert lines[1]["usage"]["input_tokens_details"]["cached_tokens"] == 256
    requests = requests_from(path)
    assert [r.cached_tokens for r in requests] == [0, 256, 384]
    grown = [len(r.messages) for r in requests]
    assert grown == [2, 4, 6]  # the chain rebuilt: instructions, then the whole conversation
    assert requests[2].messages[2]["tool_calls"][0]["function"]["name"] == "parcel_status"


def test_a_clock_in_the_instructions_is_found_across_the_chain(cli, tmp_path):
    steady, ticking = tmp_path / "steady.jsonl", tmp_path / "ticking.jsonl"
    _record_responses(steady)
    _record_responses(ticking, ticking_clock())
    assert [f["code"] for f in _lint(cli, steady)["findings"]] == []
    findings = _lint(cli, ticking)["findings"]
    assert {f["code"] for f in findings} == {"PC101"}
    assert {f["json_path"] for f in findings} == {"body.instructions"}


@pytest.mark.parametrize("http", [httpx, httpx2])
def test_gemini_calls_through_google_genai_are_recorded_and_linted(cli, tmp_path, http):
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    path = tmp_path / "gemini.jsonl"
    canned = http.MockTransport(CannedResponses(gemini_canned()))
    client = genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(httpx_client=http.Client(transport=Transport(path, canned))),
    )
    gemini_agent(client, ticking_clock())
    lines = _lines(path)
    assert len(lines) == 3 and all(":generateContent" in line["url"] for line in lines)
    assert "key=" not in path.read_text()
    requests = requests_from(path)
    assert {r.model for r in requests} == {"gemini-2.5-flash"}
    assert [r.cached_tokens for r in requests] == [0, 256, 384]
    assert [r.output_length for r in requests] == [9, 9, 9]
    findings = _lint(cli, path)["findings"]
    assert {f["code"] for f in findings} == {"PC101"}
    assert {f["json_path"] for f in findings} == {"body.systemInstruction.parts[0].text"}


def test_embeddings_are_still_not_recorded(tmp_path):
    path = tmp_path / "r.jsonl"
    echo = httpx2.MockTransport(lambda request: httpx2.Response(200, json={}))
    client = httpx2.Client(transport=Transport(path, echo))
    client.post("http://127.0.0.1:9/v1/embeddings", json={"model": "e", "input": "x"})
    client.post("http://127.0.0.1:9/v1/responses", json={"model": "m", "input": "x"})
    assert [line["url"] for line in _lines(path)] == ["http://127.0.0.1:9/v1/responses"]


def test_bedrock_converse_is_recorded_through_botocore_hooks(cli, tmp_path):
    boto3 = pytest.importorskip("boto3")
    stub_module = pytest.importorskip("botocore.stub")
    from pcache.record.bedrock import BedrockRecorder

    path = tmp_path / "bedrock.jsonl"
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="AKIATEST",
        aws_secret_access_key="not-a-secret",
    )
    recorder = BedrockRecorder(path, session_id="s1")
    recorder.attach(client)
    stubber = stub_module.Stubber(client)
    clock = ticking_clock()
    calls = []
    for number in range(2):
        params = {
            "modelId": "anthropic.claude-3-7-sonnet-20250219-v1:0",
            "system": [
                {"text": f"You help with parcels. Current time: {clock()}."},
                {"cachePoint": {"type": "default"}},
            ],
            "messages": [
                {"role": "user", "content": [{"text": "Where is P-42?"}]},
                {
                    "role": "user",
                    "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}],
                },
            ][: number + 1],
        }
        usage = {"inputTokens": 40, "outputTokens": 3, "totalTokens": 43}
        usage["cacheReadInputTokens"] = 16 * number
        response = {
            "output": {"message": {"role": "assistant", "content": [{"text": "On its way."}]}},
            "stopReason": "end_turn",
            "usage": usage,
            "metrics": {"latencyMs": 5},
        }
        stubber.add_response("converse", response, params)
        calls.append(params)
    with stubber:
        for params in calls:
            client.converse(**params)
    recorder.close()
    lines = _lines(path)
    assert [line["session_id"] for line in lines] == ["s1", "s1"]
    assert lines[0]["url"].endswith("/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse")
    assert "AKIATEST" not in path.read_text() and "not-a-secret" not in path.read_text()
    requests = requests_from(path)
    assert [r.cached_tokens for r in requests] == [0, 16]
    assert [r.output_length for r in requests] == [3, 3]
    assert requests[0].breakpoints == ["system[1]"]
    findings = _lint(cli, path)["findings"]
    # the clock, and the checkpoint after it written anew (as with cache_control): PC105
    assert {f["code"] for f in findings} == {"PC101", "PC105"}
