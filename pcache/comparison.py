"""`pcache diff`'s one function: two requests loaded, rendered, hashed and diffed, and the cause
named with the lint rule it breaks (`pcache.divergence.causes.rule_of`, the table the rules
are checked against), as `pcache lint` reports it, without loading the rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.divergence.causes import rule_of
from pcache.divergence.compare import DiffResult, diff
from pcache.pipeline import HashedPrompt, Settings, hash_requests
from pcache.text.redaction import redacting


@dataclass(slots=True)
class Comparison:
    """A diff and the two hashed prompts it compared (the text view quotes their text)."""

    result: DiffResult
    a: HashedPrompt
    b: HashedPrompt


def compare(a: Any, b: Any, settings: Settings, redact: bool = False) -> Comparison:
    """Load, render and hash two requests (paths, bodies, SDK objects), then diff them;
    `redact`: the cause's excerpts and details as shapes, and no token ids."""
    from pcache.prompt.reading.held import one_request

    hashed_a, hashed_b = hash_requests([one_request(a, "A"), one_request(b, "B")], settings)
    with redacting(redact):
        result = diff(hashed_a, hashed_b)
    if redact:
        result.a_tokens, result.b_tokens = [], []
    if result.cause is not None:
        result.cause.rule = rule_of(result.cause.kind)
    return Comparison(result, hashed_a, hashed_b)
