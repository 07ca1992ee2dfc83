"""Text patterns and string comparisons shared by the content rules."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from pcache.prefix import common_prefix_length

CLOCK = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?"
    r"|(?<!\d)\d{1,2}:\d{2}:\d{2}(?!\d)"
    r"|\b\d{1,2}:\d{2}\s?(?:[AaPp]\.?[Mm]\.?)(?![A-Za-z])"
    r"|\b(?:today is|current (?:date|time)|the time is|now is)\b[^\n]{0,40}\d",
    re.IGNORECASE,
)
"""Time-of-day precision, or a phrase announcing today's date next to a number."""

DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? \d{1,2} [A-Z][a-z]+ \d{4}\b"
    r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{4}\b"
    r"|\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December) \d{1,2},? \d{4}\b"
)
"""Day precision dates (only evidence when they change between requests)."""

RANDOM_ID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9A-HJKMNP-TV-Z]{26}\b"
    r"|(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}(?![0-9A-Za-z])"
    r"|\b(?:req|request|trace|span|session|run|msg|conv)[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}\b"
)
"""UUIDs, ULIDs, long hex strings and prefixed request/trace/session ids."""


def normalize_whitespace(text: str) -> str:
    """CRLF to LF, trailing spaces stripped per line, NFC, ends stripped."""
    if text.isascii() and "\r" not in text and " \n" not in text and "\t\n" not in text:
        return text.strip()
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when equal."""
    return None if a == b else common_prefix_length(a, b)


def changed_windows(a: str, b: str) -> tuple[int, str, str]:
    """Where two strings first differ, and the differing middles of each (common ends removed)."""
    start = first_difference(a, b)
    assert start is not None
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    return start, a[start:end_a], b[start:end_b]


def widen(text: str, start: int, end: int, margin: int = 24) -> str:
    """The window [start, end) widened by `margin` characters on each side."""
    return text[max(0, start - margin) : min(len(text), end + margin)]


def short(text: str, limit: int = 40) -> str:
    """A value quoted for a message, shortened in the middle."""
    text = text.replace("\n", "\\n")
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit // 2 - 1) :]
    return repr(text)


def changed_context(a: str, b: str, margin: int = 20) -> tuple[int, str, str]:
    """Where two strings first differ, and each differing middle widened by `margin` characters."""
    start, old, new = changed_windows(a, b)
    return (
        start,
        widen(a, start, start + len(old), margin),
        widen(b, start, start + len(new), margin),
    )


def is_volatile(text: str) -> bool:
    """Text holding a clock value, a date or a random-looking id (PC101/PC103 territory)."""
    return bool(CLOCK.search(text) or DATE.search(text) or RANDOM_ID.search(text))


@lru_cache(maxsize=4096)
def search_clock(text: str) -> tuple[int, str] | None:
    """First clock value in `text` (cached: system prompts repeat across sessions)."""
    match = CLOCK.search(text)
    return (match.start(), match.group(0)) if match else None


@lru_cache(maxsize=4096)
def search_random_id(text: str) -> tuple[int, str] | None:
    match = RANDOM_ID.search(text)
    return (match.start(), match.group(0)) if match else None
