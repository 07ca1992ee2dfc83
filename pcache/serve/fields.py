"""Typed readers of one field of a JSON request body; each refusal is a 400 naming the field.

JSON booleans are not numbers here (Python's `True` is an `int`), numbers must be finite, and
ranges are checked where the field is read, so a request never reaches the engine with a value
the engine cannot take.
"""

from __future__ import annotations

import math
from typing import Any

from pcache.serve.api_error import bad_request


def _is_integer(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _optional(body: dict, key: str, kind: type, noun: str) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, kind):
        raise bad_request(f"`{key}` must be {noun}", key)
    return value


def optional_bool(body: dict, key: str) -> bool | None:
    return _optional(body, key, bool, "a boolean")


def optional_str(body: dict, key: str) -> str | None:
    return _optional(body, key, str, "a string")


def optional_object(body: dict, key: str) -> dict | None:
    return _optional(body, key, dict, "an object")


def optional_list(body: dict, key: str) -> list | None:
    return _optional(body, key, list, "a list")


def optional_int(body: dict, key: str, low: int, high: int | None = None) -> int | None:
    """An integer in [low, high] (no upper bound when `high` is None)."""
    value = body.get(key)
    if value is None:
        return None
    where = f"at least {low}" if high is None else f"in [{low}, {high}]"
    if not _is_integer(value) or value < low or (high is not None and value > high):
        raise bad_request(f"`{key}` must be an integer {where}", key)
    return value


def optional_number(
    body: dict, key: str, low: float, high: float, low_open: bool = False
) -> float | None:
    """A finite number in [low, high], or (low, high] when `low_open`."""
    value = body.get(key)
    if value is None:
        return None
    where = f"{'(' if low_open else '['}{low:g}, {high:g}]"
    if not _is_number(value) or not math.isfinite(value):
        raise bad_request(f"`{key}` must be a finite number in {where}", key)
    if value < low or value > high or (low_open and value == low):
        raise bad_request(f"`{key}` must be in {where}, got {value!r}", key)
    return float(value)


def string_list(body: dict, key: str, most: int) -> tuple[str, ...]:
    """A string or a list of at most `most` non-empty strings (OpenAI's `stop`)."""
    value = body.get(key)
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise bad_request(f"`{key}` must be a string or a list of strings", key)
    if len(values) > most:
        raise bad_request(f"`{key}` takes at most {most} strings, got {len(values)}", key)
    if any(not item for item in values):
        raise bad_request(f"`{key}` strings must not be empty", key)
    return tuple(dict.fromkeys(values))


def token_id_list(body: dict, key: str) -> tuple[int, ...]:
    value = optional_list(body, key)
    if value is None:
        return ()
    if not all(_is_integer(item) and item >= 0 for item in value):
        raise bad_request(f"`{key}` must be a list of non-negative token ids", key)
    return tuple(value)
