"""Request shapes: detection, normalization and the paths back into the user's JSON."""

from __future__ import annotations

import json

import pytest

from pcache.errors import InputError
from pcache.pipeline import iter_requests
from pcache.prompt.renderers.plain import PlainRenderer
from pcache.prompt.renderers.render import render
from pcache.prompt.shapes.request import request_from_document


def test_openai_body_with_tool_calls_and_parts():
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"b": 1, "a": 2}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    }
    request = request_from_document(body, "x.json")
    assert request.kind == "openai"
    assert request.model == "m"
    assert request.messages[0]["content"] == "be brief"
    assert request.source_path("messages[0].content") == "messages[0].content[0].text"
    arguments = request.messages[2]["tool_calls"][0]["function"]["arguments"]
    assert arguments == {"b": 1, "a": 2} and list(arguments) == ["b", "a"]
    assert "content" not in request.messages[2]
    assert request.messages[3]["tool_call_id"] == "c1"


def test_batch_line_paths_are_prefixed():
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hello"}]},
    }
    request = request_from_document(line, "batch.jsonl", 3)
    assert request.label == "batch.jsonl:3"
    assert request.source_path("messages[0].content") == "body.messages[0].content"
    rendered = render(request, PlainRenderer("o200k_base"))
    start = rendered.text.index("hello")
    assert rendered.path_at(start) == "body.messages[0].content"


def test_anthropic_body_is_normalized_with_source_paths():
    body = {
        "model": "claude-sonnet-4-5",
        "system": [
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "w",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "look it up", "signature": "s"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"c": "P"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
    request = request_from_document(body, "a.json")
    assert request.kind == "anthropic"
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert request.messages[2]["reasoning_content"] == "look it up"
    assert request.messages[2]["tool_calls"][0]["function"]["arguments"] == {"c": "P"}
    assert request.messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert request.source_path("messages[0].content") == "system[0].text"
    assert request.source_path("messages[4].content") == "messages[2].content[1].text"
    assert request.source_path("tools[0].function.parameters.type") == "tools[0].input_schema.type"
    assert request.breakpoints == ["system[0]", "messages[2].content[1]"]


def test_raw_prompt_and_token_ids():
    prompt = request_from_document({"prompt": "abc"}, "p.json")
    assert prompt.kind == "prompt"
    rendered = render(prompt, PlainRenderer("cl100k_base"))
    assert rendered.text == "abc" and rendered.path_at(0) == "prompt"
    ids = request_from_document({"token_ids": [5, 6, 7]}, "t.json")
    rendered = render(ids, PlainRenderer("cl100k_base"))
    assert rendered.token_ids == [5, 6, 7] and rendered.token_path(1) == "token_ids[1]"


def test_sidecar_fields():
    line = {
        "timestamp": "2026-03-14T09:21:07Z",
        "session_id": 42,
        "output_length": 7,
        "usage": {"prompt_tokens": 3},
        "messages": [{"role": "user", "content": "x"}],
    }
    request = request_from_document(line, "t.jsonl", 1)
    assert request.session_id == "42"
    assert request.output_length == 7
    assert request.timestamp == pytest.approx(1773480067000.0)
    meta = request_from_document(
        {"metadata": {"session_id": "s"}, "messages": [{"role": "user", "content": "x"}]}, "m"
    )
    assert meta.session_id == "s"


def test_jsonl_streams_every_line(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps({"prompt": str(i)}) for i in range(5)) + "\n\n")
    assert [r.prompt for r in iter_requests(log)] == ["0", "1", "2", "3", "4"]
    assert [r.line for r in iter_requests(log)] == [1, 2, 3, 4, 5]


def test_jsonl_content_in_a_json_file(tmp_path):
    log = tmp_path / "log.json"
    log.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    assert [r.prompt for r in iter_requests(log)] == ["a", "b"]


def test_unknown_shape_error_lists_keys():
    with pytest.raises(InputError, match="found keys: query, top_k"):
        request_from_document({"query": "x", "top_k": 3}, "r.json")


def test_plain_renderer_provenance_covers_every_content_char():
    body = {
        "messages": [
            {"role": "system", "content": "sys ✓"},
            {"role": "user", "content": "héllo\nworld"},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    request = request_from_document(body, "r.json")
    rendered = render(request, PlainRenderer("o200k_base"))
    for index, message in enumerate(body["messages"]):
        start = rendered.text.index(message["content"])
        for char in range(start, start + len(message["content"])):
            assert rendered.path_at(char) == f"messages[{index}].content"
    assert rendered.path_at(rendered.text.index('"name"')) == "tools[0]"
    assert rendered.path_at(0) is None
    assert rendered.token_starts == sorted(rendered.token_starts)
