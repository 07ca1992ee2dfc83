"""The attributes of a span as a flat `{key: (value, path)}` map, whatever way it was written.

OTLP JSON (the collector's file exporter) writes `attributes` as a list of
`{"key", "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue" |
"kvlistValue"}}`, with 64-bit integers as strings; other exports (Phoenix, hand-written logs)
write a plain object of flat keys. Either way each value keeps the JSON path it came from.
"""

from __future__ import annotations

from typing import Any

import orjson

from pcache.prompt.shapes.fields import Where

Attributes = dict[str, tuple[Any, str]]


def _any_value(value: Any, path: str) -> tuple[Any, str]:
    if not isinstance(value, dict) or len(value) != 1:
        return value, path
    kind, inner = next(iter(value.items()))
    at = f"{path}.{kind}"
    if kind == "intValue" and isinstance(inner, str) and inner.lstrip("-").isdigit():
        return int(inner), at
    if kind == "arrayValue" and isinstance(inner, dict):
        values = inner.get("values") or []
        return [_any_value(v, f"{at}.values[{i}]")[0] for i, v in enumerate(values)], at
    if kind == "kvlistValue" and isinstance(inner, dict):
        pairs = inner.get("values") or []
        return {
            p.get("key"): _any_value(p.get("value"), f"{at}.values[{i}].value")[0]
            for i, p in enumerate(pairs)
            if isinstance(p, dict)
        }, at
    return inner, at


def attributes_of(span: dict[str, Any], where: Where) -> Attributes:
    raw = span.get("attributes")
    found: Attributes = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            found[key] = (value, f"attributes.{key}")
    elif isinstance(raw, list):
        for index, entry in enumerate(raw):
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                found[entry["key"]] = _any_value(entry.get("value"), f"attributes[{index}].value")
    elif raw is not None:
        raise where.expect(raw, "attributes", "a list of attributes or an object")
    return found


def keys_of(span: dict[str, Any]) -> list[str]:
    """The attribute keys of a span (cheap: for detection)."""
    raw = span.get("attributes")
    if isinstance(raw, dict):
        return list(raw)
    if isinstance(raw, list):
        return [entry.get("key") for entry in raw if isinstance(entry, dict)]
    return []


def json_attribute(attributes: Attributes, key: str, where: Where) -> tuple[Any, str] | None:
    """An attribute holding JSON text (or already a JSON value), parsed; None when absent."""
    if key not in attributes:
        return None
    value, path = attributes[key]
    if isinstance(value, str):
        try:
            return orjson.loads(value), path
        except orjson.JSONDecodeError as error:
            raise where.error(path, f"holds invalid JSON ({error.msg})") from None
    return value, path


def count(attributes: Attributes, keys: tuple[str, ...]) -> int | None:
    """The first of `keys` present as a non-negative integer."""
    for key in keys:
        value = attributes.get(key, (None, ""))[0]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def span_timestamp_ms(span: dict[str, Any]) -> float | None:
    start = span.get("startTimeUnixNano")
    if isinstance(start, str) and start.isdigit():
        start = int(start)
    if isinstance(start, int) and not isinstance(start, bool):
        return start / 1e6
    return None
