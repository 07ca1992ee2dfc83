"""A replay's result with nothing a request or its response said (`replay --redact`).

The figures of a replay are counts and times; what could quote a request is the text a server
answered a failed request with, and the token ids a model generated. Under `redacting()`,
`redact_result` shapes the first and drops the second, wherever they sit in the result.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pcache.text.redaction import shown

SHAPED = frozenset({"error", "first_error"})
"""Fields holding a server's words (an error body may echo the prompt)."""
DROPPED = frozenset({"output_token_ids"})
"""Fields holding what a model generated."""


def redact_result(result: Any) -> None:
    """Shape `SHAPED` and clear `DROPPED` fields in `result` and the dataclasses it holds."""
    seen: set[int] = set()
    pending = [result]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for item in dataclasses.fields(value):
                held = getattr(value, item.name)
                if item.name in SHAPED and isinstance(held, str):
                    object.__setattr__(value, item.name, shown(held))
                elif item.name in DROPPED and held is not None:
                    object.__setattr__(value, item.name, None)
                elif isinstance(held, (list, tuple, dict)) or dataclasses.is_dataclass(held):
                    pending.append(held)
