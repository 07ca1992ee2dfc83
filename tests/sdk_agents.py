"""Small tool-using agents written against the real OpenAI and Anthropic SDKs.

Each agent answers a question with one tool call, feeds the result back, then takes a follow-up
turn: three requests of one growing conversation. `clock` puts the time in the system prompt
(the cache breaker the tests plant); without it the system prompt is static.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

from pcache.record.canned import anthropic_message, chat_completion, tool_call

SYSTEM = (
    "You are the support agent of a parcel delivery company. Answer briefly and politely. "
    "Use the tools to look parcels up; never guess a status. " * 6
)
PARCEL_TOOL = {
    "name": "parcel_status",
    "description": "The delivery status of a parcel.",
    "schema": {  # keys sorted, as a deterministic serializer writes them
        "properties": {"parcel_id": {"type": "string"}},
        "required": ["parcel_id"],
        "type": "object",
    },
}


def ticking_clock(step_seconds: int = 7) -> Callable[[], str]:
    """A clock that moves `step_seconds` on each reading (requests are seconds apart)."""
    start = datetime(2026, 3, 2, 10, 16, 2, tzinfo=timezone.utc)
    readings: Iterator[int] = iter(range(0, 10**6, step_seconds))
    return lambda: (start + timedelta(seconds=next(readings))).strftime("%Y-%m-%d %H:%M:%S UTC")


def lookup(parcel_id: str) -> str:
    return json.dumps({"parcel_id": parcel_id, "status": "out for delivery", "eta": "14:00"})


def openai_responses() -> list[dict]:
    usage = {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129}
    return [
        chat_completion(
            tool_calls=[tool_call("call_1", "parcel_status", {"parcel_id": "P-42"})], usage=usage
        ),
        chat_completion("Your parcel P-42 is out for delivery, arriving at 14:00.", usage=usage),
        chat_completion("You're welcome!", usage=usage),
    ]


def openai_agent(client, clock: Callable[[], str] | None = None, stream: bool = False) -> str:
    tools = [
        {
            "type": "function",
            "function": {
                "name": PARCEL_TOOL["name"],
                "description": PARCEL_TOOL["description"],
                "parameters": PARCEL_TOOL["schema"],
            },
        }
    ]

    def system() -> dict:
        text = SYSTEM if clock is None else f"{SYSTEM}Current time: {clock()}."
        return {"role": "system", "content": text}

    history: list[dict] = [{"role": "user", "content": "Where is my parcel P-42?"}]
    answer = ""
    for follow_up in (None, "Thanks!"):
        if follow_up:
            history.append({"role": "user", "content": follow_up})
        while True:
            response = client.chat.completions.create(
                model="gpt-4o-mini", messages=[system(), *history], tools=tools
            )
            message = response.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                answer = message.content or ""
                break
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments)
                history.append(
                    {"role": "tool", "tool_call_id": call.id, "content": lookup(**arguments)}
                )
    return answer


def anthropic_responses() -> list[dict]:
    usage = {"input_tokens": 120, "output_tokens": 9, "cache_read_input_tokens": 0}
    return [
        anthropic_message(
            "Let me look that up.",
            tool_uses=[("toolu_1", "parcel_status", {"parcel_id": "P-42"})],
            usage=usage,
        ),
        anthropic_message("Your parcel P-42 is out for delivery, arriving at 14:00.", usage=usage),
        anthropic_message("You're welcome!", usage=usage),
    ]


def _anthropic_turns(clock: Callable[[], str] | None, base: str = SYSTEM):
    tools = [
        {
            "name": PARCEL_TOOL["name"],
            "description": PARCEL_TOOL["description"],
            "input_schema": PARCEL_TOOL["schema"],
        }
    ]

    def system() -> str:
        return base if clock is None else f"{base}Current time: {clock()}."

    return tools, system


def _after_reply(response, history: list[dict]) -> str | None:
    """Append the assistant turn (and tool results); the answer once no tool is called."""
    content = [block.model_dump(exclude_none=True) for block in response.content]
    history.append({"role": "assistant", "content": content})
    uses = [block for block in response.content if block.type == "tool_use"]
    if not uses:
        return "".join(block.text for block in response.content if block.type == "text")
    results = [
        {"type": "tool_result", "tool_use_id": use.id, "content": lookup(**use.input)}
        for use in uses
    ]
    history.append({"role": "user", "content": results})
    return None


def _anthropic_steps(clock: Callable[[], str] | None, system_prompt: str):
    """The agent's conversation: yields each request's arguments, is sent each response."""
    tools, system = _anthropic_turns(clock, system_prompt)
    history: list[dict] = [{"role": "user", "content": "Where is my parcel P-42?"}]
    answer = None
    for follow_up in (None, "Thanks!"):
        if follow_up:
            history.append({"role": "user", "content": follow_up})
        answer = None
        while answer is None:
            response = yield {
                "model": "claude-sonnet-4-6",
                "max_tokens": 512,
                "cache_control": {"type": "ephemeral"},  # cache up to the last message
                "system": system(),
                "tools": tools,
                "messages": history,
            }
            answer = _after_reply(response, history)
    return answer or ""


def anthropic_agent(
    client, clock: Callable[[], str] | None = None, system_prompt: str = SYSTEM
) -> str:
    steps = _anthropic_steps(clock, system_prompt)
    arguments = next(steps)
    try:
        while True:
            arguments = steps.send(client.messages.create(**arguments))
    except StopIteration as done:
        return done.value


async def async_anthropic_agent(client, clock: Callable[[], str] | None = None) -> str:
    steps = _anthropic_steps(clock, SYSTEM)
    arguments = next(steps)
    try:
        while True:
            arguments = steps.send(await client.messages.create(**arguments))
    except StopIteration as done:
        return done.value
