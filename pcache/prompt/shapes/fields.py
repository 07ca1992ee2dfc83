"""Reading the fields of a parsed request: each one checked where it is read, one error type.

Every field pcache reads from a request goes through `Where`, so a value of the wrong type is an
`InputError` naming the file, the line and the JSON path (`messages[1].tool_calls[0].function`)
in words a user knows ("an object", "a string"), never a Python type name or a crash later on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.errors import InputError, NestingError

MAX_NESTING = 100
"""Deepest nesting of lists and objects in a request; deeper values are refused at load (code
that walks them recursively would otherwise run out of stack)."""
MAX_PATH_SHOWN = 100
"""Longer JSON paths are cut in messages (the column still points at the value)."""
_CONTAINERS = (dict, list)
MAX_TOKEN_ID = 2**32 - 1
"""Token ids are hashed as unsigned 32-bit integers, as vLLM does."""


def json_kind(value: Any) -> str:
    """A JSON value's kind as a user would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "an unsupported value"


@dataclass(frozen=True, slots=True)
class Where:
    """The request being read: errors name its file, its line and `prefix` (e.g. `body`)."""

    source: str
    line: int | None
    prefix: str = ""

    def path(self, path: str) -> str:
        if not self.prefix:
            return path
        return f"{self.prefix}.{path}" if path and not path.startswith("[") else self.prefix + path

    def error(self, path: str, message: str) -> InputError:
        full = self.path(path)
        shown = full if len(full) <= MAX_PATH_SHOWN else full[: MAX_PATH_SHOWN - 3] + "..."
        text = f"`{shown}` {message}" if full else message
        return InputError(self.source, text, self.line, json_path=full)

    def expect(self, value: Any, path: str, expected: str) -> InputError:
        if not self.path(path):
            return self.error(path, f"expected {expected}, got {json_kind(value)}")
        return self.error(path, f"must be {expected}, got {json_kind(value)}")

    def object(self, holder: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
        """`holder[key]` when it is an object, None when absent or null, else an error."""
        value = holder.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.expect(value, path, "an object")

    def list(self, holder: dict[str, Any], key: str, path: str) -> list[Any] | None:
        value = holder.get(key)
        if value is None or isinstance(value, list):
            return value
        raise self.expect(value, path, "a list")

    def string(self, holder: dict[str, Any], key: str, path: str) -> str | None:
        value = holder.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.expect(value, path, "a string")

    def identifier(self, holder: dict[str, Any], key: str, path: str) -> str | None:
        """An id or a name: a string, or a number written as its decimal text."""
        value = holder.get(key)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise self.expect(value, path, "a string")

    def count(self, holder: dict[str, Any], key: str, path: str) -> int | None:
        """A non-negative integer (token counts, lengths)."""
        value = holder.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise self.expect(value, path, "a non-negative integer")

    def items(self, values: list[Any], path: str, expected: str = "an object") -> list[Any]:
        """The entries of a list, each of which must be an object."""
        for index, value in enumerate(values):
            if not isinstance(value, dict):
                raise self.expect(value, f"{path}[{index}]", expected)
        return values

    def token_ids(self, values: Any, path: str) -> list[int]:
        if not isinstance(values, list):
            raise self.expect(values, path, "a list of token ids")
        for index, token in enumerate(values):
            if type(token) is not int or not 0 <= token <= MAX_TOKEN_ID:
                if type(token) is float and token.is_integer() and token >= 2**63:
                    raise self.error(
                        f"{path}[{index}]", "is beyond 64 bits (token ids are 0 to 2**32-1)"
                    )
                if type(token) is int:
                    raise self.error(
                        f"{path}[{index}]", f"is {token}, outside 0 to 2**32-1 (token ids)"
                    )
                raise self.expect(token, f"{path}[{index}]", "a non-negative integer")
        return values

    def check_nesting(self, value: Any, path: str = "") -> None:
        """Refuse values nested deeper than MAX_NESTING (checked without recursion)."""
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack:
            current, depth = stack.pop()
            if depth > MAX_NESTING:
                deepest = _deepest_path(value)
                if path:
                    deepest = path + deepest if deepest.startswith("[") else f"{path}.{deepest}"
                failure = self.error(deepest, f"nests more than {MAX_NESTING} levels")
                raise NestingError(
                    failure.source, failure.message, failure.line, json_path=failure.json_path
                )
            children = current.values() if isinstance(current, dict) else current
            depth += 1
            for child in children:
                if isinstance(child, _CONTAINERS):
                    stack.append((child, depth))


def _deepest_path(value: Any) -> str:
    """The JSON path of the first value nested MAX_NESTING + 1 levels deep."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        current, depth, path = stack.pop()
        if depth > MAX_NESTING:
            return path
        if isinstance(current, dict):
            for key, child in current.items():
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1, f"{path}.{key}" if path else key))
        elif isinstance(current, list):
            for index, child in enumerate(current):
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1, f"{path}[{index}]"))
    return ""
