"""Source paths into a request body (`pcache.rules.slots`) and PC202 on wrapped bodies."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pcache.pipeline import Settings
from pcache.prompt.shapes.request import request_from_document
from pcache.rules.runner import LintOptions, lint_values
from pcache.rules.selection import Selection
from pcache.rules.slots import raw_message, raw_messages, resolve

BODY = {
    "messages": [
        {"role": "user", "content": "w"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
    ],
    "0": {"1": "digits as keys"},
}


def test_resolve_walks_keys_and_indexes():
    assert resolve(BODY, "messages[0].content") == "w"
    assert resolve(BODY, "messages[1].tool_calls[0].function.name") == "f"
    assert resolve(BODY, "0.1") == "digits as keys"
    assert resolve(BODY, "messages[2]") is None
    assert resolve(BODY, "messages.content") is None
    assert resolve(BODY, "messages[0].content[0]") is None


@given(st.lists(st.integers(0, 3), max_size=4))
def test_resolve_of_indexes_is_item_access(indexes):
    nested = [[[["a", "b"], "c"], "d", "e"], "f"]
    path = "x" + "".join(f"[{index}]" for index in indexes)
    expected = nested
    for index in indexes:
        if not isinstance(expected, list) or index >= len(expected):
            expected = None
            break
        expected = expected[index]
    assert resolve({"x": nested}, path) == expected


def test_raw_messages_only_where_each_message_is_the_bodys_own():
    chat = request_from_document(BODY, "log.jsonl", 1)
    assert raw_messages(chat) is BODY["messages"]
    assert [raw_message(chat, i) for i in range(2)] == BODY["messages"]
    anthropic = {
        "model": "claude-sonnet-4-5",
        "system": "s",
        "messages": [{"role": "user", "content": "w"}],
    }
    request = request_from_document(anthropic, "log.jsonl", 1)
    assert len(request.messages) == 2  # the system prompt is a message of its own
    assert raw_messages(request) is None


def _pc202(lines: list[dict]) -> list[str]:
    options = LintOptions(
        settings=Settings(tokenizer="o200k_base", profile="openai"),
        selection=Selection(("PC202",)),
    )
    report = lint_values(lines, options, source="log.jsonl")
    return [finding.json_path for finding in report.diagnostics if finding.code == "PC202"]


def _turns(arguments: str) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": arguments}}
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
    ]


def test_pc202_in_recorder_lines_and_history_sent_again():
    first = _turns(json.dumps({"unit": "c", "city": "Oslo"}, separators=(",", ":")))
    again = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "t"}]
    redumped = _turns(json.dumps({"city": "Oslo", "unit": "c"}))
    redumped += again[3:]
    lines = [
        {"session_id": "s1", "body": {"model": "gpt-5", "messages": first}},
        {"session_id": "s1", "body": {"model": "gpt-5", "messages": again}},
        {"session_id": "s2", "body": {"model": "gpt-5", "messages": first}},
        {"session_id": "s2", "body": {"model": "gpt-5", "messages": redumped}},
    ]
    assert _pc202(lines) == ["body.messages[1].tool_calls[0]"]
