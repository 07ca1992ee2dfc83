"""Chat Completions messages as harmony messages, the way a serving engine builds them for gpt-oss.

Each function returns (text, normalized JSON path or None) pieces; template text has no path,
and every special marker the format writes is a piece of its own.
"""

from __future__ import annotations

from typing import Any

from pcache.errors import InputError
from pcache.prompt.renderers.harmony_json import compact_json
from pcache.prompt.renderers.harmony_schema import Piece, tool_pieces
from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.shapes.request import Request, parse_arguments

MODEL_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
KNOWLEDGE_CUTOFF = "2024-06"
REASONING_EFFORTS = ("low", "medium", "high")
SPECIAL_MARKERS = (
    "<|start|>",
    "<|message|>",
    "<|end|>",
    "<|channel|>",
    "<|constrain|>",
    "<|call|>",
)


def conversation_pieces(request: Request, options: RenderOptions) -> list[Piece]:
    """The whole prompt as (text, normalized JSON path or None) pieces."""
    tools = function_tools(request)
    messages = request.messages
    has_instructions = bool(messages) and messages[0]["role"] in ("system", "developer")
    pieces = system_pieces(request, options, has_tools=bool(tools))
    pieces += developer_pieces(request, 0 if has_instructions else None, tools)
    last_final = _last_final_index(messages)
    call_names: dict[str, tuple[str, str]] = {}
    for index in range(1 if has_instructions else 0, len(messages)):
        pieces += message_pieces(request, index, index > last_final, call_names)
    if options.add_generation_prompt:
        pieces += [("<|start|>", None), ("assistant", None)]
    return pieces


def function_tools(request: Request) -> list[tuple[dict[str, Any], str]]:
    """Function tools and the normalized path of each one's `function` object."""
    tools = []
    for index, tool in enumerate(request.tools):
        function = tool.get("function")
        if isinstance(function, dict):
            tools.append((function, f"tools[{index}].function"))
        elif tool.get("type", "function") == "function" and isinstance(tool.get("name"), str):
            tools.append((tool, f"tools[{index}]"))
    return tools


def system_pieces(request: Request, options: RenderOptions, has_tools: bool) -> list[Piece]:
    effort, effort_path = "medium", None
    value, at = request.raw.get("reasoning_effort"), "reasoning_effort"
    reasoning = request.raw.get("reasoning")
    if value is None and isinstance(reasoning, dict):  # the Responses API's spelling
        value, at = reasoning.get("effort"), "reasoning.effort"
    if value is not None:
        if value not in REASONING_EFFORTS:
            raise InputError(
                request.source,
                f"{at} {value!r} is not supported by gpt-oss (low, medium, high)",
                request.line,
            )
        effort, effort_path = value, at
    pieces: list[Piece] = [
        ("<|start|>", None),
        ("system", None),
        ("<|message|>", None),
        (f"{MODEL_IDENTITY}\nKnowledge cutoff: {KNOWLEDGE_CUTOFF}\nCurrent date: ", None),
        (options.date, None),
        ("\n\nReasoning: ", None),
        (effort, effort_path),
        ("\n\n# Valid channels: analysis, commentary, final.", None),
        (" Channel must be included for every message.", None),
    ]
    if has_tools:
        note = "\nCalls to these tools must go to the commentary channel: 'functions'."
        pieces.append((note, None))
    pieces.append(("<|end|>", None))
    return pieces


def developer_pieces(
    request: Request, instructions: int | None, tools: list[tuple[dict[str, Any], str]]
) -> list[Piece]:
    text = request.messages[instructions].get("content") if instructions is not None else None
    if not text and not tools:
        return []
    pieces: list[Piece] = [("<|start|>", None), ("developer", None), ("<|message|>", None)]
    if text:
        pieces += [("# Instructions\n\n", None), (text, f"messages[{instructions}].content")]
        if tools:
            pieces.append(("\n\n", None))
    if tools:
        pieces.append(("# Tools\n\n## functions\n\nnamespace functions {\n\n", None))
        for function, path in tools:
            name = function.get("name") if isinstance(function.get("name"), str) else ""
            description = function.get("description")
            description = description if isinstance(description, str) else ""
            try:
                pieces += tool_pieces(name, description, function.get("parameters"), path)
            except RecursionError:
                where = request.source_path(f"{path}.parameters")
                message = f"{where}: the schema nests too deeply to render"
                raise InputError(request.source, message, request.line) from None
        pieces.append(("} // namespace functions", None))
    pieces.append(("<|end|>", None))
    return pieces


