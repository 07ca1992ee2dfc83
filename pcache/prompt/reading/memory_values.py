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
from pcache.prompt.shapes.fields import MAX_NESTING, MAX_PATH_SHOWN

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


def _scalar(value: Any, source: str, line: int | None, frames: list[list[Any]], depth: int) -> Any:
    """`value` as a JSON scalar (None, bool, int, float, str), or the error refusing it (at
    the path the first `depth` frames are at)."""

    def refuse(what: str) -> NotJsonError:
        path = _path(frames, depth)
        return NotJsonError(source, f"{_where(path)}{what}", line, json_path=path)

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
                raise refuse("is not Unicode text (a lone surrogate)") from None
        return value if kind is str else str.__str__(value)
    if isinstance(value, int):
        number = int.__index__(value)
        if MIN_INTEGER <= number <= MAX_INTEGER:
            return number
        if abs(number) >= 2**1024:
            raise refuse("is an integer beyond any JSON number (a float's range)")
        value = float(number)
    if isinstance(value, float):
        number = float.__float__(value)
        if not math.isfinite(number):
            raise refuse(f"is {number!r}; JSON has no NaN or infinity")
        return number
    raise refuse(f"is {kind_of(value)}, not a JSON value")


def _path(frames: list[list[Any]], depth: int) -> str:
    """The JSON path of the item the first `depth` frames are at (keys and indexes)."""
    path = ""
    for frame in frames[:depth]:
        key = frame[_KEY]
        path = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
    return path


_ITEMS, _COPY, _IDENTITY, _KEY = range(4)
"""The fields of a frame of `json_value`'s walk: one list per container being copied."""


def json_value(value: Any, source: str, line: int | None = None) -> Any:
    """`value` as plain JSON (see the module docstring); errors name `source` (and `line`).

    The walk keeps one frame per open container (its items, its copy, its id, the key of the
    item being read) and builds a JSON path only for an error; exact JSON types take the
    first branches, everything else `_scalar` or an SDK dump."""
    root: list[Any] = [None]
    frames: list[list[Any]] = []
    on_path: set[int] = set()
    item, holder, key = value, root, 0
    while True:
        kind, depth = type(item), len(frames)
        if kind is str:
            holder[key] = item if item.isascii() else _scalar(item, source, line, frames, depth)
        elif (
            (kind is int and MIN_INTEGER <= item <= MAX_INTEGER)
            or (kind is float and item - item == 0.0)
            or item is None
            or kind is bool
        ):
            holder[key] = item
        elif isinstance(item, dict | list | tuple):
            identity = id(item)
            if identity in on_path:
                path = _path(frames, len(frames))
                raise CycleError(
                    source, f"{_where(path)}contains itself (a cycle)", line, json_path=path
                )
            if len(frames) > MAX_NESTING:
                path = _path(frames, len(frames))
                message = f"{_where(path)}nests more than {MAX_NESTING} levels"
                raise NestingError(source, message, line, json_path=path)
            if isinstance(item, dict):
                copy: Any = {}
                items = iter(item.items())
            else:
                copy = [None] * len(item)
                items = enumerate(item)
            holder[key] = copy
            frames.append([items, copy, identity, None])
            on_path.add(identity)
        else:
            dumped = _sdk_dump(item, source, _path(frames, len(frames)))
            if dumped is not None:
                item = dumped
                continue
            holder[key] = _scalar(item, source, line, frames, len(frames))
        while frames:  # the next item to read, closing the containers read to the end
            frame = frames[-1]
            entry = next(frame[_ITEMS], None)
            if entry is None:
                frames.pop()
                on_path.discard(frame[_IDENTITY])
                continue
            key, item = entry
            holder = frame[_COPY]
            if type(holder) is dict and type(key) is not str:
                key = _key(key, source, line, frames)
            frame[_KEY] = key
            break
        else:
            return root[0]


def _key(key: Any, source: str, line: int | None, frames: list[list[Any]]) -> str:
    """A dict key that is not an exact str: a str subclass as a str, anything else refused."""
    path = _path(frames, len(frames) - 1)
    if not isinstance(key, str):
        shown = repr(key) if isinstance(key, int | float | bool) or key is None else ""
        message = f"{_where(path)}has a key {shown or kind_of(key)}; JSON keys are strings"
        raise NotJsonError(source, message, line, json_path=path)
    return _scalar(key, source, line, frames, len(frames) - 1)
