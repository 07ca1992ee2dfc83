"""OpenAI Responses API bodies (`POST /v1/responses`) in the common chat shape.

Read: `instructions` (a string or items), `input` (a string or items: messages with
`input_text` / `output_text` / `refusal` parts, `input_image` / `input_file` / `input_audio`
parts (no text of their own), `function_call`, `function_call_output`, `custom_tool_call`,
`custom_tool_call_output`, `reasoning`), function tools (`{"type": "function", "name", ...}`).
`tool_choice`, `prompt_cache_key`, `prompt_cache_retention`, `reasoning` and `text` stay in the
body for the rules that read them.

The server's prompt is the request's `instructions`, then, for a request continuing an earlier
response (`previous_response_id`), that response's whole conversation (its input items and its
output items, and so on back to the first), then the new input. `pcache.prompt.shapes.chains` finds
the earlier conversation in the same log and hands it over under `CHAIN_KEY`; a request whose
earlier response the log does not hold is an error that says so, never a short prompt.

A reasoning item belongs to the assistant turn after it (its text, else its summary, else its
encrypted content, which stands for the hidden text: it changes exactly when that does).
"""

from __future__ import annotations

from typing import Any

from pcache.prompt.shapes.fields import Where
from pcache.prompt.shapes.request_record import (
    KIND_OPENAI,
    Request,
    function_call,
    parse_arguments,
    read_sidecar,
)

SHAPE = "responses"
CHAIN_KEY = "pcache_previous_items"
"""The items of the earlier conversation a line continues (set by `pcache.prompt.shapes.chains`)."""
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
SILENT_PARTS = ("input_image", "input_file", "input_audio")
ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
)


def looks_like(body: dict[str, Any]) -> bool:
    if "messages" in body or "contents" in body:
        return False
    return "input" in body or "instructions" in body or "previous_response_id" in body


