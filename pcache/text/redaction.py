"""Values of a request shown in a message, or only their shapes (`--redact`).

A report that names no string of a request can be pasted into a ticket: with redaction on,
every value a message, an excerpt or a group name quotes becomes its shape. Clocks, dates,
UUIDs and other ids, and email addresses are named by their family; any other run of text by
its length and a short keyed digest, so that two equal values stay visibly equal
(`<text 42 chars #a1b2c3>`) and nobody without the key can test a guess against a digest.

The key is `PCACHE_REDACT_KEY` when set (digests comparable between runs), else random for
the process. Redaction is on inside `redacting()`, for the code that formats the messages of
one command; `quote` and `shown` read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator
from contextvars import ContextVar

from pcache.text.patterns import CLOCK, DATE, EPOCH, RANDOM_ID, TOOL_CALL_ID

KEY_VARIABLE = "PCACHE_REDACT_KEY"
DIGEST_CHARS = 6
"""Hex digits of a digest: a thousand distinct values rarely share one (16.7M digests)."""

_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_FAMILIES = (
    ("email", _EMAIL),
    ("uuid", _UUID),
    ("clock", CLOCK),
    ("date", DATE),
    ("clock", EPOCH),
    ("id", TOOL_CALL_ID),
    ("id", RANDOM_ID),
)
"""What a run of a value is shown as, first match first (an email before the id in it)."""
_KEYED = frozenset({"email", "id"})
"""Families whose shape carries a digest (two users' emails differ; two clocks just tick)."""

_ACTIVE: ContextVar[Redactor | None] = ContextVar("pcache_redaction", default=None)


class Redactor:
    """Shapes of values under one key."""

    def __init__(self, key: bytes):
        self.key = key

    def digest(self, value: str) -> str:
        mac = hmac.new(self.key, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:DIGEST_CHARS]

    def shape(self, value: str) -> str:
        """`value` as the families and lengths of its runs."""
        if not value:
            return "<empty>"
        parts: list[str] = []
        position = 0
        for start, end, family in _runs(value):
            if start > position:
                parts.append(self._text(value[position:start]))
            run = value[start:end]
            parts.append(f"<{family} #{self.digest(run)}>" if family in _KEYED else f"<{family}>")
            position = end
        if position < len(value):
            parts.append(self._text(value[position:]))
        return "".join(parts)

    def _text(self, run: str) -> str:
        size = len(run)
        return f"<text {size} char{'' if size == 1 else 's'} #{self.digest(run)}>"


def _runs(value: str) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, family) matches: earliest first, then longest, then the
    family listed first."""
    found = []
    for rank, (family, pattern) in enumerate(_FAMILIES):
        for match in pattern.finditer(value):
            if match.end() > match.start():
                found.append((match.start(), -match.end(), rank, family))
    found.sort()
    runs, reached = [], 0
    for start, negative_end, _, family in found:
        if start >= reached:
            runs.append((start, -negative_end, family))
            reached = -negative_end
    return runs


_PROCESS_KEY = secrets.token_bytes(32)


def key_of_environment() -> bytes:
    """`PCACHE_REDACT_KEY`, or the process's random key (digests that mean something in this
    run only)."""
    given = os.environ.get(KEY_VARIABLE)
    return given.encode() if given else _PROCESS_KEY


@contextlib.contextmanager
def redacting(enabled: bool = True, key: bytes | None = None) -> Iterator[Redactor | None]:
    """Messages formatted inside show shapes instead of values (`enabled` False: as they are;
    an outer redaction stays on)."""
    if not enabled:
        yield _ACTIVE.get()
        return
    redactor = _ACTIVE.get() or Redactor(key or key_of_environment())
    token = _ACTIVE.set(redactor)
    try:
        yield redactor
    finally:
        _ACTIVE.reset(token)


def active() -> Redactor | None:
    """The redaction in force, if any."""
    return _ACTIVE.get()


def shown(value: str) -> str:
    """`value` as a message shows it: as is, or its shape under redaction."""
    redactor = _ACTIVE.get()
    return value if redactor is None else redactor.shape(value)


def quote(value: str) -> str:
    """`repr(value)` for a message; its shape under redaction."""
    redactor = _ACTIVE.get()
    return repr(value) if redactor is None else redactor.shape(value)
