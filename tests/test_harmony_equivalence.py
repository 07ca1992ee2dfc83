"""pcache's own gpt-oss renderer equals OpenAI's `openai-harmony`, token for token."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.prompt.renderers.harmony import HarmonyRenderer
from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.renderers.render import render
from pcache.prompt.shapes.request import request_from_document
from tests.harmony_corpus import generate, harmony_encoding, random_date, reference_token_ids

CORPUS_SIZE = 64


@pytest.fixture(scope="module")
def renderer() -> HarmonyRenderer:
    return HarmonyRenderer()


def first_difference(renderer: HarmonyRenderer, got: list[int], want: list[int]) -> str:
    index = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    index = min(len(got), len(want)) if index is None else index
    context = renderer.decode(want[max(0, index - 20) : index])
    return (
        f"token {index} of {len(got)} vs {len(want)} after {context!r}: "
        f"pcache {renderer.decode(got[index : index + 12])!r}"
        f" != harmony {renderer.decode(want[index : index + 12])!r}"
    )


@pytest.mark.parametrize("seed", range(CORPUS_SIZE))
def test_generated_request_matches_openai_harmony(seed: int, renderer: HarmonyRenderer) -> None:
    body, date = generate(seed), random_date(seed)
    request = request_from_document(json.loads(json.dumps(body)), f"corpus-{seed}.json")
    got = render(request, renderer, RenderOptions(date=date)).token_ids
    want = reference_token_ids(body, date)
    assert got == want, first_difference(renderer, got, want)


def test_corpus_exercises_the_whole_format(renderer: HarmonyRenderer) -> None:
    """The generated corpus really contains what the equivalence test claims to cover."""
    seen: dict[str, int] = dict.fromkeys(
        ("tools", "nested", "array", "enum", "optional", "oneOf", "default", "description",
         "tool_call", "tool_result", "analysis", "multi_turn", "system", "developer",
         "mid_developer", "unicode", "lookalike", "effort", "parts", "no_tools"),
        0,
    )  # fmt: skip
    dates = set()
    for seed in range(CORPUS_SIZE):
        body = generate(seed)
        dates.add(random_date(seed))
        text = json.dumps(body, ensure_ascii=False)
        rendered = render(request_from_document(body, "c.json"), renderer).text
        roles = [message["role"] for message in body["messages"]]
        checks = {
            "tools": "tools" in body,
            "no_tools": "tools" not in body,
            "nested": '"type": "object", "properties": {"' in text.split('"parameters"', 1)[-1],
            "array": '"items"' in text,
            "enum": '"enum"' in text,
            "optional": "?: " in rendered,
            "oneOf": '"oneOf"' in text,
            "default": "// default: " in rendered,
            "description": '"description"' in text,
            "tool_call": "<|call|>" in rendered,
            "tool_result": " to=assistant<|channel|>commentary" in rendered,
            "analysis": "<|channel|>analysis" in rendered,
            "multi_turn": roles.count("user") >= 2,
            "system": roles[0] == "system",
            "developer": roles[0] == "developer",
            "mid_developer": "developer" in roles[1:],
            "unicode": any(ord(char) > 0x2000 for char in text),
            "lookalike": "<|end|> " in text or "<|start|> " in text,
            "effort": "reasoning_effort" in body,
            "parts": '"type": "text"' in text,
        }
        for name, present in checks.items():
            seen[name] += bool(present)
    assert all(count >= 3 for count in seen.values()), seen
    assert len(dates) >= CORPUS_SIZE // 2


# -- tool schemas: any JSON Schema-like object renders as the reference does -------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False,
    allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
_type = st.sampled_from(
    ["string", "number", "integer", "boolean", "null", "object", "array", "other"]
) | st.lists(st.sampled_from(["string", "integer", "null", "object"]), max_size=3)


def _schema(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": _type,
            "description": _text,
            "title": _text,
            "enum": st.lists(_text | st.integers(0, 3), max_size=3),
            "default": _json,
            "nullable": st.booleans(),
            "examples": st.lists(_text | st.integers(0, 3), max_size=2),
            "items": inner,
            "properties": st.dictionaries(_text, inner, max_size=3),
            "required": st.lists(_text, max_size=3),
            "oneOf": st.lists(inner, max_size=3),
            "anyOf": st.lists(inner, max_size=2),
        },
    )


schemas = st.recursive(st.just({}) | _schema(st.just({})), _schema, max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, description=_text, nested=st.booleans())
def test_any_tool_schema_matches_openai_harmony(
    renderer: HarmonyRenderer, schema: dict, description: str, nested: bool
) -> None:
    from openai_harmony import (
        Conversation,
        DeveloperContent,
        Message,
        Role,
        SystemContent,
        ToolDescription,
    )

    if nested:  # the same schema as a property, where unions and defaults render differently
        schema = {"type": "object", "properties": {"p": schema}, "required": ["p"]}
    tool = {"name": "f", "description": description, "parameters": schema}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": tool}]}
    request = request_from_document(body, "schema.json")
    got = render(request, renderer, RenderOptions(date="2026-01-01")).token_ids
    developer = DeveloperContent.new().with_function_tools(
        [ToolDescription.new("f", description, schema)]
    )
    system = SystemContent.new().with_conversation_start_date("2026-01-01")
    conversation = Conversation.from_messages(
        [
            Message.from_role_and_content(Role.SYSTEM, system),
            Message.from_role_and_content(Role.DEVELOPER, developer),
            Message.from_role_and_content(Role.USER, "hi"),
        ]
    )
    want = harmony_encoding().render_conversation_for_completion(conversation, Role.ASSISTANT)
    assert got == want, first_difference(renderer, got, want)
