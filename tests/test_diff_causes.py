"""Cause classification on request pairs that break caching the way real applications do."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import SAMPLES

RENDERERS = ["gpt-oss", "o200k_base"]


@pytest.fixture
def base():
    return json.loads((SAMPLES / "a.json").read_text())


def run_diff(cli, tmp_path, left, right, tokenizer):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(left))
    b.write_text(json.dumps(right))
    result = cli("diff", a, b, "--format", "json", "-t", tokenizer)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_tool_order(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    other["tools"] = list(reversed(other["tools"]))
    cause = run_diff(cli, tmp_path, base, other, tokenizer)["cause"]
    assert cause["kind"] == "tool_order"
    assert cause["a_path"].startswith("tools[")


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_tool_set(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    del other["tools"][1]
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "tool_set"
    assert "search_products" in data["cause"]["detail"]


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_schema_key_order(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    parameters = other["tools"][1]["function"]["parameters"]
    parameters["properties"] = dict(reversed(list(parameters["properties"].items())))
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "key_order"
    assert data["cause"]["a_path"].startswith("tools[1]")


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_tool_definition_drift(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    other["tools"][2]["function"]["description"] = "Hand over to a human (3 agents online)."
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "tool_definition"
    assert "open_ticket" in data["cause"]["detail"]


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_whitespace_drift(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    other["messages"][1]["content"] = other["messages"][1]["content"].replace(" ", "  ", 1)
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "whitespace"
    assert data["cause"]["a_path"] == "messages[1].content"


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_random_id(cli, tmp_path, base, tokenizer):
    left, right = copy.deepcopy(base), copy.deepcopy(base)
    left["messages"][0]["content"] += "\nRequest id: 3f2b8c1e-9d4a-4f6b-8e2a-1c5d7e9f0a1b"
    right["messages"][0]["content"] += "\nRequest id: 7a9e0d4c-2b1f-4e8a-9c3d-5f6a7b8c9d0e"
    data = run_diff(cli, tmp_path, left, right, tokenizer)
    assert data["cause"]["kind"] == "random_id"


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_sliding_window(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    del other["messages"][1:3]
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "history_truncated"


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_history_edit(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    other["messages"][1]["content"] = "Hello. My order has not arrived. Order 48213."
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "history_edit"


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_reserialized_arguments(cli, tmp_path, base, tokenizer):
    left, right = copy.deepcopy(base), copy.deepcopy(base)
    call = {"order_id": "48213", "fields": ["status", "eta"]}
    left["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(call)
    right["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        dict(reversed(list(call.items())))
    )
    data = run_diff(cli, tmp_path, left, right, tokenizer)
    assert data["cause"]["kind"] == "arguments_reserialized"
    assert data["cause"]["rule"]["code"] == "PC202"
    assert "arguments" in (data["cause"]["a_path"] or "")


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_append_only_is_not_a_break(cli, tmp_path, base, tokenizer):
    other = copy.deepcopy(base)
    other["messages"].append({"role": "assistant", "content": "Sure, which size?"})
    other["messages"].append({"role": "user", "content": "Regular, please."})
    data = run_diff(cli, tmp_path, base, other, tokenizer)
    assert data["cause"]["kind"] == "append"
    assert data["first_divergence_token"] == data["num_tokens"][0]
    assert data["reusable_tokens"]["sglang"] == data["num_tokens"][0]


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_identical(cli, tmp_path, base, tokenizer):
    data = run_diff(cli, tmp_path, base, copy.deepcopy(base), tokenizer)
    assert data["identical"] and data["cause"]["kind"] == "identical"


@pytest.mark.parametrize("tokenizer", RENDERERS)
def test_arguments_respaced_are_reserialized_arguments(cli, tmp_path, base, tokenizer):
    left, right = copy.deepcopy(base), copy.deepcopy(base)
    call = {"order_id": "48213", "fields": ["status", "eta"]}
    left["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(call)
    right["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        call, separators=(",", ":")
    )
    data = run_diff(cli, tmp_path, left, right, tokenizer)
    if tokenizer == "o200k_base":  # the plain layout re-dumps parsed arguments
        assert data["identical"]
    else:  # harmony replays the client's argument string, spacing included
        assert data["cause"]["kind"] == "arguments_reserialized"
