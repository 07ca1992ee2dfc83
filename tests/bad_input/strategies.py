"""Hypothesis strategies: valid request shapes, then one field replaced by a hostile value."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)

OPENAI = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather of a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
}
ANTHROPIC = {
    "model": "claude",
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}],
        },
    ],
    "tools": [
        {
            "name": "weather",
            "description": "Weather of a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
}
BASES = (OPENAI, ANTHROPIC, {"prompt": "Hello"}, {"token_ids": [1, 2, 3]})


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into `value` (dict keys and list indexes), the root excluded."""
    found = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return found
    for key, child in items:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@st.composite
def mutated_requests(draw) -> Any:
    """A valid request of a known shape with one value (anywhere in it) made hostile."""
    base = draw(st.sampled_from(BASES))
    path = draw(st.sampled_from(_paths(base)))
    return _replace(base, path, draw(HOSTILE_VALUES))


GOOD_HASH_LINE = {"timestamp": 0, "input_length": 32, "output_length": 4, "hash_ids": [1, 2]}


@st.composite
def mutated_hash_lines(draw) -> Any:
    """A Mooncake line with one field hostile (or missing)."""
    key = draw(st.sampled_from([*GOOD_HASH_LINE, "block_size"]))
    if draw(st.booleans()) and key != "hash_ids":
        return {k: v for k, v in GOOD_HASH_LINE.items() if k != key}
    return {**GOOD_HASH_LINE, key: draw(HOSTILE_VALUES)}
