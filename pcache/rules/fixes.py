"""Safe mechanical fixes of request files: sorted tool-schema keys and a tools array by name.

Only `.json` request files are rewritten (a JSONL log records what was sent; fixing it would fix
nothing). Messages are never touched, so a model's own tool-call arguments keep their bytes.
A file is written (atomically: a temporary file in the same folder, then a rename) only when its
content changes; other files stay byte-identical.
"""

from __future__ import annotations

import json
from typing import Any

from pcache.files import write_atomically
from pcache.prompt.loading import read_bytes
from pcache.prompt.request import tool_name


def sort_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: sort_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(item) for item in value]
    return value


def fix_tools(tools: list[Any]) -> list[Any]:
    """Tools sorted by name, each with its schema keys sorted (the rest of each tool as is)."""
    fixed = []
    for tool in tools:
        if not isinstance(tool, dict):
            fixed.append(tool)
            continue
        tool = dict(tool)
        if isinstance(tool.get("function"), dict):
            function = dict(tool["function"])
            if "parameters" in function:
                function["parameters"] = sort_keys(function["parameters"])
            tool["function"] = function
        if "input_schema" in tool:
            tool["input_schema"] = sort_keys(tool["input_schema"])
        if "parameters" in tool:
            tool["parameters"] = sort_keys(tool["parameters"])
        fixed.append(tool)
    return sorted(fixed, key=tool_name)


def fix_document(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    holder = document
    if isinstance(document.get("body"), dict) and ("custom_id" in document or "url" in document):
        holder = document["body"]
    if not isinstance(holder.get("tools"), list):
        return document
    fixed_tools = fix_tools(holder["tools"])
    if holder is document:
        return {**document, "tools": fixed_tools}
    return {**document, "body": {**holder, "tools": fixed_tools}}


def _indent_of(text: str) -> int | None:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped:
            return len(line) - len(stripped) or None
    return None


def fix_file(path: str) -> bool:
    """Apply the safe fixes to one .json request file; True when the file was rewritten."""
    if path == "-" or not path.endswith(".json"):
        return False
    data = read_bytes(path)
    try:
        document = json.loads(data)
    except ValueError:
        return False
    fixed = fix_document(document)
    if json.dumps(fixed) == json.dumps(document):
        return False
    text = data.decode("utf-8", errors="replace")
    output = json.dumps(fixed, indent=_indent_of(text), ensure_ascii=False)
    if text.endswith("\n"):
        output += "\n"
    write_atomically(
        path, [output.encode()], keep_mode=True, durable=True, failure="cannot write fix"
    )
    return True
