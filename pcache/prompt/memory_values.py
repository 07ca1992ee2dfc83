"""Values given in memory, read as the JSON documents they stand for and checked as files are.

`json_value` copies a Python value into plain JSON types (dict, list, str, int, float, bool,
None): an SDK object (a pydantic model: anything with a callable `model_dump`) becomes the
JSON it serializes to, a tuple a list, a subclass of a JSON type that type. The walk keeps its
own stack (a value of any depth cannot exhaust Python's) and refuses, naming the JSON path:

- nesting deeper than `MAX_NESTING` levels, the limit the readers apply to files (`NestingError`);
- a dict or list inside itself (`CycleError`); one value in several places is fine;
- what no JSON document holds: a set, bytes, an arbitrary object, NaN or an infinity, a key
  that is not a string, text with a lone surrogate (`NotJsonError`).

An integer beyond 64 bits becomes the float a JSON reader makes of it (orjson's rule).
"""

from __future__ import annotations

import math
from typing import Any

from pcache.errors import CycleError, NestingError, NotJsonError
from pcache.prompt.fields import MAX_NESTING, MAX_PATH_SHOWN

MIN_INTEGER, MAX_INTEGER = -(2**63), 2**64 - 1
"""Integers a JSON reader keeps as integers (orjson); others are read as floats."""
_DUMP_OPTIONS = {"mode": "json", "by_alias": True, "exclude_none": True}


def _shown(path: str) -> str:
    return path if len(path) <= MAX_PATH_SHOWN else path[: MAX_PATH_SHOWN - 3] + "..."


def _where(path: str) -> str:
    return f"`{_shown(path)}` " if path else "the value "


def kind_of(value: Any) -> str:
    """A Python value's kind, as a caller would name it (`a set`, `bytes`, `a Foo object`)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes"
    if isinstance(value, set | frozenset):
        return "a set"
    if type(value) is object:
        return "an object()"
    return f"a {type(value).__qualname__} object"


def _sdk_dump(value: Any, source: str, path: str) -> Any:
    dump = getattr(type(value), "model_dump", None)
    if dump is None or not callable(dump):
        return None
    try:
        return value.model_dump(**_DUMP_OPTIONS)
    except Exception as failure:  # the caller's object: its own failure, reported as input
        message = f"{_where(path)}is an SDK object whose model_dump() failed: {failure}"
        raise NotJsonError(source, message[:300], json_path=path) from None


def _scalar(value: Any, source: str, path: str, line: int | None) -> Any:
    """`value` as a JSON scalar (None, bool, int, float, str), or the error refusing it."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                message = f"{_where(path)}is not Unicode text (a lone surrogate)"
                raise NotJsonError(source, message, line, json_path=path) from None
        return value if kind is str else str.__str__(value)
    if isinstance(value, int):
        number = int.__index__(value)
        if MIN_INTEGER <= number <= MAX_INTEGER:
            return number
        value = float(number) if abs(number) < 2**1024 else math.inf
    if isinstance(value, float):
        number = float.__float__(value)
        if not math.isfinite(number):
            message = f"{_where(path)}is {number!r}; JSON has no NaN or infinity"
            raise NotJsonError(source, message, line, json_path=path)
        return number
    message = f"{_where(path)}is {kind_of(value)}, not a JSON value"
    raise NotJsonError(source, message, line, json_path=path)


def _child_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def json_value(value: Any, source: str, line: int | None = None) -> Any:
    """`value` as plain JSON (see the module docstring); errors name `source` (and `line`)."""
    root: list[Any] = [None]
    # Each frame: the container being copied, its copy, its items, its path, its id.
    stack: list[tuple[Any, Any, Any, str, int]] = []
    on_path: set[int] = set()
    pending: list[tuple[Any, Any, str | int, str]] = [(value, root, 0, "")]
    while pending or stack:
        if pending:
            item, holder, key, path = pending.pop()
            dumped = _sdk_dump(item, source, path) if _is_object(item) else None
            if dumped is not None:
                item = dumped
            if isinstance(item, dict | list | tuple):
                if id(item) in on_path:
                    message = f"{_where(path)}contains itself (a cycle)"
                    raise CycleError(source, message, line, json_path=path)
                if len(stack) > MAX_NESTING:
                    message = f"{_where(path)}nests more than {MAX_NESTING} levels"
                    raise NestingError(source, message, line, json_path=path)
                copy: Any = {} if isinstance(item, dict) else [None] * len(item)
                holder[key] = copy
                items = iter(item.items()) if isinstance(item, dict) else iter(enumerate(item))
                stack.append((item, copy, items, path, id(item)))
                on_path.add(id(item))
            else:
                holder[key] = _scalar(item, source, path, line)
            continue
        item, copy, items, path, identity = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            on_path.discard(identity)
            continue
        key, child = entry
        if isinstance(copy, dict):
            if not isinstance(key, str):
                shown = repr(key) if isinstance(key, int | float | bool) or key is None else ""
                message = f"{_where(path)}has a key {shown or kind_of(key)}; JSON keys are strings"
                raise NotJsonError(source, message, line, json_path=path)
            key = _scalar(key, source, path, line)
        pending.append((child, copy, key, _child_path(path, key)))
    return root[0]


def _is_object(value: Any) -> bool:
    """Whether `value` is neither a JSON type nor a tuple (so it may be an SDK object)."""
    return not isinstance(value, dict | list | tuple | str | int | float) and value is not None
