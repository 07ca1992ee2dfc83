"""Safe mechanical fixes of request files: sorted tool-schema keys and a tools array by name.

Only `.json` request files are rewritten (a JSONL log records what was sent; fixing it would fix
nothing). Messages are never touched, so a model's own tool-call arguments keep their bytes.
A file is written (atomically: a temporary file beside the real file, then a rename) only when
its content changes, and then only the fixed members move: escapes, number spellings,
indentation and line endings are kept (`json_spans`). Other files stay byte-identical.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from pcache.errors import InputError
from pcache.files import write_atomically
from pcache.prompt.reading.loading import BOM, read_bytes
from pcache.prompt.shapes.request import tool_name
from pcache.rules import json_spans


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


def fix_text(text: str) -> str:
    """`fix_document` applied to a JSON text by moving spans: members are reordered, every
    other character (escapes, number spellings, indentation, line endings) stays as it is."""
    root = json_spans.parse_spans(text)
    document = json_spans.root_value(root)
    holder = document
    if document.kind == "object" and (
        document.member("custom_id") is not None or document.member("url") is not None
    ):
        body = document.member("body")
        holder = body if body is not None and body.kind == "object" else document
    tools = holder.member("tools") if holder.kind == "object" else None
    if tools is None or tools.kind != "array":
        return text
    names = []
    for tool in tools.children:
        if tool.kind == "object":
            function = tool.member("function")
            if function is not None and function.kind == "object":
                _sort_member(function, "parameters")
            _sort_member(tool, "input_schema")
            _sort_member(tool, "parameters")
        names.append(tool_name(json.loads(json_spans.render(tool))))
    json_spans.reorder(tools, sorted(range(len(names)), key=names.__getitem__))
    return json_spans.render(root)


def _sort_member(node: json_spans.Node, key: str) -> None:
    for index, name in enumerate(node.keys):
        if name == key:
            json_spans.sort_keys(node.children[index])


def fixable_problem(path: str) -> str | None:
    """Why `path` cannot be rewritten in place of the user's file, or None.

    A fix writes a new file beside the real one (through symlinks) and renames it over it:
    other hard links to the old file would keep the old content, so such files are refused.
    """
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except OSError as error:
        return f"cannot fix: {error.strerror or error}"
    if not stat.S_ISREG(info.st_mode):
        return "cannot fix: not a regular file"
    if info.st_nlink > 1:
        return (
            f"not fixed: it has {info.st_nlink} hard links, and a fix (a new file renamed"
            " over it) would leave the other links with the old content"
        )
    if not os.access(os.path.dirname(target) or ".", os.W_OK):
        return f"cannot fix: its folder {os.path.dirname(target)} is not writable"
    return None


def fix_files(paths: list[str]) -> list[str]:
    """Fix every file of `paths` (all checked first: one that cannot be fixed safely stops
    the run before any file is written); returns the files rewritten."""
    candidates = [path for path in paths if path != "-" and path.endswith(".json")]
    for path in candidates:
        problem = fixable_problem(path)
        if problem is not None:
            raise InputError(path, problem)
    return [path for path in candidates if fix_file(path)]


def fix_file(path: str) -> bool:
    """Apply the safe fixes to one .json request file; True when the file was rewritten.

    The real file (symlinks followed) is replaced atomically, keeping its mode, its byte
    order mark and every byte the fix does not move; a file whose content would not change
    is not touched.
    """
    if path == "-" or not path.endswith(".json"):
        return False
    data = read_bytes(path)
    bom = data.startswith(BOM)
    try:
        text = data[len(BOM) if bom else 0 :].decode("utf-8")
        document = json.loads(text)
        fixed_text = fix_text(text)
    except ValueError:  # not JSON, or not UTF-8: lint reported it; nothing to fix
        return False
    if fixed_text == text:
        return False
    if json.loads(fixed_text) != fix_document(document):  # same values, now in order
        raise InputError(path, "the fix would change the request's content; not fixed")
    output = (BOM if bom else b"") + fixed_text.encode("utf-8")
    write_atomically(
        os.path.realpath(path),
        [output],
        keep_mode=True,
        durable=True,
        failure="cannot write fix",
    )
    return True