def input_items(body: dict[str, Any]) -> list[Any]:
    """The items of a body's `input` (a string is one user message)."""
    value = body.get("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


class _Turns:
    """Appends items to a request as chat messages, merging one assistant turn's items."""

    def __init__(self, request: Request, where: Where):
        self.request, self.where = request, where
        self.reasoning: tuple[str, str] | None = None
        self.open_assistant = False

    def add(self, message: dict[str, Any], origin: str) -> int:
        position = len(self.request.messages)
        self.request.origins[f"messages[{position}]"] = origin
        self.request.messages.append(message)
        return position

    def assistant(self, origin: str, content: str | None = None) -> int:
        """The assistant message of the current turn (a new one unless it is still open)."""
        if self.open_assistant and content is None:
            return len(self.request.messages) - 1
        message: dict[str, Any] = {"role": "assistant"}
        if content is not None:
            message["content"] = content
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning[0]
            self.reasoning = None
        self.open_assistant = True
        return self.add(message, origin)

    def close(self) -> None:
        """A turn of another role begins: a pending reasoning item becomes its own turn."""
        if self.reasoning is not None:
            origin = self.reasoning[1]
            self.open_assistant = False
            self.assistant(origin, "")
        self.open_assistant = False

    def item(self, item: dict[str, Any], path: str) -> None:
        where = self.where
        kind = where.string(item, "type", f"{path}.type") or "message"
        if kind == "message":
            self.message(item, path)
        elif kind in ("function_call", "custom_tool_call"):
            self.call(item, path, kind == "custom_tool_call")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.close()
            output = self.text(item.get("output"), f"{path}.output")
            call_id = where.identifier(item, "call_id", f"{path}.call_id")
            position = self.add({"role": "tool", "content": output, "tool_call_id": call_id}, path)
            self.request.origins[f"messages[{position}].content"] = f"{path}.output"
        elif kind == "reasoning":
            self.reasoning = (self.reasoning_text(item, path), path)
        else:
            raise where.error(
                f"{path}.type",
                f"is {kind!r}, an item pcache does not read (it reads {', '.join(ITEM_TYPES)})",
            )

    def message(self, item: dict[str, Any], path: str) -> None:
        where = self.where
        role = item.get("role")
        if role not in ROLES:
            raise where.expect(role, f"{path}.role", f"one of {', '.join(ROLES)}")
        content = item.get("content")
        text = self.text(content, f"{path}.content")
        if role == "assistant":
            self.open_assistant = False
            position = self.assistant(path, text)
        else:
            self.close()
            position = self.add({"role": role, "content": text}, path)
        if isinstance(content, list):
            texts = [i for i, part in enumerate(content) if _part_text(part) is not None]
            if len(texts) == 1:
                key = "text" if "text" in content[texts[0]] else "refusal"
                origin = f"{path}.content[{texts[0]}].{key}"
                self.request.origins[f"messages[{position}].content"] = origin
        else:
            self.request.origins[f"messages[{position}].content"] = f"{path}.content"

    def call(self, item: dict[str, Any], path: str, custom: bool) -> None:
        where = self.where
        name = where.string(item, "name", f"{path}.name")
        key = "input" if custom else "arguments"
        arguments = item.get(key)
        if arguments is not None and not isinstance(arguments, str):
            raise where.expect(arguments, f"{path}.{key}", "a string")
        call_id = where.identifier(item, "call_id", f"{path}.call_id")
        position = self.assistant(path)
        message = self.request.messages[position]
        calls = message.setdefault("tool_calls", [])
        value = arguments if custom else parse_arguments(arguments or "{}")
        if not custom and isinstance(arguments, str):
            where.check_nesting(value, f"{path}.arguments")
        calls.append(function_call(call_id, name, value))
        at = f"messages[{position}].tool_calls[{len(calls) - 1}]"
        origins = self.request.origins
        origins[at] = path
        origins[f"{at}.id"] = f"{path}.call_id"
        origins[f"{at}.function"] = path
        origins[f"{at}.function.name"] = f"{path}.name"
        origins[f"{at}.function.arguments"] = f"{path}.{key}"

    def text(self, content: Any, path: str) -> str:
        """The text of a string or of a list of parts (text parts joined by newlines)."""
        if content is None or isinstance(content, str):
            return content or ""
        if not isinstance(content, list):
            raise self.where.expect(content, path, "a string or a list of content parts")
        texts = []
        for index, part in enumerate(self.where.items(content, path, "a content part object")):
            kind = self.where.string(part, "type", f"{path}[{index}].type")
            text = _part_text(part)
            if text is not None:
                if not isinstance(text, str):
                    key = "text" if "text" in part else "refusal"
                    raise self.where.expect(text, f"{path}[{index}].{key}", "a string")
                texts.append(text)
            elif kind not in SILENT_PARTS:
                raise self.where.error(
                    f"{path}[{index}].type",
                    f"is {kind!r}, a content part pcache does not read",
                )
        return "\n".join(texts)

    def reasoning_text(self, item: dict[str, Any], path: str) -> str:
        for key in ("content", "summary"):
            parts = self.where.list(item, key, f"{path}.{key}")
            if parts:
                return self.text(parts, f"{path}.{key}")
        encrypted = self.where.string(item, "encrypted_content", f"{path}.encrypted_content")
        return encrypted or ""


def _part_text(part: dict[str, Any]) -> Any:
    kind = part.get("type")
    if kind in TEXT_PARTS or kind in ("reasoning_text", "summary_text"):
        return part.get("text")
    if kind == "refusal":
        return part.get("refusal")
    return None


def read(request: Request, outer: dict[str, Any], body: dict[str, Any], where: Where) -> None:
    url = outer.get("url")
    if isinstance(url, str) and url.rstrip("/").endswith("/embeddings"):
        raise where.error("", f"is an embeddings request ({url}), which no prompt cache serves")
    request.kind, request.shape = KIND_OPENAI, SHAPE
    if CHAIN_KEY in body:
        request.raw = body = {key: value for key, value in body.items() if key != CHAIN_KEY}
    read_sidecar(request, outer, body, where)
    turns = _Turns(request, where)
    _text_or_items(turns, body, "instructions", "system")
    parent = where.identifier(body, "previous_response_id", "previous_response_id")
    if parent is not None:
        chain = outer.get(CHAIN_KEY, body.get(CHAIN_KEY))
        if chain is None:
            raise where.error(
                "previous_response_id",
                f"is {parent!r}, a response this log does not hold: the server's prompt begins"
                " with that response's conversation, which pcache cannot rebuild (log every"
                " request of the conversation, each with its response's `id` and `output`)",
            )
        known = set(request.origins)
        for item in chain:
            if isinstance(item, dict):
                turns.item(item, "previous_response_id")
        turns.close()
        for key in set(request.origins) - known:  # held by the earlier lines of the log
            request.origins[key] = "previous_response_id"
    _text_or_items(turns, body, "input", "user")
    turns.close()
    _tools(request, body, where)
    request.model = where.string(body, "model", "model")


def _text_or_items(turns: _Turns, body: dict[str, Any], key: str, role: str) -> None:
    """`instructions` or `input`: one message of `role` when a string, else a list of items."""
    value = body.get(key)
    if isinstance(value, str):
        position = turns.add({"role": role, "content": value}, key)
        turns.request.origins[f"messages[{position}].content"] = key
    elif isinstance(value, list):
        _items(turns, value, key)
    elif value is not None:
        raise turns.where.expect(value, key, "a string, a list of items or null")


def _items(turns: _Turns, items: list[Any], path: str) -> None:
    for index, item in enumerate(turns.where.items(items, path, "an item object")):
        turns.item(item, f"{path}[{index}]")


def _tools(request: Request, body: dict[str, Any], where: Where) -> None:
    tools = where.list(body, "tools", "tools")
    for index, tool in enumerate(where.items(tools or [], "tools", "a tool object")):
        path = f"tools[{index}]"
        kind = where.string(tool, "type", f"{path}.type")
        position = len(request.tools)
        if kind != "function":
            request.tools.append(dict(tool))  # built-in and custom tools: as sent
            request.origins[f"tools[{position}]"] = path
            continue
        where.string(tool, "name", f"{path}.name")
        where.string(tool, "description", f"{path}.description")
        where.object(tool, "parameters", f"{path}.parameters")
        function = {key: value for key, value in tool.items() if key != "type"}
        request.tools.append({"type": "function", "function": function})
        request.origins[f"tools[{position}]"] = path
        request.origins[f"tools[{position}].function"] = path
