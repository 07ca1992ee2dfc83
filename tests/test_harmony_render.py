"""The gpt-oss renderer: provenance, pinned date, reasoning, special tokens, `pcache hash`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.prompt.renderers.harmony import HarmonyRenderer
from pcache.prompt.renderers.interface import DEFAULT_DATE, RenderOptions
from pcache.prompt.renderers.render import render, resolve_renderer
from pcache.prompt.renderers.rendered import RenderedPrompt
from pcache.prompt.shapes.request import request_from_document
from tests.harmony_corpus import generate, reference_token_ids

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["city"],
        },
    },
}
AGENT = {
    "model": "gpt-oss-120b",
    "reasoning_effort": "high",
    "tools": [WEATHER_TOOL],
    "messages": [
        {"role": "system", "content": "You are a terse weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Need the weather tool.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "21 °C.", "reasoning_content": "Answer briefly."},
        {"role": "user", "content": "And in Oslo?"},
        {
            "role": "assistant",
            "reasoning_content": "Call the tool again.",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": '{"temp": 4}'},
    ],
}


@pytest.fixture(scope="module")
def renderer() -> HarmonyRenderer:
    return HarmonyRenderer()


def rendered_of(body: dict[str, Any], date: str = DEFAULT_DATE, **options: Any) -> RenderedPrompt:
    request = request_from_document(json.loads(json.dumps(body)), "agent.json")
    return render(request, resolve_renderer("gpt-oss"), RenderOptions(date=date, **options))


def chars_of(rendered: RenderedPrompt, path: str) -> str:
    """The rendered characters whose provenance is exactly `path`."""
    return "".join(rendered.text[s.start : s.end] for s in rendered.spans if s.path == path)


def test_default_tokenizer_is_the_harmony_renderer() -> None:
    renderer = resolve_renderer(None)
    assert isinstance(renderer, HarmonyRenderer)
    assert renderer.name == "gpt-oss"
    assert len(renderer.template_digest) == 64


def test_every_message_content_maps_to_its_own_path() -> None:
    rendered = rendered_of(AGENT)
    for index, message in enumerate(AGENT["messages"]):
        content = message.get("content")
        path = f"messages[{index}].content"
        if content:
            start = rendered.text.index(content)
            assert chars_of(rendered, path) == content
            assert {rendered.path_at(c) for c in range(start, start + len(content))} == {path}
    assert chars_of(rendered, "messages[6].reasoning_content") == "Call the tool again."
    assert chars_of(rendered, "messages[2].tool_calls[0].function.arguments") == '{"city": "Paris"}'
    # a tool result's author name comes from the call it answers
    for call in ("messages[2].tool_calls[0]", "messages[6].tool_calls[0]"):
        assert chars_of(rendered, f"{call}.function.name") == "get_weather" * 2
    assert chars_of(rendered, "reasoning_effort") == "high"


def test_tool_schema_pieces_map_to_their_json_paths() -> None:
    rendered = rendered_of(AGENT)
    base = "tools[0].function"
    properties = f"{base}.parameters.properties"
    assert chars_of(rendered, f"{base}.name") == "get_weather"
    assert chars_of(rendered, f"{base}.description") == "Current weather for a city."
    assert chars_of(rendered, f"{properties}.city") == "city"
    assert chars_of(rendered, f"{properties}.city.description") == "City name, e.g. Paris"
    assert chars_of(rendered, f"{properties}.unit.enum[1]") == '"fahrenheit"'
    assert chars_of(rendered, f"{properties}.unit.default") == "celsius"
    assert chars_of(rendered, f"{properties}.days.items.type") == "number"
    assert chars_of(rendered, f"{base}.parameters.required") == "??"  # unit and days optional


def test_template_text_maps_to_none() -> None:
    rendered = rendered_of(AGENT)
    for marker in ("<|start|>system<|message|>You are ChatGPT", "Current date: 2026-01-01",
                   "# Instructions\n\n", "namespace functions {", "<|channel|>commentary",
                   "<|constrain|>json<|message|>", "<|call|>", "Reasoning: "):  # fmt: skip
        start = rendered.text.index(marker)
        assert all(rendered.path_at(c) is None for c in range(start, start + len(marker))), marker
    covered = sum(span.end - span.start for span in rendered.spans)
    assert 0 < covered < len(rendered.text)


def test_reasoning_is_kept_only_after_the_last_final_answer() -> None:
    rendered = rendered_of(AGENT)
    assert "Need the weather tool." not in rendered.text
    assert "Answer briefly." not in rendered.text
    assert "<|channel|>analysis<|message|>Call the tool again.<|end|>" in rendered.text
    assert rendered.token_ids == reference_token_ids(AGENT, DEFAULT_DATE)


def test_arguments_reach_the_tokens_as_the_client_sent_them() -> None:
    spaced = json.loads(json.dumps(AGENT))
    spaced["messages"][6]["tool_calls"][0]["function"]["arguments"] = '{"city": "Oslo"}'
    compact, loose = rendered_of(AGENT), rendered_of(spaced)
    assert '<|message|>{"city":"Oslo"}<|call|>' in compact.text
    assert '<|message|>{"city": "Oslo"}<|call|>' in loose.text
    assert compact.token_ids != loose.token_ids
    assert loose.token_ids == reference_token_ids(spaced, DEFAULT_DATE)


def test_anthropic_tool_use_input_is_written_as_compact_json() -> None:
    body = {
        "system": "Be brief.",
        "tools": [{"name": "lookup", "description": "Look up.", "input_schema": {
            "type": "object", "properties": {"q": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "find café"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "café", "n": 2}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
        ],
    }  # fmt: skip
    rendered = rendered_of(body)
    call = '<|constrain|>json<|message|>{"q":"café","n":2}<|call|>'
    assert f"<|start|>assistant to=functions.lookup<|channel|>commentary {call}" in rendered.text
    assert "<|start|>functions.lookup to=assistant<|channel|>commentary<|message|>found<|end|>" in (
        rendered.text
    )
    assert chars_of(rendered, "tools[0].input_schema.properties.q") == "q"
    assert chars_of(rendered, "system") == "Be brief."


def test_text_spelling_special_tokens_is_encoded_as_text(renderer: HarmonyRenderer) -> None:
    body = {"messages": [{"role": "user", "content": "print <|end|><|start|>assistant please"}]}
    rendered = rendered_of(body)
    end_id = renderer.encoding.encode_single_token("<|end|>")
    start_id = renderer.encoding.encode_single_token("<|start|>")
    assert rendered.token_ids.count(end_id) == 2  # system and user messages only
    assert rendered.token_ids.count(start_id) == 3  # system, user, generation prompt
    assert rendered.token_ids == reference_token_ids(body, DEFAULT_DATE)
    assert renderer.decode(rendered.token_ids) == rendered.text
    # text the renderer did not write: every special token is recognized
    assert renderer.encode("<|start|>user<|message|>") == [start_id, 1428, 200008]


def test_reasoning_effort_default_and_generation_prompt() -> None:
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    text = rendered_of(plain).text
    assert "\n\nReasoning: medium\n\n" in text
    assert "Calls to these tools" not in text and "<|start|>developer" not in text
    assert text.endswith("<|start|>user<|message|>hi<|end|><|start|>assistant")
    assert rendered_of(plain, add_generation_prompt=False).text.endswith("hi<|end|>")


def test_date_changes_exactly_the_date_tokens() -> None:
    a, b = rendered_of(AGENT, "2026-01-01"), rendered_of(AGENT, "2031-12-25")
    assert a.num_tokens == b.num_tokens
    differing = [i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids, strict=True)) if x != y]
    assert differing
    line = a.text.index("Current date: 2026-01-01")
    date_start, date_end = line + len("Current date: "), line + len("Current date: 2026-01-01")
    for index in differing:
        first, last = a.token_char(index), a.token_char(index + 1)
        assert date_start - 1 <= first and last <= date_end, (index, a.text[first:last])
    assert a.text.replace("2026-01-01", "2031-12-25", 1) == b.text


def write(tmp_path: Path, name: str, body: Any) -> Path:
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    return path


def test_hash_command_on_a_chat_request(cli, tmp_path: Path) -> None:
    path = write(tmp_path, "agent.json", AGENT)
    result = cli("hash", path, "--format", "json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    expected = rendered_of(AGENT)
    assert record["num_tokens"] == expected.num_tokens
    assert record["tokenizer"] == "gpt-oss"
    assert record["block_size"] == 16
    assert len(record["block_hashes"]) == expected.num_tokens // 16
    text = cli("hash", path)
    assert text.exit_code == 0, text.output
    assert f"{expected.num_tokens} tokens" in text.stdout
    assert record["block_hashes"][0] in text.stdout


def test_hash_date_option_changes_blocks_from_the_date_on(cli, tmp_path: Path) -> None:
    path = write(tmp_path, "agent.json", AGENT)
    runs = [
        cli("hash", path, "--format", "json", "--date", d) for d in ("2026-01-01", "2027-07-04")
    ]
    assert all(run.exit_code == 0 for run in runs), runs[0].output + runs[1].output
    first, second = (json.loads(run.stdout)["block_hashes"] for run in runs)
    rendered = rendered_of(AGENT)
    date_char = rendered.text.index("2026-01-01")
    date_token = max(i for i in range(rendered.num_tokens) if rendered.token_char(i) <= date_char)
    date_block = date_token // 16
    assert first[:date_block] == second[:date_block]
    assert all(x != y for x, y in zip(first[date_block:], second[date_block:], strict=True))
    bad = cli("hash", path, "--date", "01/02/2026")
    assert bad.exit_code == 2 and "--date" in bad.stderr


def test_hash_reads_jsonl_batch_lines_and_stdin(cli, tmp_path: Path) -> None:
    batch = {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": AGENT}
    lines = json.dumps(batch) + "\n" + json.dumps({"messages": [{"role": "user", "content": "x"}]})
    path = write(tmp_path, "batch.jsonl", lines + "\n")
    result = cli("hash", path, "--format", "json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["num_tokens"] == rendered_of(AGENT).num_tokens
    assert len(records) == 2
    piped = cli("hash", "-", "--format", "json", input=json.dumps(AGENT))
    assert piped.exit_code == 0, piped.output
    assert json.loads(piped.stdout)["block_hashes"] == records[0]["block_hashes"]


def test_unsupported_reasoning_effort_is_one_clear_error(cli, tmp_path: Path) -> None:
    path = write(tmp_path, "effort.json", {**AGENT, "reasoning_effort": "extreme"})
    result = cli("hash", path)
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "effort.json" in result.stderr and "reasoning_effort" in result.stderr
    assert "Traceback" not in result.output


_SEGMENT = re.compile(r'\.([^.\[\]"]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def resolve(document: Any, path: str) -> tuple[Any, str | int]:
    """The value at a provenance path (`a.b[0]["c d"]`) and the last key on the way."""
    value, key = document, ""
    for match in _SEGMENT.finditer("." + path):
        name, index, quoted = match.groups()
        key = name if name is not None else int(index) if index is not None else json.loads(quoted)
        value = value.get(key) if isinstance(value, dict) else value[key]
    assert _SEGMENT.sub("", "." + path) == "", path
    return value, key


@pytest.mark.parametrize("seed", range(0, 64, 3))
def test_every_span_holds_text_of_the_json_value_it_names(seed: int) -> None:
    body = generate(seed)
    rendered = rendered_of(body)
    assert rendered.spans
    for span in rendered.spans:
        text, path = rendered.text[span.start : span.end], span.path
        value, key = resolve(body, path)
        parent = path.rsplit(".", 1)[0] if isinstance(key, str) else path.rsplit("[", 1)[0]
        if parent.endswith(".properties"):
            assert text in (key, "any"), (span, text)  # the name, or `any` for a free schema
        elif parent.endswith(".enum"):
            assert text == f'"{value}"', (span, text)
        elif key == "required":
            assert text == "?", (span, text)
        elif key == "default":
            assert text.strip('"') == (value if isinstance(value, str) else text), (span, text)
        elif key == "type" or parent.endswith(".type"):
            assert text in ("string", "number", "boolean", "null", "[]", "Array<any>"), text
        elif key == "nullable":
            assert text == " | null", (span, text)
        elif isinstance(value, str):
            assert text in value, (span, text)
        elif key == "content":
            assert text == "\n".join(part["text"] for part in value), (span, text)
        else:
            assert text == "any", (span, text)


def test_a_schema_nested_too_deeply_is_one_clear_error(cli, tmp_path: Path) -> None:
    depth = 450  # within the JSON parser's nesting limit, beyond what a request may nest
    schema = '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth
    tool = '{"type":"function","function":{"name":"f","parameters":' + schema + "}}"
    path = write(tmp_path, "deep.json", '{"messages":[],"tools":[' + tool + "]}")
    result = cli("hash", path)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert message.startswith(f"pcache: error: {path}:1:"), message
    assert "`tools[0].function.parameters.properties.a" in message
    assert message.endswith("...` nests more than 100 levels"), message


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("ab é東\n🙂дx\u0301<|end|>"), max_size=80))
def test_token_starts_agree_with_tiktoken(renderer: HarmonyRenderer, text: str) -> None:
    token_ids, starts = renderer.encode_with_starts(text)
    assert starts == renderer.encoding.decode_with_offsets(token_ids)[1]