def message_pieces(
    request: Request, index: int, keeps_reasoning: bool, call_names: dict[str, tuple[str, str]]
) -> list[Piece]:
    """One request message as zero or more harmony messages."""
    message = request.messages[index]
    role, path = message["role"], f"messages[{index}]"
    content = message.get("content") or ""
    content = content if isinstance(content, str) else str(content)
    if role == "assistant":
        return _assistant_pieces(request, index, keeps_reasoning, call_names)
    if role in ("tool", "function"):
        name, name_path = call_names.get(str(message.get("tool_call_id")), ("", None))
        if not name and isinstance(message.get("name"), str):
            name, name_path = message["name"], f"{path}.name"
        return [
            ("<|start|>", None),
            ("functions.", None),
            (name, name_path),
            (" to=assistant", None),
            ("<|channel|>", None),
            ("commentary", None),
            ("<|message|>", None),
            (content, f"{path}.content"),
            ("<|end|>", None),
        ]
    header = "developer" if role in ("system", "developer") else role
    header_path = None if role in ("system", "developer", "user") else f"{path}.role"
    return [
        ("<|start|>", None),
        (header, header_path),
        ("<|message|>", None),
        (content, f"{path}.content"),
        ("<|end|>", None),
    ]


def _assistant_pieces(
    request: Request, index: int, keeps_reasoning: bool, call_names: dict[str, tuple[str, str]]
) -> list[Piece]:
    message, path = request.messages[index], f"messages[{index}]"
    content = message.get("content") or ""
    content = content if isinstance(content, str) else str(content)
    calls = [call for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    pieces: list[Piece] = []
    reasoning_key = _reasoning_key(message)
    if reasoning_key and keeps_reasoning:
        pieces += _assistant_message("analysis", message[reasoning_key], f"{path}.{reasoning_key}")
    if not calls:
        if content:
            pieces += _assistant_message("final", content, f"{path}.content")
        return pieces
    if content:
        pieces += _assistant_message("commentary", content, f"{path}.content")
    for call_index, call in enumerate(message["tool_calls"]):
        if not isinstance(call, dict):
            continue
        call_path = f"{path}.tool_calls[{call_index}].function"
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        if call.get("id") is not None:
            call_names[str(call["id"])] = (name, f"{call_path}.name")
        arguments = arguments_text(request, index, call_index, function.get("arguments"))
        pieces += [
            ("<|start|>", None),
            ("assistant to=functions.", None),
            (name, f"{call_path}.name"),
            ("<|channel|>", None),
            ("commentary ", None),
            ("<|constrain|>", None),
            ("json", None),
            ("<|message|>", None),
            (arguments, f"{call_path}.arguments"),
            ("<|call|>", None),
        ]
    return pieces


def _assistant_message(channel: str, text: str, path: str) -> list[Piece]:
    return [
        ("<|start|>", None),
        ("assistant", None),
        ("<|channel|>", None),
        (channel, None),
        ("<|message|>", None),
        (text, path),
        ("<|end|>", None),
    ]


def _reasoning_key(message: dict[str, Any]) -> str | None:
    for key in ("reasoning_content", "reasoning", "thinking"):
        if isinstance(message.get(key), str) and message[key]:
            return key
    return None


def _last_final_index(messages: list[dict[str, Any]]) -> int:
    """Index of the last assistant answer on the final channel (-1 when none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if (
            message["role"] == "assistant"
            and message.get("content")
            and not any(isinstance(call, dict) for call in message.get("tool_calls") or [])
        ):
            return index
    return -1


def arguments_text(request: Request, index: int, call_index: int, arguments: Any) -> str:
    """The arguments exactly as the client sent them; objects as compact JSON.

    Serving engines pass the OpenAI `arguments` string through unchanged, so its spacing and key
    order reach the tokens. Arguments given as objects (Anthropic `tool_use.input`) are written
    the way the model writes them: compact JSON, key order kept.
    """
    original = _raw_arguments(request, index, call_index)
    if original is not None and parse_arguments(original) == arguments:
        return original
    if isinstance(arguments, str):
        return arguments
    return "" if arguments is None else compact_json(arguments)


def _raw_arguments(request: Request, index: int, call_index: int) -> str | None:
    from pcache.text.jsonpath import get_path

    path = f"messages[{index}].tool_calls[{call_index}].function.arguments"
    origin = request.source_path(path)
    if request.path_prefix:
        if not origin.startswith(request.path_prefix + "."):
            return None
        origin = origin[len(request.path_prefix) + 1 :]
    value = get_path(request.raw, origin)
    return value if isinstance(value, str) else None
