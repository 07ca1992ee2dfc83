"""A seeded generator of Chat Completions requests, and OpenAI's harmony renderer as the oracle.

`generate(seed)` builds one request body: tools with varied JSON schemas, multi-turn chats with
tool calls, tool results, reasoning, system and developer messages, unicode and dates.
`reference_token_ids(body, date)` builds the harmony Conversation from the body the way a serving
engine does for gpt-oss (vLLM's chat path) and renders it with `openai_harmony`.
"""

from __future__ import annotations

import json
import os
import random
from functools import cache
from typing import Any

WORDS = (
    *("weather", "city", "unit", "price", "order", "refund", "status", "query", "limit", "page"),
    *("token", "user", "account", "invoice", "café", "naïve", "Zürich", "東京", "данные", "🙂"),
    *("emoji\u200b", "tab\tkey", "new\nline", 'quote"d', "back\\slash", " ", "\r\n"),
)
SPECIAL_LOOKALIKES = ("<|end|>", "<|start|>", "<|channel|>", "<|endoftext|>", "<|call|>")


def words(rng: random.Random, low: int = 1, high: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def identifier(rng: random.Random) -> str:
    stem = rng.choice(("get", "set", "list", "search", "make", "fetch", "update"))
    noun = rng.choice(("weather", "order", "user", "file", "item", "x"))
    return f"{stem}_{noun}{rng.randint(0, 99)}"


def default_value(rng: random.Random, kind: str) -> Any:
    return {
        "string": lambda: words(rng, 1, 3),
        "integer": lambda: rng.randint(-5, 10**6),
        "number": lambda: rng.choice((0.5, 1e-5, 2.5e-7, 1e20, 3.0, -0.0, 123456.789)),
        "boolean": lambda: rng.random() < 0.5,
        "array": lambda: [rng.randint(0, 3), words(rng, 1, 1)],
        "object": lambda: {"k": words(rng, 1, 2), "n": None},
    }[kind]()


def schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """A property schema: scalars, enums, arrays, nested objects, unions, and decorations."""
    roll = rng.random()
    kinds = ["string", "integer", "number", "boolean"]
    if depth < 3:
        kinds += ["array", "object", "object"]
    kind = rng.choice(kinds)
    if roll < 0.08 and depth < 3:
        out: dict[str, Any] = {"oneOf": [schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    elif roll < 0.12:
        out = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    elif roll < 0.16:
        out = {"type": [rng.choice(("string", "integer", "number")), "null"]}
    elif kind == "object":
        out = object_schema(rng, depth + 1)
    elif kind == "array":
        out = {"type": "array"}
        if rng.random() < 0.85:
            out["items"] = schema(rng, depth + 1)
    else:
        out = {"type": kind}
        if kind == "string" and rng.random() < 0.3:
            out["enum"] = [words(rng, 1, 2) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.5:
        out["description"] = words(rng, 1, 10)
    if rng.random() < 0.08:
        out["title"] = words(rng, 1, 2)
    if rng.random() < 0.06:
        out["examples"] = [words(rng, 1, 2), rng.randint(0, 9)]
    if rng.random() < 0.08:
        out["nullable"] = True
    if rng.random() < 0.15 and isinstance(out.get("type"), str):
        out["default"] = (
            rng.choice(out["enum"]) if "enum" in out else default_value(rng, out["type"])
        )
    return out


def object_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    properties = {}
    for _ in range(rng.randint(0 if depth else 1, 4)):
        name = rng.choice(("city", "unit", "limit", "query", "filters", "items", "mode", "ünits"))
        properties[f"{name}{rng.randint(0, 9)}" if rng.random() < 0.5 else name] = schema(
            rng, depth
        )
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if properties and rng.random() < 0.7:
        names = list(properties)
        out["required"] = rng.sample(names, rng.randint(0, len(names)))
    if rng.random() < 0.15:
        out["additionalProperties"] = False
    return out


def tool(rng: random.Random) -> dict[str, Any]:
    function: dict[str, Any] = {"name": identifier(rng)}
    roll = rng.random()
    if roll < 0.8:
        function["description"] = words(rng, 0, 15)
    if roll < 0.1:
        function["description"] = f"{words(rng)}\n\n{words(rng)}\n"
    roll = rng.random()
    if roll < 0.8:
        function["parameters"] = object_schema(rng)
    elif roll < 0.9:
        function["parameters"] = {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def arguments(rng: random.Random) -> str:
    value = {"city": words(rng, 1, 2), "limit": rng.randint(1, 50), "exact": rng.random() < 0.5}
    return json.dumps(
        value, ensure_ascii=rng.random() < 0.3, separators=rng.choice(((",", ":"), (", ", ": ")))
    )


def content(rng: random.Random, allow_parts: bool = True) -> Any:
    if rng.random() < 0.03:
        return ""
    text = words(rng, 1, 30)
    if rng.random() < 0.1:
        text += " " + rng.choice(SPECIAL_LOOKALIKES) + " " + words(rng, 1, 3)
    if allow_parts and rng.random() < 0.1:
        return [{"type": "text", "text": text}, {"type": "text", "text": words(rng, 1, 5)}]
    return text


def generate(seed: int) -> dict[str, Any]:
    """One Chat Completions request body, deterministic for `seed`."""
    rng = random.Random(seed)
    tools = [tool(rng) for _ in range(rng.choice((0, 0, 1, 2, 3, 5)))]
    messages: list[dict[str, Any]] = []
    roll = rng.random()
    if roll < 0.6:
        messages.append({"role": "system", "content": content(rng)})
    elif roll < 0.75:
        messages.append({"role": "developer", "content": content(rng)})
    call_id = 0
    for _ in range(rng.randint(1, 4)):
        messages.append({"role": "user", "content": content(rng)})
        if rng.random() < 0.07:
            messages.append({"role": "developer", "content": words(rng)})
        if tools and rng.random() < 0.6:
            calls = []
            for _ in range(rng.randint(1, 2)):
                call_id += 1
                name = rng.choice(tools)["function"]["name"]
                calls.append(
                    {
                        "id": f"call_{call_id}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments(rng)},
                    }
                )
            assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            if rng.random() < 0.5:
                assistant["reasoning_content"] = words(rng, 3, 20)
            if rng.random() < 0.3:
                assistant["content"] = words(rng, 1, 8)
            messages.append(assistant)
            for call in calls:
                result = json.dumps({"ok": True, "value": words(rng, 1, 4)}, ensure_ascii=False)
                answered = call["id"] if rng.random() < 0.97 else "call_unknown"
                messages.append({"role": "tool", "tool_call_id": answered, "content": result})
        if rng.random() < 0.75:
            answer: dict[str, Any] = {"role": "assistant", "content": content(rng, False)}
            if rng.random() < 0.4:
                answer["reasoning_content"] = words(rng, 3, 20)
            messages.append(answer)
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": content(rng)})
    if rng.random() < 0.15:
        messages.append({"role": "assistant", "reasoning_content": words(rng, 2, 9)})
    body: dict[str, Any] = {"model": "gpt-oss-120b", "messages": messages}
    if tools:
        body["tools"] = tools
    effort = rng.choice((None, None, "low", "medium", "high"))
    if effort:
        body["reasoning_effort"] = effort
    return body


def random_date(seed: int) -> str:
    rng = random.Random(seed * 7919)
    return f"{rng.randint(2024, 2027)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


# -- the oracle -----------------------------------------------------------------------------


@cache
def harmony_encoding() -> Any:
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    from pcache.prompt.tokenizers.tiktoken_offline import tiktoken_rs_cache_dir

    os.environ["TIKTOKEN_RS_CACHE_DIR"] = str(tiktoken_rs_cache_dir())
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(
            part["text"] for part in value if isinstance(part, dict) and "text" in part
        )
    return value or ""


def reference_token_ids(body: dict[str, Any], date: str) -> list[int]:
    """Chat Completions body -> harmony messages (as vLLM's gpt-oss path) -> openai_harmony ids."""
    from openai_harmony import (
        Author,
        Conversation,
        DeveloperContent,
        Message,
        ReasoningEffort,
        Role,
        SystemContent,
        ToolDescription,
    )

    messages = list(body["messages"])
    functions = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function"]
    effort = ReasoningEffort((body.get("reasoning_effort") or "medium").capitalize())
    system = SystemContent.new().with_conversation_start_date(date).with_reasoning_effort(effort)
    out = [Message.from_role_and_content(Role.SYSTEM, system)]
    instructions = ""
    if messages and messages[0]["role"] in ("system", "developer"):
        instructions = _text(messages.pop(0)["content"])
    if instructions or functions:
        developer = DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions(instructions)
        if functions:
            described = [
                ToolDescription.new(f["name"], f.get("description") or "", f.get("parameters"))
                for f in functions
            ]
            developer = developer.with_function_tools(described)
        out.append(Message.from_role_and_content(Role.DEVELOPER, developer))
    names: dict[str, str] = {}
    for message in messages:
        role, text = message["role"], _text(message.get("content"))
        if role == "assistant":
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if reasoning:
                out.append(
                    Message.from_role_and_content(Role.ASSISTANT, reasoning).with_channel(
                        "analysis"
                    )
                )
            calls = message.get("tool_calls") or []
            if text:
                channel = "commentary" if calls else "final"
                out.append(
                    Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)
                )
            for call in calls:
                names[call["id"]] = call["function"]["name"]
                out.append(
                    Message.from_role_and_content(Role.ASSISTANT, call["function"]["arguments"])
                    .with_channel("commentary")
                    .with_recipient(f"functions.{call['function']['name']}")
                    .with_content_type("<|constrain|>json")
                )
        elif role == "tool":
            author = Author.new(Role.TOOL, f"functions.{names.get(message['tool_call_id'], '')}")
            out.append(
                Message.from_author_and_content(author, text)
                .with_channel("commentary")
                .with_recipient("assistant")
            )
        elif role in ("system", "developer"):
            out.append(Message.from_role_and_content(Role.DEVELOPER, text))
        else:
            out.append(Message.from_role_and_content(Role(role), text))
    # vLLM drops every chain of thought that precedes the last answer on the final channel.
    finals = [
        i for i, m in enumerate(out) if m.author.role == Role.ASSISTANT and m.channel == "final"
    ]
    if finals:
        out = [m for i, m in enumerate(out) if i > finals[-1] or m.channel != "analysis"]
    encoding = harmony_encoding()
    return encoding.render_conversation_for_completion(
        Conversation.from_messages(out), Role.ASSISTANT
    )
